"""sezaiacers/diffusion (a DDPM in Linen: `train.train_and_sample` creates
`optim.Adam(config.lr, eps=config.eps).create(params)` over the model's whole variables,
restores `(opt, params, initial_step)` as one checkpoint tuple, and its pmapped `update_fn`
clips the gradient's global norm, calls `opt.apply_gradient(grad, learning_rate=lr_fn(step))`
with a warmup from the step it is given, and keeps an EMA of `opt.target`).

The statements of `train.train_and_sample` that build the diffusion, the model, the optimizer,
the checkpoint restore (of a folder that does not exist: it hands the target back), the
replicated state and the pmapped update run as the program wrote them (or as migrate rewrote
them); then the driver calls the update per step as the training loop does. The config is the
program's `configs/default.py`, shrunk: 8x8 images, 32 channels, two resolutions, batch 4,
warmup over 2 steps, 100 timesteps, EMA decay 0.9 (the program reads `config.decay`, which its
default config does not set). Data and logging libraries are stand-ins (the data is random;
`flax.io` is imported before them, so that the restore's file checks are the real ones); needs
ml_collections (`--site`).
"""
import os
import tempfile

import _driver
import flax.io  # noqa: F401  before the tensorflow stand-in: its file functions stay the real ones

program, steps = _driver.setup('tensorflow', 'tensorflow_datasets', 'clu', source_dirs=())
import jax  # noqa: E402
import numpy as np  # noqa: E402
from flax import jax_utils  # noqa: E402
from diffusion import train  # noqa: E402
from diffusion.configs import default  # noqa: E402

config = default.get_config()
config.image_size = 8
config.ch = 32
config.ch_mult = (1, 2)
config.num_res_blocks = 1
config.attn_resolutions = [4]
config.batch = 4
config.lr = 1e-3
config.lr_warmup = 2
config.num_timesteps = 100
config.decay = 0.9

ns = _driver.run_statements(
    train, 'train_and_sample',
    ['rng', 'init_rng', 'diffusion', 'apply_fn', 'params', 'opt', 'lr_fn', 'initial_step',
     'total_steps', 'opt_repl', 'params_repl', 'update_rng_repl', 'update_fn_repl'],
    stop='sample_fn_repl', config=config,
    workdir=os.path.join(tempfile.mkdtemp(), 'checkpoints'))
opt_repl, params_repl = ns['opt_repl'], ns['params_repl']
update_rng_repl = ns['update_rng_repl']
data = np.random.RandomState(0)
losses = []
for step in range(1, steps + 1):
  batch = {'image': data.rand(1, 4, 8, 8, 3).astype(np.float32) * 2 - 1,
           'label': np.zeros((1, 4), np.int32)}
  opt_repl, params_repl, update_rng_repl, loss_repl = ns['update_fn_repl'](
      opt_repl, params_repl, jax_utils.replicate(step), batch, update_rng_repl)
  losses.append(jax_utils.unreplicate(loss_repl))
_driver.emit(losses, (_driver.params_of(jax_utils.unreplicate(opt_repl)),
                      jax_utils.unreplicate(params_repl)))
