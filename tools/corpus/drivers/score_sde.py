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
import numpy as np  # noqa: E402
import run_lib  # noqa: E402
from configs.vp.ddpm import cifar10  # noqa: E402

config = cifar10.get_config()
config.data.image_size = 8
config.model.nf = 32

_driver.score_sde_train(
    run_lib, config, steps, lambda data: data.rand(1, 1, 4, 8, 8, 3).astype(np.float32) * 2 - 1)
