"""XiaRui1996's heatx at 1005bc96 (heat-diffusion explanations; its regressors are trained with
optax already, and keep flax.optim only for ``from flax.optim import dynamic_scale as
dynamic_scale_lib``, migrated to ``flax.training.dynamic_scale``): the synthetic-data regressor
recipe, ``heatx/models/regression/synthetic/train.py``'s ``train_and_evaluate``, through its
own statements (``_driver.run_statements``, up to ``train_metrics``): ``create_model``
(``ImageRegressor``, float16 for ``half_precision``), ``create_learning_rate_fn`` (warm-up
then cosine), ``create_train_state`` (the jitted ``init``, ``optax.adamw`` on the schedule,
heatx's ``TrainState`` with a ``dynamic_scale`` field typed ``dynamic_scale_lib.DynamicScale``,
``DynamicScale()`` for half precision on GPU), heatx's ``restore_checkpoint``
(``checkpoints.restore_checkpoint``), ``jax_utils.replicate`` and the pmapped ``train_step``:
``dynamic_scale.value_and_grad(loss_fn, has_aux=True, axis_name='batch')``,
``apply_gradients``, heatx's ``dynamic_scale_update`` (a non-finite step keeps the old
parameters and optimizer state), the scale in the metrics.

The DynamicScale path is the point of the run, and the program takes it only on a GPU
(``jax.local_devices()[0].platform == 'gpu'``): ``train`` gets a ``jax`` that answers the
platform ``'gpu'`` (``_driver.GpuPlatform``; everything else is jax's own), so ``create_train_state`` builds
``DynamicScale()`` (flax.optim's, from this package, on the legacy side; flax.training's on the
migrated side) and the model runs in float16, on the CPU.

Two runs on one work folder (``driver_workdir`` in the program copy, kept for inspection):

1. STEPS steps from scratch, then heatx's ``save_checkpoint`` (the first replica,
   ``checkpoints.save_checkpoint(..., keep=3)``: the dynamic scale's ``scale`` and
   ``fin_steps`` are in the file);
2. the same statements again, which restore that checkpoint (``step_offset`` = STEPS,
   asserted), and STEPS more steps.

Shrunk: 16x16x1 images, batch 4 (2 per device on 2 simulated devices: run with ``--devices
2``), ``config.encoder`` a one-stage ``ResNet`` of 32 filters (heatx's own ``ResNet`` class
and ``ResNetBlock``, put in ``heatx.models.encoder.resnet`` as ``ResNetDriver``, which the
program's ``getattr(resnets, config.encoder)`` picks; the recipe's ResNet18 has four stages of
64 to 512; its GroupNorm needs multiples of 32), rate 1e-3, weight decay 1e-4, one warm-up
epoch of STEPS steps in 3 epochs. Synthetic batches (seed 0, a new one each step): uniform
images in [0, 1] (float16), the program's ``create_input_iter`` map to [-1, 1] done by the
driver the same way, normal labels.

The trajectory: per step of both runs the loss, mse, mae, learning rate and dynamic scale the
pmapped step returns (device 0); then the final state of each run (every leaf: step,
parameters, optimizer state, the dynamic scale's ``fin_steps`` and ``scale``). Stand-ins: torch,
torchvision, cv2 (the data loader and image writing, not on the computation path).
``--site``: ml_collections.
"""

import _driver

program, steps = _driver.setup('torch', 'torchvision', 'cv2')
import jax  # noqa: E402
from flax import jax_utils  # noqa: E402
import numpy as np  # noqa: E402

from heatx.models.encoder import resnet as resnets  # noqa: E402
from heatx.models.regression.synthetic import train  # noqa: E402
from heatx.models.regression.synthetic.configs import default  # noqa: E402

SIZE, BATCH = 16, 4
DEVICES = jax.local_device_count()
NAMES = ['ckptdir', 'rng', 'local_batch_size', 'input_dtype', 'model', 'learning_rate_fn',
         'state', 'step_offset', 'p_train_step', 'p_eval_step']
resnets.ResNetDriver = resnets.partial(resnets.ResNet, stage_sizes=[1], num_filters=32,
                                       block_cls=resnets.ResNetBlock)


train.jax = _driver.GpuPlatform('jax')   # devices that say 'gpu' (create_train_state's test)


def make_config():
  config = default.get_config()
  config.image_size, config.image_channels, config.encoder = SIZE, 1, 'ResNetDriver'
  config.batch_size, config.half_precision = BATCH, True
  config.learning_rate, config.weight_decay = 1e-3, 1e-4
  config.warmup_epochs, config.num_epochs = 1, 3
  return config


def run(workdir, data, values, expect_offset):
  ns = _driver.run_statements(train, 'train_and_evaluate', NAMES, stop='train_metrics',
                              config=make_config(), workdir=str(workdir),
                              steps_per_epoch=steps)
  assert ns['step_offset'] == expect_offset, ns['step_offset']
  assert ns['state'].dynamic_scale is not None
  state, rng = ns['state'], ns['rng']
  for _ in range(steps):
    images = data.uniform(size=(DEVICES, BATCH // DEVICES, SIZE, SIZE, 1)).astype(np.float16)
    batch = {'image': (images - 0.5) * 2,
             'label': data.normal(size=(DEVICES, BATCH // DEVICES)).astype(np.float16)}
    rng, subkey = train.vsplit(rng)
    state, metrics = ns['p_train_step'](subkey, state, batch)
    values.extend(float(metrics[k][0]) for k in ('loss', 'mse', 'mae', 'learning_rate', 'scale'))
  return ns, state


data, values, held = np.random.RandomState(0), [], []
workdir = program / 'driver_workdir'
ns, state = run(workdir, data, values, 0)
train.save_checkpoint(state, ns['ckptdir'])
held.append(jax.tree_util.tree_leaves(jax_utils.unreplicate(state)))
ns, state = run(workdir, data, values, steps)
held.append(jax.tree_util.tree_leaves(jax_utils.unreplicate(state)))
_driver.emit(values, held)
