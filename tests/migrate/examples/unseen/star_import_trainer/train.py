"""A trainer class reached through star imports (afqueiruga/StatefulOdeNets, 2021: its
``run_experiment.py`` does ``from . import *`` and calls ``Trainer(...).train_epoch(optimizer,
...)``): ``Trainer`` and ``mse`` are names no statement of this file binds. Before, the call did
not resolve and the optimizer was refused (FOM107, "not a function or class of the given
files"); now a star import of the project's own module binds what it binds at run time. Its
``trainer`` is bound twice (again in the loop), each time to a ``Trainer``: that class's
method is the one called."""
import json

import jax
import jax.numpy as jnp
from flax import optim

from trainpkg import *
from trainpkg.training import *


def main():
  params = {'w': jnp.full((3, 2), 0.2), 'b': jnp.zeros(2)}
  optimizer = optim.Adam(learning_rate=0.05).create(params)
  x = jax.random.normal(jax.random.PRNGKey(0), (8, 3))
  y = jnp.cos(x[:, :2])
  losses = []
  trainer = Trainer(x, y)
  for epoch in range(4):
    if epoch == 2:   # a fresh trainer, as StatefulOdeNets makes one when it refines its model
      trainer = Trainer(x, y)
    optimizer, loss = trainer.train_epoch(optimizer, 0.05 / (1 + epoch))
    losses.append(float(loss))
  losses.append(float(mse(optimizer.target, x, y)))
  print(json.dumps(losses + [float(v) for v in jax.tree_util.tree_leaves(optimizer.target)
                             for v in jnp.ravel(v)]))


if __name__ == '__main__':
  main()
