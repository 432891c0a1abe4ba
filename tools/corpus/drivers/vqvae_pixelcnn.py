"""b-hahn/vqvae_experiments at 9bf51c4e, its ``pixelcnn/`` (flax's PixelCNN++ example, copied,
in Linen): the statements of ``pixelcnn/train.py``'s ``train_and_evaluate`` that build the rng,
the model (data-dependent ``init`` on the init batch), ``optim.Adam(beta1=0.95, beta2=0.9995)``
and ``optimizer_def.create(initial_variables)``, restore ``(optimizer, ema)`` from the work folder
(the program's ``restore_checkpoint``), ``step_offset = int(optimizer.state.step)``, replicate
``(optimizer, ema)``, the schedule ``learning_rate_fn = lambda step: config.learning_rate *
config.lr_decay**step`` and the pmapped ``train_step`` (axis "batch"), run as the program wrote
them (or as migrate rewrote them). The step: ``lr = learning_rate_fn(optimizer.state.step)``,
``value_and_grad`` of the PixelCNN++ discretized-logistic NLL with dropout,
``pmean`` of the gradient, ``optimizer.apply_gradient(grad, learning_rate=lr)``, the Polyak EMA
(``jax.tree_multimap``) of the parameters.

The driver runs STEPS pmapped steps on a new batch each, then the program's ``save_checkpoint``
(unreplicate, ``checkpoints.save_checkpoint`` of the ``(optimizer, ema)`` tuple), then the same
statements again in the same work folder, so that ``restore_checkpoint`` hands back the saved
optimizer (``ema`` is reset to the initial variables, as the program does), and two more steps
from the restored step counter. Two CPU devices (run it with ``both_ways.py --devices
2``), so the pmean is across two replicas.

Config: the program's ``configs/default.py``, shrunk: ``n_resnet`` 1, ``n_feature`` 8,
``n_logistic_mix`` 2, batch 8 (4 per device), init batch 4; ``lr_decay`` 0.7 (instead of
0.999995, so the per-step rate visibly changes), ``polyak_decay`` 0.9; ``learning_rate`` 1e-3
and ``dropout_rate`` 0.5 as the program has them. Synthetic data: 8x8 RGB images of random
integers 0..255 mapped to [-1, 1] as the program's ``input_pipeline.DataSource.process_sample``
does (``/ 127.5 - 1``; the program's ``DataSourceVQVAE`` reads fixed files under /home/ben),
seed 0. The trajectory: per step the loss and the learning rate the step returns; the restored
``step_offset``; then the final parameters, the EMA and the step counter. Stand-ins:
tensorflow and tensorflow_datasets (the input pipeline, ``tf.io.gfile.makedirs``, not run),
tensorboard (``flax.metrics.tensorboard``'s writers, not run); flax's own file layer is set to
its plain Python backend (``flax.io``, ``_driver.plain_flax_io``; it would take the tensorflow stand-in for a real
``tf.io.gfile``). Needs ml_collections (``--site``).
"""

import _driver  # noqa: E402

program, steps = _driver.setup('tensorflow', 'tensorflow_datasets', 'tensorboard',
                               source_dirs=('pixelcnn',))
import tempfile  # noqa: E402

import flax.io  # noqa: E402
from flax import jax_utils  # noqa: E402
import jax  # noqa: E402
import numpy as np  # noqa: E402

_driver.plain_flax_io(not_found=False)   # checkpoints on the real file system

import train  # noqa: E402  (pixelcnn/train.py)
from configs import default  # noqa: E402

assert jax.device_count() == 2, "run it with both_ways.py --devices 2"
config = default.get_config()
config.n_resnet, config.n_feature, config.n_logistic_mix = 1, 8, 2
config.batch_size, config.init_batch_size = 8, 4
config.lr_decay, config.polyak_decay = 0.7, 0.9

data = np.random.RandomState(0)


def images(n):
  return (data.randint(0, 256, (n, 8, 8, 3)).astype(np.float32) / 127.5 - 1).astype(np.float32)


NAMES = ('rng', 'init_rng', 'dropout_rng', 'initial_variables', 'optimizer_def', 'optimizer',
         'ema', 'step_offset', 'learning_rate_fn', 'p_train_step')
workdir = tempfile.mkdtemp(prefix='pixelcnn-')
init_batch = images(config.init_batch_size)


def build():
  return _driver.run_statements(train, 'train_and_evaluate', NAMES, stop='train_metrics',
                                config=config, workdir=workdir, init_batch=init_batch)


def run(ns, n, values):
  optimizer, ema, rng = ns['optimizer'], ns['ema'], ns['rng']
  for _ in range(n):
    batch = {'image': images(config.batch_size).reshape((2, -1, 8, 8, 3))}
    rng, step_rng = jax.random.split(rng)
    sharded_rngs = train.common_utils.shard_prng_key(step_rng)
    optimizer, ema, metrics = ns['p_train_step'](optimizer, ema, batch, sharded_rngs)
    values.extend([metrics['loss'][0], metrics['learning_rate'][0]])
  return optimizer, ema


values = []
ns = build()
optimizer, ema = run(ns, steps, values)
train.save_checkpoint(workdir, optimizer, ema, steps - 1)
ns = build()
assert int(ns['step_offset']) == steps, ns['step_offset']  # restored, not the fresh optimizer
values.append(ns['step_offset'])
optimizer, ema = run(ns, 2, values)
final, final_ema = jax_utils.unreplicate((optimizer, ema))
step = final.step if hasattr(final, 'params') else final.state.step
_driver.emit(values, (_driver.params_of(final), final_ema, step))
