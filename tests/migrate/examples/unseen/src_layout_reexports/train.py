"""modax (2021) lays its package out under src/ (setuptools' src layout, installed from there)
and re-exports its training loop with ``from .training import *``; its scripts import
``from modax.training import train_full`` and pass the optimizer with a step that
``create_update`` returns, ``jit(partial(step, ...))``. Before: the bare ``pkg`` resolved to
nothing unless a file of the package imported itself by that name, and a call through the
re-exported name was no call of the function, so the loop's ``update_fn`` was "no call in
sight" and every object refused FOM107."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'src'))

import jax.numpy as jnp  # noqa: E402
from flax import optim  # noqa: E402

from pkg.training import create_update, train  # noqa: E402


def loss_fn(params, scale):
  return jnp.sum(jnp.tanh(params['w'] * scale - 0.2) ** 2) + jnp.sum(params['b'] ** 2)


params = {'w': jnp.linspace(-1.0, 1.0, 5), 'b': jnp.full((2,), 0.3)}
optimizer = optim.Adam(learning_rate=3e-2, beta1=0.85).create(params)
optimizer, losses = train(create_update(loss_fn, 1.5), optimizer, 4)
print(json.dumps(losses + [float(v) for leaf in (optimizer.target['w'], optimizer.target['b'])
                           for v in leaf]))
