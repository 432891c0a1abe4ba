"""bayesbreeze/inverse_problem (score-based inverse problems in medical imaging, built on
yang-song's score_sde: `run_lib.train` builds `losses.get_optimizer(config).create(initial_params)`,
an `Adam` with `weight_decay`, into `mutils.State` beside an EMA of the parameters;
`losses.optimization_manager`'s step warms the rate up from `state.step`, clips the gradient's
global norm, and calls `apply_gradient(..., learning_rate=lr)`).

As `score_sde.py`: the statements of `run_lib.train` that build the model, the optimizer and the
state (up to the checkpoint folders), then those that build the SDE, the step functions and the
pmapped `jax.lax.scan` of `train_step_fn` (up to `eval_step_fn`), run as the program wrote them
(or as migrate rewrote them). The config is the program's own `configs/ve/ct2d_ncsnpp_continuous.py`
(a VE SDE, continuous, NCSN++ with FIR resampling and BigGAN blocks), shrunk: 8x8 single-channel
images, 16 channels, two resolutions, batch 4, warmup over 3 steps, one step per pmapped call.
Data, metrics, logging and tomography libraries (odl, SimpleITK, ax) and the program's own `cs`
module (compressed-sensing sampling, which `run_lib` imports for evaluation; importing it loads
metal-mask data files) are stand-ins, off the training path (the data is random); needs
ml_collections (`--site`).
"""
import _driver

program, steps = _driver.setup('tensorflow', 'tensorflow_datasets', 'tensorflow_gan',
                               'tensorflow_hub', 'tensorboard', 'PIL', 'six', 'skimage',
                               'skimage.metrics', 'piq', 'torch', 'torchvision', 'cv2',
                               'tqdm', 'odl', 'SimpleITK', 'ax', 'cs')
import numpy as np  # noqa: E402
import run_lib  # noqa: E402
from configs.ve import ct2d_ncsnpp_continuous  # noqa: E402

config = ct2d_ncsnpp_continuous.get_config()
config.data.image_size = 8
config.data.num_channels = 1
config.model.nf = 16

_driver.score_sde_train(
    run_lib, config, steps, lambda data: data.rand(1, 1, 4, 8, 8, 1).astype(np.float32))
