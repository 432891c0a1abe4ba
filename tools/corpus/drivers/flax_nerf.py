"""myagues' flax_nerf (``main.main``: ``optimizer = optim.Adam()`` without a learning rate, a
``TrainState(step, optimizer=optimizer.create(...))`` dataclass, first of the coarse model's
parameters, then of the coarse and fine ones; ``checkpoints.restore_checkpoint`` into it,
``jax_utils.replicate``, and the pmapped ``utils.train_step`` whose
``apply_gradient(grad, learning_rate=lr)`` takes ``lr = learning_rate_fn(state.step)``).

``main.main``'s own statements, cut out by ``_driver.run_statements``: the models, the optimizer
and state (both creates), the restore from an empty model folder, the replicate, the learning
rate schedule (``constant * decay_every``) and the pmapped step. ``FLAGS`` is the driver's:
``configs/default.py``'s config with a small model (depth 3, width 32, skip after layer 1), 16
random rays per step, 8 coarse and 4 fine samples (``num_importance`` > 0: the coarse and fine
path), ``raw_noise_std`` 1.0 (the noise rng used), perturbation on. ``near``, ``far`` (2, 6) and
the batches (rays: random origins, unit directions and view directions; random colours) stand
for ``get_dataset``'s. The trajectory: per step every metric (loss, loss_c, loss_f, psnr,
psnr_c, psnr_f, lr), then the final parameters. Stand-ins (not on the optimizer path):
tensorflow, clu, imageio, pandas, tqdm (data loading and logging only); ``flax.io`` is imported
before the stand-ins, so that it does not take the tensorflow stand-in for ``tf.io.gfile``. Needs ml_collections
(``--site``).
"""
import _driver
import flax.io  # noqa: F401  before the tensorflow stand-in: its file functions stay the real ones

program, steps = _driver.setup('tensorflow', 'clu', 'imageio', 'tqdm', 'pandas')
import tempfile  # noqa: E402
import types  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402

import main  # noqa: E402
from configs import default  # noqa: E402

config = default.get_config()
config.model.net_depth = config.model_fine.net_depth = 3
config.model.net_width = config.model_fine.net_width = 32
config.model.skips = config.model_fine.skips = (1,)
config.num_rand, config.num_samples, config.num_importance = 16, 8, 4
config.raw_noise_std = 1.0
flags = types.SimpleNamespace(config=config, seed=0, model_dir=tempfile.mkdtemp())
main.FLAGS = flags  # `initialized` reads the module's FLAGS
ns = _driver.run_statements(
    main, 'main',
    ['rng', 'rngs', 'initialized_', 'pts_shape', 'views_shape', 'model_coarse', 'params_coarse',
     'optimizer', 'state', 'model_fn', 'learning_rate_fn', 'train_fn', 'p_train_step'],
    stop='writer', FLAGS=flags, near=2.0, far=6.0)
state, p_train_step, rngs = ns['state'], ns['p_train_step'], ns['rngs']

rng = np.random.RandomState(0)
n = jax.local_device_count()
losses = []
for _ in range(steps):
  origins = rng.randn(n, config.num_rand, 3)
  directions = rng.randn(n, config.num_rand, 3)
  directions /= np.linalg.norm(directions, axis=-1, keepdims=True)
  batch = {'rays': np.concatenate([origins, directions, directions], -1).astype(np.float32),
           'image': rng.rand(n, config.num_rand, 3).astype(np.float32)}
  state, metrics = p_train_step(state, batch, None, rngs)
  losses.extend(np.asarray(metrics[k]).ravel()[0] for k in sorted(metrics))
_driver.emit(losses, _driver.params_of(state.optimizer))
