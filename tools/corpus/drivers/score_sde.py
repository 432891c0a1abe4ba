"""yang-song's score_sde and its copies (`run_lib.train` builds
`losses.get_optimizer(config).create(initial_params)`, an `Adam`, into `mutils.State` beside an EMA
of the parameters; `losses.optimization_manager`'s step warms the rate up from `state.step`, clips
the gradient's global norm, and calls `apply_gradient(..., learning_rate=lr)`).

The statements of `run_lib.train` that build the model, the optimizer and the state (up to the
checkpoint folders), then those that build the SDE, the step functions and the pmapped
`jax.lax.scan` of `train_step_fn` (up to `eval_step_fn`), run as the program wrote them (or as
migrate rewrote them); the config is the program's `configs/vp/ddpm/cifar10.py`, shrunk (a DDPM of
32 channels on 8x8 images, batch 4, warmup over 3 steps, one step per pmapped call). No flax flag
is given on either side: `init_model` unpacks `variables.pop('params')`, a FrozenDict's pair on
the legacy side (importing flax.optim sets `flax_return_frozendict`), `flax.core.pop` on the
migrated side (FOM018). Needs ml_collections (`--site`).
"""
import _driver

program, steps = _driver.setup('tensorflow', 'tensorflow_datasets', 'tensorflow_gan',
                               'tensorflow_hub', 'tensorboard', 'PIL', 'six')
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from flax import jax_utils  # noqa: E402
import run_lib  # noqa: E402
from configs.vp.ddpm import cifar10  # noqa: E402

config = cifar10.get_config()
config.data.image_size = 8
config.model.nf = 32
config.model.ch_mult = (1, 2)
config.model.num_res_blocks = 1
config.model.attn_resolutions = (4,)
config.model.ema_rate = 0.9
config.training.batch_size = 4
config.training.n_jitted_steps = 1
config.optim.warmup = 3
config.optim.lr = 1e-3

ns = _driver.run_statements(
    run_lib, 'train', ['rng', 'step_rng', 'score_model', 'init_model_state', 'initial_params',
                       'optimizer', 'state'],
    stop='checkpoint_dir', config=config)
ns = _driver.run_statements(
    run_lib, 'train', ['sde', 'sampling_eps', 'optimize_fn', 'continuous', 'reduce_mean',
                       'likelihood_weighting', 'train_step_fn', 'p_train_step'],
    stop='eval_step_fn', **ns)
pstate = jax_utils.replicate(ns['state'])
rng = jax.random.PRNGKey(1)
data = np.random.RandomState(0)
losses = []
for _ in range(steps):
  batch = {'image': data.rand(1, 1, 4, 8, 8, 3).astype(np.float32) * 2 - 1}
  rng, *next_rng = jax.random.split(rng, num=2)
  (_, pstate), ploss = ns['p_train_step']((jnp.asarray(next_rng), pstate), batch)
  losses.append(ploss[0, 0])
final = jax_utils.unreplicate(pstate)
_driver.emit(losses, (_driver.params_of(final.optimizer), final.params_ema))
