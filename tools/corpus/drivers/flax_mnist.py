"""flax's examples/mnist (v0.3.x: `create_optimizer` returns `Momentum(...).create(params)`).

`train.create_optimizer` and the jitted `train.train_step`, on random 28x28 images and labels.
"""
import _driver

program, steps = _driver.setup('tensorflow', 'tensorflow_datasets', 'tensorboard', 'ml_collections')
import jax  # noqa: E402
import numpy as np  # noqa: E402
import train  # noqa: E402

rng = np.random.RandomState(0)
optimizer = train.create_optimizer(train.get_initial_params(jax.random.PRNGKey(0)), 0.1, 0.9)
losses = []
for _ in range(steps):
  batch = {'image': rng.rand(16, 28, 28, 1).astype(np.float32),
           'label': rng.randint(0, 10, size=16).astype(np.int32)}
  optimizer, metrics = train.train_step(optimizer, batch)
  losses.append(metrics['loss'])
_driver.emit(losses, _driver.params_of(optimizer))
