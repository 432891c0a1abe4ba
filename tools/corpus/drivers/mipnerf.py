"""google's mipnerf (`train.main` builds `flax.optim.Adam(config.lr_init).create(variables)` into
`utils.TrainState`; the pmapped `train.train_step` clips the gradient by value and by norm and
calls `apply_gradient(grad, learning_rate=lr)` with `lr` from `math.learning_rate_decay` of the
host's step counter).

The statements of `train.main` that assign the optimizer, the state, the schedule and the pmapped
step (up to `render_eval_pfn`) run as the program wrote them (or as migrate rewrote them), on a
tiny mip-NeRF bound through gin (MLP 2 layers of 16, 8 samples per level), with the program's
`utils.Config` (delayed warmup over 2 steps, both clippings on); the step is called as `main`
calls it, on random cone rays and colours. Needs gin (`--site`).
"""
import _driver

program, steps = _driver.setup('tensorflow', 'tensorboard', 'PIL', 'cv2', 'matplotlib', 'imageio')
import gin  # noqa: E402
import jax  # noqa: E402
import numpy as np  # noqa: E402
from flax import jax_utils  # noqa: E402
from jax import random  # noqa: E402
from internal import models, utils  # noqa: E402
import train  # noqa: E402

for binding, value in [('MLP.net_depth', 2), ('MLP.net_width', 16),
                       ('MLP.net_depth_condition', 1), ('MLP.net_width_condition', 8),
                       ('MLP.skip_layer', 1), ('MipNerfModel.num_samples', 8),
                       ('MipNerfModel.max_deg_point', 4)]:
  gin.bind_parameter(binding, value)
config = utils.Config(batch_size=32, lr_delay_steps=2, max_steps=100, grad_max_norm=0.05,
                      grad_max_val=0.01)
rng = np.random.RandomState(0)


def batch():
  def column(n):
    return rng.rand(1, 32, n).astype(np.float32)
  directions = rng.randn(1, 32, 3).astype(np.float32)
  viewdirs = directions / np.linalg.norm(directions, axis=-1, keepdims=True)
  ones = np.ones((1, 32, 1), np.float32)
  rays = utils.Rays(origins=rng.randn(1, 32, 3).astype(np.float32), directions=directions,
                    viewdirs=viewdirs, radii=column(1) * 0.01, lossmult=ones, near=2 * ones,
                    far=6 * ones)
  return {'rays': rays, 'pixels': column(3)}


key = random.PRNGKey(20200823)
model, variables = models.construct_mipnerf(key, batch())
ns = _driver.run_statements(train, 'main', ['optimizer', 'state', 'learning_rate_fn',
                                            'train_pstep'],
                            stop='render_eval_pfn', model=model, variables=variables,
                            config=config)
state = jax_utils.replicate(ns['state'])
keys = random.split(key, 1)
losses = []
for step in range(1, steps + 1):
  lr = ns['learning_rate_fn'](step)
  state, stats, keys = ns['train_pstep'](keys, state, batch(), lr)
  losses.append(stats.loss[0])
_driver.emit(losses, _driver.params_of(jax_utils.unreplicate(state).optimizer))
