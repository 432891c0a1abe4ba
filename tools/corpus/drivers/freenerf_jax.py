"""mickey0226's freenerf-jax at 334cda54 (a copy of FreeNeRF, itself RegNeRF's code with frequency
regularisation and an occlusion loss), ``FreeNeRF/train.py``: ``main`` builds
``flax.optim.Adam(config.lr_init).create(variables)`` into ``utils.TrainState`` (a
``flax.struct.dataclass`` whose field is typed ``flax.optim.Optimizer``, migrated to
``train_state.TrainState``), restores a checkpoint into it, reads the resume step from
``state.optimizer.state.step``, replicates it; the pmapped ``train_step`` (value clip, norm clip,
the FreeNeRF occlusion loss over ``ray_history``) calls ``apply_gradient(grad,
learning_rate=learning_rate)``, the rate being the program's ``math.learning_rate_decay`` of the
host step (delayed: it changes every step).

The statements of ``train.main`` that assign ``optimizer``, ``state``, ``train_pstep`` (up to
``render_eval_pfn``), then those that assign ``state`` and ``init_step`` (restore from the
checkpoint folder, resume step, replicate; up to ``pdataset``), run as the program wrote them
(or as migrate rewrote them), with the program's ``configs.Config`` set as
``configs/freenerf/llff3_freenerf.gin`` sets it (frequency regularisation, occlusion loss
0.01, delayed rate 0.002 -> 0.00002, both clippings 0.1, density noise 1, cylinder rays, no
random rays) but tiny: a 2-layer MLP of 16 (gin), 16 samples per level, occlusion range 4,
``freq_reg_end`` 8 and ``max_steps`` 20 (so the masks and the rate move every step), lr delay over
4 steps; 16 rays per step (8 per device on 2 simulated devices: run with ``--devices 2``).
Each step is made as ``main``'s loop makes it: ``batch['freq_reg_mask']`` from the program's
``math.get_freq_reg_mask(99, ...)`` / ``(27, ...)`` tiled over the devices, the rate from
``math.learning_rate_decay``, the padding from ``math.log_lerp``, the tv-norm weight
(``config.depth_tvnorm_loss_mult``, as ``main`` takes it without decay).

Two runs: STEPS steps from step 1, then the unreplicated state saved as the loop saves it
(``checkpoints.save_checkpoint(config.checkpoint_dir, state_to_save, int(step), keep=100)``; it
must be the legacy format, one msgpack file ``checkpoint_<step>``); the statements again (a
fresh optimizer restored from that file: ``init_step`` = STEPS + 1, asserted), and 2 more
steps. The trajectory: per step loss, psnr, grad_norm, grad_norm_clipped; the second
``init_step``; then the final parameters.

Changes on both sides, none about flax.optim: ``internal/mip.py`` imports
``jax.scipy.special.sph_harm``, which jax 0.10.2 lacks (migrate's FOM299 says so): the driver
gives ``jax.scipy.special`` a ``sph_harm`` that raises (only ``dir_enc`` calls it, with
``if_use_dir_enc``, off here). The program calls ``.tile(reps)`` on jax arrays (the frequency
masks, in ``main``'s loop and in ``MLP.__call__``, concrete and traced), a method jax 0.10.2's
arrays and tracers do not have: the driver gives them one, ``jnp.tile``. ``oryx`` is ``_driver.identity_oryx``, whose ``core.inverse`` inverts the identity
only (``spacing.genspace`` asks it; ``genspace_fn`` is None here). Stand-ins (data loading,
logging, images): tensorflow, tensorboard, PIL, cv2, matplotlib, skimage, dm_pix, wandb.
Needs gin (``--site``).
"""
import os
import tempfile

import _driver  # noqa: E402
import flax.io  # noqa: E402,F401  before the tensorflow stand-in: real file functions

program, steps = _driver.setup('tensorflow', 'tensorboard', 'PIL', 'cv2', 'matplotlib',
                               'skimage', 'dm_pix', 'wandb', source_dirs=['FreeNeRF'])
import jax  # noqa: E402
import jax.scipy.special  # noqa: E402


def _no_sph_harm(*args, **kwargs):
  raise NotImplementedError('sph_harm: not in jax 0.10.2 (dir_enc only, off here)')


_driver.identity_oryx()
if not hasattr(jax.scipy.special, 'sph_harm'):
  jax.scipy.special.sph_harm = _no_sph_harm
