"""jaxnerf-based programs (google-research's jaxnerf and its copies; `train.main`, or VaxNeRF's
`train.train`, builds `flax.optim.Adam(FLAGS.lr_init).create(variables)` inline).

`PROGRAM` is either a `jaxnerf` package folder (`jaxnerf/train.py`, `jaxnerf/nerf/`) or a project
root with `train.py` and `nerf/` (VaxNeRF). The statements of the training function that assign
the optimizer, the state, the learning-rate schedule and the pmapped step (`train_pstep`) run
as the program wrote them (or as migrate rewrote them), up to `render_pfn`, on a tiny NeRF (2
layers of 16, 8 + 8 samples per ray); the step is called as the program calls it, with the
learning rate of the step from the program's own schedule, on random rays and colours.

A program whose flags also choose a NeXT model (Crishawy/NeXT's jaxnerf: `--model next`,
`--backbone`, `nerf/nerf_transformer.py`, which its `scripts/train_next_blender.sh` trains) runs
a second time the same way with `--model=next --backbone=next_s` (the backbone fixes its width,
192, and its attention window, 64 samples: 64 coarse + 64 fine samples per ray); the trajectory
is then both runs' losses, then both runs' parameters. Given on both sides: `jnp.broadcast_to`
of a Python list (NeXT's `model_utils.volumetric_rendering`, `jnp.broadcast_to([1e10], ...)`,
where jaxnerf has `1e10`; `_driver.broadcast_to_takes_lists`).
"""
import _driver

program, steps = _driver.setup('tensorflow', 'tensorboard', 'cv2', 'PIL', 'imageio', 'wandb')
_driver.broadcast_to_takes_lists()
import jax  # noqa: E402
import numpy as np  # noqa: E402
from flax import jax_utils  # noqa: E402
from jax import random  # noqa: E402

prefix = f'{program.name}.' if (program / '__init__.py').exists() else ''
train = __import__(f'{prefix}train', fromlist=['train'])
models = __import__(f'{prefix}nerf.models', fromlist=['models'])
utils = __import__(f'{prefix}nerf.utils', fromlist=['utils'])

FLAGS = train.FLAGS
WANTED = ['--net_depth=2', '--net_width=16', '--net_depth_condition=1', '--net_width_condition=8',
          '--skip_layer=1', '--num_coarse_samples=8', '--num_fine_samples=8', '--batch_size=32',
          '--max_steps=100', '--lr_max_steps=100', '--lr_delay_steps=0']
NEXT = ['--model=next', '--backbone=next_s', '--num_coarse_samples=64', '--num_fine_samples=64']

rng = np.random.RandomState(0)


def batch():
  directions = rng.randn(1, 32, 3).astype(np.float32)
  viewdirs = directions / np.linalg.norm(directions, axis=-1, keepdims=True)
  rays = utils.Rays(origins=rng.randn(1, 32, 3).astype(np.float32), directions=directions,
                    viewdirs=viewdirs)
  return {'rays': rays, 'pixels': rng.rand(1, 32, 3).astype(np.float32)}


def _has(module, function):
  try:
    return 'train_pstep' in _driver.statements(module, function, ['train_pstep'])
  except AssertionError:
    return False


def run(flags):
  """`steps` steps of the program's training function with these flags: (losses, parameters)."""
  FLAGS(['driver'] + [flag for flag in flags if flag[2:].split('=')[0] in FLAGS])
  key = random.PRNGKey(20200823)
  model, variables = models.get_model(key, batch(), FLAGS)
  function = next(name for name in ('main', 'train') if _has(train, name))
  ns = _driver.run_statements(train, function,
                              ['optimizer', 'state', 'learning_rate_fn', 'train_pstep', 'voxel'],
                              stop='render_pfn', model=model, variables=variables, FLAGS=FLAGS)
  state = jax_utils.replicate(ns['state'])
  keys = random.split(key, 1)
  losses = []
  for step in range(1, steps + 1):
    lr = ns['learning_rate_fn'](step)
    state, stats, keys = ns['train_pstep'](keys, state, batch(), lr)
    losses.append(stats.loss[0])
  unreplicated = jax.tree_util.tree_map(lambda x: x[0], state)
  return losses, _driver.params_of(unreplicated.optimizer)


runs = [run(WANTED)] + ([run(WANTED + NEXT)] if 'backbone' in FLAGS else [])
_driver.emit([loss for losses, _ in runs for loss in losses], [params for _, params in runs])
