"""flax's examples/vae of v0.3.x (flax.optim: `optim.Adam(learning_rate=FLAGS.learning_rate)
.create(params)` in `train.main`, then `jax.device_put(optimizer)`; the jitted
`train.train_step` returns `optimizer.apply_gradient(grad)`; `train.eval` of
`optimizer.target`).

The statements of `train.main` that make the rngs, init the VAE, build and `device_put` the
optimizer and draw `z` run as the program wrote them (or as migrate rewrote them), up to
`steps_per_epoch`, with the program's flags set to `--latents 4 --batch_size 8` (the default
rate 1e-3). `steps` steps of `train_step` on random binarized 784-pixel images, each key split
as the loop splits it, and after every step `train.eval` of the params on 16 fixed test images
(its `loss`, `bce`, `kld`). Emitted: those metrics of every step, then the final params.
"""
import _driver

program, steps = _driver.setup('tensorflow', 'tensorflow_datasets', 'PIL')
import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax import random  # noqa: E402
import train  # noqa: E402

train.FLAGS(['train.py', '--latents=4', '--batch_size=8'])
ns = _driver.run_statements(train, 'main', ['rng', 'key', 'init_data', 'params', 'optimizer',
                                            'z_key', 'eval_rng', 'z'], stop='steps_per_epoch')
optimizer, rng = ns['optimizer'], ns['rng']
data = np.random.RandomState(0)
test_ds = jax.device_put((data.rand(16, 784) < 0.5).astype(np.float32))
losses = []
for _ in range(steps):
  batch = (data.rand(8, 784) < 0.5).astype(np.float32)
  rng, key = random.split(rng)
  optimizer = train.train_step(optimizer, batch, key)
  metrics, comparison, sample = train.eval(_driver.params_of(optimizer), test_ds, ns['z'],
                                           ns['eval_rng'])
  losses += [metrics['loss'], metrics['bce'], metrics['kld']]
_driver.emit(losses, _driver.params_of(optimizer))