# `mask.tile(reps)` (main's loop and MLP.__call__, on concrete arrays and on tracers): jnp.tile.
for _cls in (jax.Array, type(jax.numpy.zeros(1)), jax.core.Tracer):
  if not hasattr(_cls, 'tile'):
    _cls.tile = lambda self, reps: jax.numpy.tile(self, reps)

import gin  # noqa: E402
import numpy as np  # noqa: E402
from jax import random  # noqa: E402
from internal import configs, math, models, utils  # noqa: E402
import train  # noqa: E402

for binding, value in [('MLP.net_depth', 2), ('MLP.net_width', 16),
                       ('MLP.net_depth_viewdirs', 1), ('MLP.net_width_viewdirs', 8),
                       ('MLP.skip_layer', 1), ('MLP.density_noise', 1.0),
                       ('MipNerfModel.num_samples', 16), ('MipNerfModel.ray_shape', 'cylinder')]:
  gin.bind_parameter(binding, value)
config = configs.Config(
    use_wandb=False, freq_reg=True, freq_reg_end=8, occ_reg_loss_mult=0.01, occ_reg_range=4,
    occ_wb_prior=False, load_random_rays=False, batch_size=16, checkpoint_dir=tempfile.mkdtemp(),
    lr_init=0.002, lr_final=0.00002, lr_delay_steps=4, lr_delay_mult=0.01, max_steps=20,
    grad_max_norm=0.1, grad_max_val=0.1, near=0., far=1., white_background=False)
N_DEV = jax.local_device_count()
PER_DEVICE = config.batch_size // N_DEV
data = np.random.RandomState(0)


def rays(lead):
  shape = (*lead, 1)
  directions = data.randn(*lead, 3).astype(np.float32)
  viewdirs = directions / np.linalg.norm(directions, axis=-1, keepdims=True)
  ones = np.ones(shape, np.float32)
  return utils.Rays(origins=data.randn(*lead, 3).astype(np.float32), directions=directions,
                    viewdirs=viewdirs, radii=data.rand(*shape).astype(np.float32) * 0.01,
                    lossmult=ones, near=0.1 * ones, far=ones)


def batch(step):
  b = {'rays': rays((N_DEV, PER_DEVICE)),
       'rgb': data.rand(N_DEV, PER_DEVICE, 3).astype(np.float32)}
  n = b['rays'].origins.shape[0]
  b['freq_reg_mask'] = (
      math.get_freq_reg_mask(99, step, config.freq_reg_end, config.max_vis_freq_ratio).tile((n, 1)),
      math.get_freq_reg_mask(27, step, config.freq_reg_end, config.max_vis_freq_ratio).tile((n, 1)))
  return b


key = random.PRNGKey(20200823)
model, variables = models.construct_mipnerf(key, rays((1, 10)), config)


def build():
  ns = _driver.run_statements(train, 'main', ['optimizer', 'state', 'train_pstep'],
                              stop='render_eval_pfn', model=model, variables=variables,
                              config=config)
  return _driver.run_statements(train, 'main', ['state', 'init_step'], stop='pdataset', **ns)


def run(ns, n, out):
  state, init_step = ns['state'], int(ns['init_step'])
  rngs = random.split(key, N_DEV)
  for step in range(init_step, init_step + n):
    lr = math.learning_rate_decay(step, config.lr_init, config.lr_final, config.max_steps,
                                  config.lr_delay_steps, config.lr_delay_mult)
    padding = math.log_lerp(step / config.max_steps, config.resample_padding_init,
                            config.resample_padding_final)
    state, stats, rngs = ns['train_pstep'](rngs, state, batch(step), lr, padding,
                                           config.depth_tvnorm_loss_mult)
    out += [stats.loss[0], stats.psnr[0], stats.grad_norm[0], stats.grad_norm_clipped[0]]
  return state, init_step + n - 1


out = []
ns = build()
assert int(ns['init_step']) == 1, ns['init_step']
state, last = run(ns, steps, out)
state_to_save = jax.device_get(jax.tree_util.tree_map(lambda x: x[0], state))
train.checkpoints.save_checkpoint(config.checkpoint_dir, state_to_save, int(last), keep=100)
files = sorted(os.listdir(config.checkpoint_dir))
assert files == [f'checkpoint_{last}'] and os.path.isfile(
    os.path.join(config.checkpoint_dir, files[0])), f'not the legacy msgpack checkpoint: {files}'
ns = build()
assert int(ns['init_step']) == steps + 1, ns['init_step']
out.append(ns['init_step'])
state, _ = run(ns, 2, out)
_driver.emit(out, _driver.params_of(jax.tree_util.tree_map(lambda x: x[0], state).optimizer))
