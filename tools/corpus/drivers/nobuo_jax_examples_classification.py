"""NobuoTsukamoto's jax_examples at 8e5de548, ``classification/`` (MobileNet image classifiers
after flax's imagenet example; trained with optax already, flax.optim kept only for ``from
flax.optim import dynamic_scale as dynamic_scale_lib``, migrated to
``flax.training.dynamic_scale``): ``classification/train.py``'s ``train_and_evaluate``, through
its own statements (``_driver.run_statements``, up to ``train_metrics``): ``create_model``
(float16 for ``half_precision`` off TPU), ``create_learning_rate_fn`` (linear warm-up joined to a
cosine decay), ``create_train_state`` (the jitted ``initialized``, ``optax.sgd`` with Nesterov
momentum on the schedule, the program's ``TrainState`` with ``batch_stats`` and a
``dynamic_scale`` field typed ``dynamic_scale_lib.DynamicScale``, ``DynamicScale()`` for half
precision on GPU), its ``restore_checkpoint`` (``checkpoints.restore_checkpoint``),
``jax_utils.replicate`` and the pmapped ``train_step``:
``dynamic_scale.value_and_grad(loss_fn, has_aux=True, axis_name="batch")`` with an L2 penalty in
the loss, ``apply_gradients`` with the new batch statistics, then the ``jnp.where(is_fin, ...)``
skip of a non-finite step over the optimizer state and the parameters, the scale in the metrics.

The DynamicScale path is the point of the run, and the program takes it only on a GPU
(``jax.local_devices()[0].platform == "gpu"``): ``train`` gets a ``jax`` whose devices say
``'gpu'`` (``_driver.GpuPlatform``; everything else is jax's own), so
``create_train_state`` builds ``DynamicScale()`` (flax.optim's, from this package, on the legacy
side; flax.training's on the migrated side) and the model runs in float16, on the CPU.

Two runs on one work folder (``driver_workdir`` in the program copy, kept for inspection):

1. STEPS steps from scratch, then the program's ``sync_batch_stats`` and ``save_checkpoint`` (the
   first replica, ``checkpoints.save_checkpoint(..., keep=3)``: the dynamic scale's ``scale``
   and ``fin_steps`` are in the file); the file must be the legacy format (one msgpack file
   ``checkpoint_<step>``);
2. the same statements again, which restore that checkpoint (``step_offset`` = STEPS, asserted),
   and STEPS more steps.

Shrunk: 32x32x3 images, batch 2 (1 per device on 2 simulated devices: run with ``--devices
2``; one example per device makes the first step's float16 gradients overflow at the initial
scale 65536, so the program's skip runs and the scale halves to 32768), 10 classes, ``config.model`` a MobileNetV3 of the program's own class with three of its
``Small`` blocks (1, 2 and 4: squeeze-excite, ReLU and hard-swish all present) and 64 last-block
filters, put in ``models`` as ``MobileNetV3_Driver``, which the program's ``getattr(models,
config.model)`` picks (the default ``MobileNetV3_Large`` has 15 blocks and 1280 filters); base
rate 0.1 x 2 / 256, one warm-up epoch of STEPS steps in 3 epochs, momentum 0.9 (the default).
Synthetic batches (seed 0, a new one each step): normal float16 images, uniform labels.

The trajectory: per step of both runs the loss, accuracy, learning rate and dynamic scale the
pmapped step returns (device 0); then the final state of each run (every leaf: step, parameters,
optimizer state, batch statistics, the dynamic scale's ``fin_steps`` and ``scale``).
Stand-ins: tensorflow, tensorflow_datasets, clu (data pipeline, metric writers, profiling hooks:
not on the computation path; ``flax.io``, which finds the tensorflow stand-in, is set to the
real file system, ``_driver.plain_flax_io``). ``--site``: ml_collections.
"""
import functools
import os

import _driver

program, steps = _driver.setup('tensorflow', 'tensorflow_datasets', 'clu',
                               source_dirs=['classification'])
import flax.io  # noqa: E402
import jax  # noqa: E402
from flax import jax_utils  # noqa: E402
import numpy as np  # noqa: E402

_driver.plain_flax_io()   # checkpoints on the real file system, not the tensorflow stand-in

import models  # noqa: E402
import train  # noqa: E402
from configs import default  # noqa: E402

SIZE, BATCH, CLASSES = 32, 2, 10
DEVICES = jax.local_device_count()
NAMES = ['rng', 'local_batch_size', 'base_learning_rate', 'model_cls', 'model',
         'learning_rate_fn', 'state', 'step_offset', 'p_train_step', 'p_eval_step']
Small = models.Small  # noqa: N816
models.MobileNetV3_Driver = functools.partial(
    models.MobileNetV3, alpha=1.0, layers={k: Small[k] for k in (1, 2, 4)}, last_block_filters=64)


train.jax = _driver.GpuPlatform('jax')   # devices that say 'gpu' (create_train_state's test)


def make_config():
  config = default.get_config()
  config.model, config.image_size = 'MobileNetV3_Driver', SIZE
  config.batch_size, config.half_precision = BATCH, True
  config.warmup_epochs, config.num_epochs = 1.0, 3.0
  return config


def run(workdir, data, values, expect_offset):
  ns = _driver.run_statements(train, 'train_and_evaluate', NAMES, stop='train_metrics',
                              config=make_config(), workdir=str(workdir),
                              steps_per_epoch=steps, num_classes=CLASSES)
  assert ns['step_offset'] == expect_offset, ns['step_offset']
  assert ns['state'].dynamic_scale is not None
  state = ns['state']
  for _ in range(steps):
    images = data.normal(size=(DEVICES, BATCH // DEVICES, SIZE, SIZE, 3)).astype(np.float16)
    batch = {'image': images,
             'label': data.randint(0, CLASSES, size=(DEVICES, BATCH // DEVICES)).astype(np.int32)}
    state, metrics = ns['p_train_step'](state, batch)
    values.extend(float(metrics[k][0]) for k in ('loss', 'accuracy', 'learning_rate', 'scale'))
  return ns, state


data, values, held = np.random.RandomState(0), [], []
workdir = program / 'driver_workdir'
ns, state = run(workdir, data, values, 0)
state = train.sync_batch_stats(state)
train.save_checkpoint(state, str(workdir))
files = sorted(os.listdir(workdir))
assert files == [f'checkpoint_{steps}'] and (workdir / files[0]).is_file(), (
    f'not the legacy msgpack checkpoint: {files}')
held.append(jax.tree_util.tree_leaves(jax_utils.unreplicate(state)))
ns, state = run(workdir, data, values, steps)
held.append(jax.tree_util.tree_leaves(jax_utils.unreplicate(state)))
_driver.emit(values, held)
