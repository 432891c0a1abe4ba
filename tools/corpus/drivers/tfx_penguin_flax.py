"""tensorflow/tfx at 38af8139, ``tfx/examples/penguin`` (the Penguin example's experimental Flax
trainer, ``penguin_utils_flax_experimental.py``): the program's own ``_make_trained_model``
(what its TFX ``run_fn`` calls): a Linen MLP on the four transformed features,
``flax.optim.Adam(learning_rate=1e-2)`` then ``optimizer_def.create(params)`` (migrated:
``optax.adam`` in a ``TrainState``), per epoch ``_train_epoch`` (the optimizer passed through
``_train_step``, jitted with the model a static argument: ``apply_gradient``) over
``train_data.as_numpy_iterator()`` and ``_eval_epoch`` on ``optimizer.target`` (migrated
``.params``), then the jax2tf export of the trained parameters.

Data: the program's ``_make_trained_model`` takes ``tf.data`` data sets; the driver gives it
objects whose ``as_numpy_iterator()`` yields the same kind of batches (a dict of the four
``*_xf`` features, float32 [B, 1], and int64 labels [B, 1] in {0, 1, 2}; seed 0; batches of
20 for training, 10 for eval, as ``penguin_utils_base``'s ``TRAIN_BATCH_SIZE`` /
``EVAL_BATCH_SIZE``). 3 epochs of STEPS training steps (``steps_per_epoch``), 2 eval steps
each.

The trajectory: ``_train_epoch`` and ``_eval_epoch`` are the program's, called by the program;
the driver wraps each in the module's namespace (calling it unchanged) and records, per epoch,
the train and eval loss and accuracy they return and the parameters after the epoch
(``optimizer.target``, migrated ``.params``); then the final parameters.

Stand-ins: tensorflow, tensorflow_transform, tfx, tfx_bsl, tensorboard and
``jax.experimental.jax2tf`` (the export after training; today's jax2tf refuses to import on a
stand-in tensorflow). ``penguin_utils_base`` (the feature names) is the program's own file,
imported as ``tfx.examples.penguin.penguin_utils_base`` (the module the program imports it
as), its own imports being stand-ins.
"""
import importlib.util
import sys

import _driver

program, steps = _driver.setup('tensorflow', 'tensorflow_transform', 'tfx', 'tfx_bsl',
                               'tensorboard')
import numpy as np  # noqa: E402

sys.modules['jax.experimental.jax2tf'] = _driver._StandIn(name='jax.experimental.jax2tf')
import tfx.examples.penguin as penguin_package  # noqa: E402  (a stand-in)

spec = importlib.util.spec_from_file_location('tfx.examples.penguin.penguin_utils_base',
                                              program / 'penguin_utils_base.py')
base = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = base
spec.loader.exec_module(base)
penguin_package.penguin_utils_base = base

import penguin_utils_flax_experimental as flax_trainer  # noqa: E402

EPOCHS, EVAL_STEPS = 3, 2
FEATURES = [base.transformed_name(key) for key in base.FEATURE_KEYS]


class Batches:
  """What the program reads of a tf.data data set: ``as_numpy_iterator()``."""

  def __init__(self, seed, batch_size):
    self.data, self.batch_size = np.random.RandomState(seed), batch_size

  def as_numpy_iterator(self):
    while True:
      inputs = {k: self.data.normal(size=(self.batch_size, 1)).astype(np.float32)
                for k in FEATURES}
      labels = self.data.randint(0, 3, (self.batch_size, 1)).astype(np.int64)
      yield inputs, labels


values, held = [], []
train_epoch, eval_epoch = flax_trainer._train_epoch, flax_trainer._eval_epoch


def recorded_train_epoch(*args, **kwargs):
  optimizer, metrics = train_epoch(*args, **kwargs)
  values.extend(float(metrics[k]) for k in ('loss', 'accuracy'))
  held.append(_driver.params_of(optimizer))
  return optimizer, metrics


def recorded_eval_epoch(*args, **kwargs):
  metrics = eval_epoch(*args, **kwargs)
  values.extend(float(metrics[k]) for k in ('loss', 'accuracy'))
  return metrics


flax_trainer._train_epoch = recorded_train_epoch
flax_trainer._eval_epoch = recorded_eval_epoch
flax_trainer._make_trained_model(
    Batches(0, base.TRAIN_BATCH_SIZE), Batches(1, base.EVAL_BATCH_SIZE), num_epochs=EPOCHS,
    steps_per_epoch=steps, eval_steps_per_epoch=EVAL_STEPS,
    tensorboard_log_dir=str(program / 'driver_logs'))
_driver.emit(values, held)
