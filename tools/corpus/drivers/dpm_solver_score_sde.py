"""LuChengTHU/dpm-solver examples/score_sde_jax (a copy of yang-song/score_sde with a DPM-Solver
sampler): `run_lib.train` builds `losses.get_optimizer(config).create(initial_params)`
(`flax.optim.Adam(beta1, eps, weight_decay)`) into `mutils.State(lr=config.optim.lr, ...)`;
`losses.optimization_manager`'s `optimize_fn` warms the rate up from `state.step`, clips the
global norm, and calls `apply_gradient(clipped_grad, learning_rate=lr)`.

Runs the shared `_driver.score_sde_train` (the statements of `run_lib.train` that build the
model, optimizer, state, SDE and the pmapped `lax.scan` of `train_step_fn`) on the program's
`configs/vp/ddpm/cifar10.py` shrunk to 8x8 images and nf=32, with `config.optim.weight_decay`
0.05 (the config's is 0), so that the Adam -> adamw mapping runs with a decay (measured both
ways with the config's 0 too, this line left out). Needs ml_collections (`--site`).
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
with config.ignore_type():
  config.optim.weight_decay = 0.05

_driver.score_sde_train(
    run_lib, config, steps, lambda data: data.rand(1, 1, 4, 8, 8, 3).astype(np.float32) * 2 - 1)
