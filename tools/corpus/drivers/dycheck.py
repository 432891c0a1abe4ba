"""KAIR-BAIR's dycheck: ``core/engines/base.py``'s ``Engine.build_model`` creates
``optim.Adam(0).create(variables)`` (every collection of the model's variables, its mutable
``alpha`` among them) into ``utils/struct.TrainState``; ``core/engines/trainer.py``'s
``Trainer.launch`` replicates it and pmaps ``core/training.train_step``, which replaces the
optimizer's target by the mutated variables (``optimizer.replace(target=...)``) and calls
``apply_gradient(grad, learning_rate=train_scalars.lr)``, the rate from
``TrainSchedules.eval_scalars(step)`` on the host.

Both methods run as the program's own code on a stand-in ``self``: ``Engine.build_model`` with a
dataset of 3 time steps and 2 cameras (``parser.load_camera`` returning random intrinsics and
extrinsics; near 0.5, far 2), the model ``models.DyNeRF`` (static: ``use_warp`` False), made
small through its gin bindings (8 coarse and 8 fine samples, ``NeRFMLP`` trunk 2 x 32 with a skip
at 1, ``rgb_width`` 16, ``sigma_width`` 16); then ``Trainer.launch`` for STEPS steps
(``init_step`` 1) with ``TrainSchedules.lr_sched = ExponentialSchedule(1e-3, 1e-4, 10)``
(bound with gin, as the program's configs do), on batches of 16 random rays (origins, unit
directions, time and camera ids), colours and masks. ``tasks.every_n_steps`` (the program's
logging and checkpoint tasks) is the driver's, recording each step's stats. The trajectory: per
step every stat (``loss/rgb``, ``loss/total``, PSNRs), then the final optimizer's variables.
Stand-ins (not on the optimizer path): ``processors/dpt/_impl`` and ``processors/raft/_impl``
(symlinks into the DPT and RAFT git submodules, PyTorch preprocessing, absent from the folder),
cv2, torch, torchvision, trimesh, tensorflow,
tensorflow_graphics, plotly, matplotlib, IPython, ipyevents, ipywidgets, sklearn, ffmpeg, tqdm,
addict, tensorboard (flax.metrics.tensorboard's). One jax behaviour given back on both sides:
``jnp.broadcast_to`` of a Python list (the renderer's, see below).
Needs gin (``--site``).
"""
import _driver

program, steps = _driver.setup('cv2', 'torch', 'torchvision', 'trimesh', 'tensorflow',
                               'tensorflow_graphics', 'plotly', 'matplotlib', 'IPython',
                               'ipyevents', 'ipywidgets', 'sklearn', 'ffmpeg', 'tqdm', 'addict',
                               'tensorboard')
import functools  # noqa: E402
import sys  # noqa: E402
import types  # noqa: E402

# processors/dpt/_impl and processors/raft/_impl are symlinks into git submodules (DPT, RAFT:
# PyTorch depth and flow networks for preprocessing), not in the program folder.
for sub in ('dpt', 'raft'):
  for leaf in ('', '.models', '.transforms', '.raft', '.utils', '.utils.utils'):
    module = sys.modules[f'dycheck.processors.{sub}._impl{leaf}'] = _driver._StandIn()
    module.__path__ = []

import gin  # noqa: E402
import jax  # noqa: E402
import numpy as np  # noqa: E402

# nn/functional/rendering.py's volrend calls jnp.broadcast_to([last_sample_t], shape): a list.
_driver.broadcast_to_takes_lists()

from dycheck.core import training  # noqa: E402
from dycheck.core.engines import base, trainer  # noqa: E402
from dycheck.models.dynerf import DyNeRF  # noqa: E402
from dycheck.utils import struct  # noqa: E402

gin.parse_config('''
DyNeRF.num_coarse_samples = 8
DyNeRF.num_fine_samples = 8
NeRFMLP.trunk_depth = 2
NeRFMLP.trunk_width = 32
NeRFMLP.skips = (1,)
NeRFMLP.rgb_width = 16
NeRFMLP.sigma_width = 16
TrainSchedules.lr_sched = @ExponentialSchedule()
ExponentialSchedule.initial_value = 1e-3
ExponentialSchedule.final_value = 1e-4
ExponentialSchedule.num_steps = 10
''')

rng = np.random.RandomState(0)
TIMES, CAMERAS, N = [0, 1, 2], [0, 1], 16


def load_camera(time_id, camera_id):
  r = np.random.RandomState(10 * time_id + camera_id)
  return types.SimpleNamespace(
      intrin=r.rand(3, 3).astype(np.float32), extrin=r.rand(4, 4).astype(np.float32),
      radial_distortion=np.zeros(3, np.float32), tangential_distortion=np.zeros(2, np.float32),
      image_size=np.array([8, 8], np.int32))


dataset = types.SimpleNamespace(
    parser=types.SimpleNamespace(load_camera=load_camera), time_ids=[0, 1, 2, 0, 1, 2],
    camera_ids=[0, 0, 0, 1, 1, 1], embeddings_dict={'time': TIMES, 'camera': CAMERAS},
    near=0.5, far=2.0)
engine = types.SimpleNamespace(dataset=dataset, model_cls=DyNeRF)
model, state = base.Engine.build_model(engine)

n = jax.local_device_count()


def batch():
  directions = rng.randn(n, N, 3)
  directions /= np.linalg.norm(directions, axis=-1, keepdims=True)
  rays = struct.Rays(
      origins=rng.randn(n, N, 3).astype(np.float32) * 0.1,
      directions=directions.astype(np.float32),
      metadata=struct.Metadata(time=rng.randint(0, 3, (n, N, 1)).astype(np.uint32),
                               camera=rng.randint(0, 2, (n, N, 1)).astype(np.uint32)))
  return {'rays': rays, 'rgb': rng.rand(n, N, 3).astype(np.float32),
          'mask': np.ones((n, N, 1), np.float32)}


losses = []
run = types.SimpleNamespace(
    dataset=[batch() for _ in range(steps)], state=state, key=engine.key, init_step=1,
    max_steps=steps, train_step=functools.partial(training.train_step, model))


def every_n_steps():
  stats = jax.device_get(run.pstats)
  losses.extend(float(np.asarray(stats[k]).ravel()[0]) for k in sorted(stats))


run.tasks = types.SimpleNamespace(start=lambda: None, every_n_steps=every_n_steps,
                                  finalize=lambda: None)
trainer.Trainer.launch(run)
_driver.emit(losses, _driver.params_of(run.pstate.optimizer))
