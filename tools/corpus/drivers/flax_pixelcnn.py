"""flax's examples/pixelcnn of v0.3.6 (flax.optim: `optim.Adam(beta1=0.95, beta2=0.9995)` with no
learning rate, created in `train.train_and_evaluate`; the pmapped `train.train_step` sets the
rate of every step with `apply_gradient(grad, learning_rate=lr)` from `learning_rate_fn` of
`optimizer.state.step`, then an EMA (Polyak average) of `optimizer.target` with
`jax.tree_multimap`; `train.save_checkpoint` / `train.restore_checkpoint` of the tuple
`(optimizer, ema)`; `sample.generate_sample` restores it into its own
`optim.Adam(learning_rate=..., ...)` optimizer).

The statements of `train.train_and_evaluate` that init the model (data-dependent init on the
driver's `init_batch`), build the optimizer, restore the checkpoint, set `ema`, read
`step_offset`, replicate, build `learning_rate_fn` and `p_train_step` run as the program wrote
them (or as migrate rewrote them), with `configs/default.py` shrunk: depth 1, 8 features, 2
logistic mixtures, rate 1e-3 decaying by 0.9 a step, Polyak decay 0.9. `steps` pmapped steps (2
images of 8x8x3 in [-1, 1] per device: `--devices 2`), each on a fresh dropout key as the loop
makes it (`common_utils.shard_prng_key`); then the program's `save_checkpoint` (must be the
legacy msgpack file), the statements again (restore: `step_offset` read back), 2 more steps;
then the statements of `sample.generate_sample` that build its own optimizer and restore (`params`
restored as the EMA from that checkpoint); its `init` of the model is not run (it omits
`train=`, which the program's `PixelCNNPP.__call__` requires: a TypeError on both sides, the
program's own bug), the driver gives it the initial params of the same shapes. Emitted: the losses, `step_offset`, the final
params, the final EMA, the EMA `generate_sample` restored. Needs ml_collections (`--site`).
"""
import os
import tempfile

import _driver

program, steps = _driver.setup('tensorflow', 'tensorflow_datasets', 'tensorboard', 'clu', 'PIL')
import flax.io  # noqa: E402
import jax  # noqa: E402
import numpy as np  # noqa: E402
from flax import jax_utils  # noqa: E402
from flax.training import common_utils  # noqa: E402

_driver.plain_flax_io()   # checkpoints on the real file system, not the tensorflow stand-in

from configs import default  # noqa: E402
import sample  # noqa: E402
import train  # noqa: E402

config = default.get_config()
config.n_resnet, config.n_feature, config.n_logistic_mix = 1, 8, 2
config.learning_rate, config.lr_decay, config.polyak_decay = 1e-3, 0.9, 0.9
config.init_batch_size = 4
workdir = tempfile.mkdtemp(prefix='flax_pixelcnn_')
data = np.random.RandomState(0)
n_dev = jax.local_device_count()


def images(*shape):
  return (data.randint(0, 256, size=shape + (8, 8, 3)) / 127.5 - 1).astype(np.float32)


init_batch = images(config.init_batch_size)
names = ['rng', 'init_rng', 'dropout_rng', 'initial_variables', 'optimizer_def', 'optimizer',
         'ema', 'step_offset', 'learning_rate_fn', 'p_train_step']


def build():
  return _driver.run_statements(train, 'train_and_evaluate', names, stop='p_eval_step',
                                config=config, workdir=workdir, init_batch=init_batch)


def run(ns, n, losses):
  optimizer, ema, rng = ns['optimizer'], ns['ema'], ns['rng']
  for _ in range(n):
    batch = {'image': images(n_dev, 2)}
    rng, step_rng = jax.random.split(rng)
    sharded_rngs = common_utils.shard_prng_key(step_rng)
    optimizer, ema, metrics = ns['p_train_step'](optimizer, ema, batch, sharded_rngs)
    losses.append(metrics['loss'][0])
  return optimizer, ema


losses = []
ns = build()
optimizer, ema = run(ns, steps, losses)
train.save_checkpoint(workdir, optimizer, ema, steps - 1)
files = sorted(os.listdir(workdir))
assert files == [f'checkpoint_{steps - 1}'] and os.path.isfile(os.path.join(workdir, files[0])), (
    f'not the legacy msgpack checkpoint: {files}')
ns = build()
losses.append(ns['step_offset'])
optimizer, ema = run(ns, 2, losses)
sampled = _driver.run_statements(
    sample, 'generate_sample', ['optimizer_def', 'optimizer', '_'], stop='device_count',
    config=config, workdir=workdir, params=ns['initial_variables'])
_driver.emit(losses, (_driver.params_of(jax_utils.unreplicate(optimizer)),
                      jax_utils.unreplicate(ema), sampled['params']))
