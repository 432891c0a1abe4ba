"""adithyankv/regnerf (RegNeRF fork): `train.main` builds `flax.optim.Adam(config.lr_init)
.create(variables)` into `utils.TrainState`, restores a checkpoint into it, reads the resume step
from `state.optimizer.state.step`, replicates it; the pmapped `train.train_step` (value clip,
norm clip, depth-TV-norm patch regulariser on random rays) calls
`apply_gradient(grad, learning_rate=learning_rate)`, the rate being `math.learning_rate_decay`
of the host step.

The statements of `train.main` that assign `optimizer`, `state`, `train_pstep` (up to
`render_eval_pfn`), then those that assign `state` and `init_step` (restore from an empty
checkpoint folder, resume step, replicate; up to `pdataset`), run as the program wrote them (or as
migrate rewrote them), with the program's `configs.Config` set as configs/llff3.gin sets it
(delayed lr, both clippings, depth-TV-norm decay, density noise) but a tiny MLP (gin: 2 layers
of 16, 8 samples per level), patch size 2, 16 rays + 16 random rays. Then STEPS steps as `main`
makes them (learning rate, resample padding, tvnorm weight from the program's `math`). The
trajectory: init_step, then per step loss, psnr, grad_norm, grad_norm_clipped, then the
final parameters. Stand-ins: tensorflow, tensorboard, PIL, cv2, matplotlib, skimage, dm_pix;
oryx is a module (`_driver.identity_oryx`) whose `core.inverse` inverts the identity only
(`spacing.genspace` always asks oryx, and genspace_fn is None here). Needs gin (`--site`).
"""
import tempfile
import _driver  # noqa: E402
import flax.io  # noqa: E402,F401  before the tensorflow stand-in: real file functions

program, steps = _driver.setup('tensorflow', 'tensorboard', 'PIL', 'cv2', 'matplotlib',
                               'skimage', 'dm_pix')
_driver.identity_oryx()
import gin  # noqa: E402
import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax import random  # noqa: E402
from internal import configs, math, models, utils  # noqa: E402
import train  # noqa: E402

for binding, value in [('MLP.net_depth', 2), ('MLP.net_width', 16),
                       ('MLP.net_depth_viewdirs', 1), ('MLP.net_width_viewdirs', 8),
                       ('MLP.skip_layer', 1), ('MLP.max_deg_point', 4),
                       ('MLP.density_noise', 1.0), ('MipNerfModel.num_samples', 8)]:
  gin.bind_parameter(binding, value)
config = configs.Config(
    batch_size=16, batch_size_random=16, patch_size=2, checkpoint_dir=tempfile.mkdtemp(),
    lr_init=0.002, lr_final=0.00002, lr_delay_steps=4, lr_delay_mult=0.01, max_steps=20,
    grad_max_norm=0.1, grad_max_val=0.1, depth_tvnorm_loss_mult=0.1, depth_tvnorm_decay=True,
    depth_tvnorm_maxstep=8, depth_tvnorm_loss_mult_start=400.0,
    depth_tvnorm_loss_mult_end=0.1, near=0., far=1., white_background=False)
data = np.random.RandomState(0)


def rays(n):
  def column(k):
    return data.rand(1, n, k).astype(np.float32)
  directions = data.randn(1, n, 3).astype(np.float32)
  viewdirs = directions / np.linalg.norm(directions, axis=-1, keepdims=True)
  ones = np.ones((1, n, 1), np.float32)
  return utils.Rays(origins=data.randn(1, n, 3).astype(np.float32), directions=directions,
                    viewdirs=viewdirs, radii=column(1) * 0.01, lossmult=ones,
                    near=0.1 * ones, far=ones)


def batch():
  return {'rays': rays(16), 'rgb': data.rand(1, 16, 3).astype(np.float32),
          'rays_random': rays(16)}


key = random.PRNGKey(20200823)
model, variables = models.construct_mipnerf(key, batch()['rays'], config)
ns = _driver.run_statements(train, 'main', ['optimizer', 'state', 'train_pstep'],
                            stop='render_eval_pfn', model=model, variables=variables,
                            config=config)
ns = _driver.run_statements(train, 'main', ['state', 'init_step'], stop='pdataset', **ns)
state, init_step = ns['state'], ns['init_step']
rngs = random.split(key, 1)
out = [init_step]
for step in range(init_step, init_step + steps):
  lr = math.learning_rate_decay(step, config.lr_init, config.lr_final, config.max_steps,
                                config.lr_delay_steps, config.lr_delay_mult)
  padding = math.log_lerp(step / config.max_steps, config.resample_padding_init,
                          config.resample_padding_final)
  tv = math.compute_tvnorm_weight(step, config.depth_tvnorm_maxstep,
                                  config.depth_tvnorm_loss_mult_start,
                                  config.depth_tvnorm_loss_mult_end)
  state, stats, rngs = ns['train_pstep'](rngs, state, batch(), lr, padding, tv)
  out += [stats.loss[0], stats.psnr[0], stats.grad_norm[0], stats.grad_norm_clipped[0]]
_driver.emit(out, _driver.params_of(jax.tree_util.tree_map(lambda x: x[0], state).optimizer))
