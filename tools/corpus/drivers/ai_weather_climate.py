"""google's ai-weather-climate at 60f25909 (`noaa_leap/models/linear.py`, a linear
post-processing model of GFS forecasts: a 1x1 `Conv` with an identity initializer, vmapped over
the second axis): the statements of `linear.train` that build the sharded sample, the variables
(`model.init`), the optimizer (`flax.optim.Adam(learning_rate=0.05)`, `optimizer_def.create(
params)`), the program's `TrainState` (step, optimizer, loss, metrics, `apply_fn`), the replicated
state and `p_train_step = jax.pmap(train_step, axis_name='batch')` run as the program wrote them
(or as migrate rewrote them), up to the training loop; the driver then runs the loop's body as
`train` does: the program's `eval_loop` at step 0, then STEPS times `shard_to_devices(batch)` and
`p_train_step(state, batch)` (the program's `@jax.jit` `train_step`: `value_and_grad` of its
`nanmean` squared error, `pmean` of the gradient, `optimizer.apply_gradient(grad)`), then
`eval_loop` again (as `train` ends). `eval_loop` runs the pmapped `eval_step` on the test
batches (`state.optimizer.target`, `jax.tree_multimap`) and saves the unreplicated state with
`checkpoints.save_checkpoint(ckpt_dir, ..., prefix='cp_', keep=1)`; the program's
`Predictor(...).get_params()` then reads the parameters back from that checkpoint
(`restore_checkpoint(ckpt_dir, target=None, prefix='cp_')['optimizer']['target']`), which are
part of the trajectory. The program's learning rate is a constant 0.05 (no schedule).

One CPU device, as `eval_loop` reshapes each test batch to a device axis of 1. Synthetic data:
STEPS training batches and 2 test batches of 4 examples, each `last_error` and `error` of shape
(4, 2, 3, 3, 5) (5 channels, so the identity kernel is 5x5), random normal, the training values
wrapped in objects with `_numpy()` as tf tensors have (`shard_to_devices` calls it). The
trajectory: the loss of every step (`state.loss`), then the final parameters, then the
parameters read back from the checkpoint. Stand-ins (data loading, not on the computation path):
tensorflow (the datasets are the driver's lists), xarray (GFS zarr stores, only in `main` and
`Predictor.__call__`); `flax.io` is imported before the stand-ins, so that the checkpoint
functions do not take the tensorflow stand-in for `tf.io.gfile`. The program's modules import
each other as `ai_weather_climate.*`, which the driver maps to the copy.
"""
import sys
import tempfile
import types

import _driver
import flax.io  # noqa: F401  before the tensorflow stand-in: its file functions stay the real ones

program, steps = _driver.setup('tensorflow', 'xarray')
sys.modules['ai_weather_climate'] = types.ModuleType('ai_weather_climate')
sys.modules['ai_weather_climate'].__path__ = [str(program)]
import jax  # noqa: E402
import numpy as np  # noqa: E402
from ai_weather_climate.noaa_leap.models import linear  # noqa: E402

assert jax.local_device_count() == 1, jax.local_device_count()
BATCH, LEADS, SIZE, CHANNELS = 4, 2, 3, 5


class _Tensor:
  """What `shard_to_devices` reads of a tf tensor: `_numpy()`."""

  def __init__(self, array):
    self.array = array

  def _numpy(self):  # pylint: disable=invalid-name
    return self.array


data = np.random.RandomState(0)


def batch_of(data):
  shape = (BATCH, LEADS, SIZE, SIZE, CHANNELS)
  return {'last_error': data.normal(size=shape).astype(np.float32),
          'error': data.normal(size=shape).astype(np.float32)}


train_ds = [{k: _Tensor(v) for k, v in batch_of(data).items()} for _ in range(steps)]
test_ds = [batch_of(data) for _ in range(2)]
ckpt_dir = tempfile.mkdtemp()
model = linear.Linear(num_features=CHANNELS)

ns = _driver.run_statements(
    linear, 'train', ['sample', 'params', 'optimizer_def', 'optimizer', 'state', 'p_train_step'],
    stop='batch', model=model, train_ds=train_ds, test_ds=test_ds, ckpt_dir=ckpt_dir,
    num_train_steps=steps)
state, p_train_step = ns['state'], ns['p_train_step']
losses = []
linear.eval_loop(state, test_ds, ckpt_dir)
for batch in train_ds:
  batch = linear.shard_to_devices(batch)
  state = p_train_step(state, batch)
  losses.append(state.loss[0])
linear.eval_loop(state, test_ds, ckpt_dir)
restored = linear.Predictor(model.apply, fc=6, ckpt_dir=ckpt_dir, max_nan_ratio=0.1).get_params()
final = flax.jax_utils.unreplicate(state)
_driver.emit(losses + [final.step], [_driver.params_of(final.optimizer), restored])
