"""jaxnerf-based programs (google-research's jaxnerf and its copies: `PROGRAM` is the `jaxnerf`
folder; `train.main` builds `flax.optim.Adam(FLAGS.lr_init).create(variables)` inline).

The statements of `train.main` that assign `optimizer`, `state` and `learning_rate_fn` run as
the program wrote them (or as migrate rewrote them) on a tiny NeRF (2 layers of 16, 8 + 8
samples per ray); `train.train_step` is pmapped as `main` does, with the learning rate of the
step from the program's own schedule, on random rays and colours.
"""
import functools
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _driver  # noqa: E402

program, steps = _driver.setup()
_driver.stand_in('tensorflow', 'tensorboard')
import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax import random  # noqa: E402

package = program.name
train = __import__(f'{package}.train', fromlist=['train'])
models = __import__(f'{package}.nerf.models', fromlist=['models'])
utils = __import__(f'{package}.nerf.utils', fromlist=['utils'])

FLAGS = train.FLAGS
FLAGS(['driver', '--net_depth=2', '--net_width=16', '--net_depth_condition=1',
       '--net_width_condition=8', '--skip_layer=1', '--num_coarse_samples=8',
       '--num_fine_samples=8', '--batch_size=32', '--max_steps=100', '--lr_delay_steps=0'])

rng = np.random.RandomState(0)


def batch():
  directions = rng.randn(1, 32, 3).astype(np.float32)
  viewdirs = directions / np.linalg.norm(directions, axis=-1, keepdims=True)
  rays = utils.Rays(origins=rng.randn(1, 32, 3).astype(np.float32), directions=directions,
                    viewdirs=viewdirs)
  return {'rays': rays, 'pixels': rng.rand(1, 32, 3).astype(np.float32)}


key = random.PRNGKey(20200823)
model, variables = models.get_model(key, batch(), FLAGS)
ns = _driver.run_statements(train, 'main', ['optimizer', 'state', 'learning_rate_fn'],
                            stop='train_pstep',
                            model=model, variables=variables, FLAGS=FLAGS)
state = jax.device_put_replicated(ns['state'], jax.local_devices()[:1])
train_pstep = jax.pmap(functools.partial(train.train_step, model), axis_name='batch',
                       in_axes=(0, 0, 0, None))
keys = random.split(key, 1)
losses = []
for step in range(1, steps + 1):
  lr = ns['learning_rate_fn'](step)
  state, stats, keys = train_pstep(keys, state, batch(), lr)
  losses.append(stats.loss[0])
unreplicated = jax.tree_util.tree_map(lambda x: x[0], state)
_driver.emit(losses, _driver.params_of(unreplicated.optimizer))
