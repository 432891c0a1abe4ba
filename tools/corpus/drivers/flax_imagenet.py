"""flax's examples/imagenet of v0.3.0-v0.3.6.

v0.3.0-v0.3.4 (flax.optim): `optim.Momentum(...).create(params)` in `create_train_state`, a
`TrainState` of the optimizer, `model_state` and a DynamicScale created only on a GPU;
`initialized` unpacks init's `variables.pop('params')`, `sync_batch_stats` puts the averaged
statistics back with `model_state.copy({...})`. v0.3.5-v0.3.6 (optax already):
`TrainState.dynamic_scale` is annotated with flax.optim's DynamicScale, created by
`create_train_state` only on a GPU.

`train.create_train_state` (and `train.create_learning_rate_fn`) build the state; on a CPU the
driver puts in a DynamicScale of the class the program's TrainState annotates the field with
(flax.optim's, or what migrate rewrote it to), so that the loss-scaling path of
`train.train_step` runs; float32 ResNet18 (v0.3.0's `create_model` makes the ResNet50 it names:
given ResNet18's stages and blocks), random 32x32 images, pmapped over one device, the learning
rate per step from `train.create_learning_rate_fn`; `sync_batch_stats` after the steps. No flax
flag is given on either side (the legacy side's FrozenDict comes from importing flax.optim).
Needs ml_collections (`--site`).
"""
import functools
import inspect
import types

import _driver

program, steps = _driver.setup('tensorflow', 'tensorflow_datasets', 'clu', 'tensorboard')
import jax  # noqa: E402
import numpy as np  # noqa: E402
from flax import jax_utils  # noqa: E402
import models  # noqa: E402
import train  # noqa: E402

config = types.SimpleNamespace(half_precision=False, momentum=0.9, warmup_epochs=1,
                               num_epochs=3)
if 'config' in inspect.signature(train.create_learning_rate_fn).parameters:   # v0.3.1 on
  learning_rate_fn = train.create_learning_rate_fn(config, 0.1, 2)
  model = train.create_model(model_cls=models.ResNet18, half_precision=False)
else:   # v0.3.0: ResNet50 made with the caller's keywords, the rate from its own arguments
  learning_rate_fn = train.create_learning_rate_fn(0.1, 2, config.num_epochs)
  model = train.create_model(half_precision=False, stage_sizes=[2, 2, 2, 2],
                             block_cls=models.ResNetBlock)
step = train.train_step
if 'apply_fn' in inspect.signature(train.train_step).parameters:   # v0.3.0-v0.3.4
  state = train.create_train_state(jax.random.PRNGKey(0), config, model, 32)
  step = functools.partial(step, model.apply)
else:
  state = train.create_train_state(jax.random.PRNGKey(0), config, model, 32, learning_rate_fn)
state = state.replace(dynamic_scale=_driver.field_type(train.TrainState, 'dynamic_scale')())
state = jax_utils.replicate(state)
p_train_step = jax.pmap(functools.partial(step, learning_rate_fn=learning_rate_fn),
                        axis_name='batch')
rng = np.random.RandomState(0)
losses = []
for _ in range(steps):
  batch = {'image': rng.rand(1, 8, 32, 32, 3).astype(np.float32),
           'label': rng.randint(0, 1000, size=(1, 8)).astype(np.int32)}
  state, metrics = p_train_step(state, batch)
  losses.append(metrics['loss'][0])
state = train.sync_batch_stats(state)
final = jax.tree_util.tree_map(lambda x: x[0], state)
if hasattr(final, 'optimizer'):   # v0.3.0-v0.3.4
  _driver.emit(losses, (_driver.params_of(final.optimizer), final.model_state))
else:
  _driver.emit(losses, (final.params, final.batch_stats))
