"""google-research's fitvid (FitVid, video prediction, in Linen; the package imports itself as
``fitvid.*``, so the program folder is named ``fitvid``): the statements of ``fitvid.train.train``
that build the rng, the log folders, the data iterator, the first batch and its first-device
sample, the model (``MODEL_CLS(n_past=FLAGS.n_past, training=True)``), the state
(the program's own ``init_model_state``: ``model.init``, ``variables.pop('params')``,
``optim.Adam(learning_rate=1e-3).create(params)``, ``utils.print_model_size``), the checkpoint
restore (an empty folder: the state comes back), the step offset, the replicated state and the
per-device rngs, run as the program wrote them (or as migrate rewrote them). The
driver then calls the program's pmapped ``train_step`` (axis "batch", the model static, the
state donated) as the training loop does, and the program's ``utils.sync_batch_stats`` after
the first step (the loop's ``step % log_every == 0`` branch). The step: ``value_and_grad`` of the
FitVid loss (MSE + beta * KL), ``pmean`` of the gradient, the program's ``utils.clip_grads`` to
norm 100, ``optimizer.apply_gradient(grads_clipped)``, the finite check (``jax.tree_leaves``,
``jax.tree_multimap``; its result discarded, as the program does), the new batch stats.

``utils.print_model_size`` reads ``FrozenDict._dict`` of the params' sizes: before migrate's
FOM018 rewrote ``._dict`` reads, the migrated side raised ``AttributeError: 'dict' object has no
attribute '_dict'`` there (init returns a dict once flax.optim is not imported), and this
driver ran the function's other statements instead.

Two CPU devices (run it with ``both_ways.py --devices 2``), so the pmean is across two replicas.
Flags: ``--batch_size 4`` (2 per device), ``--n_past 2``, ``--n_future 1`` (3 frames). The model,
shrunk: ``MODEL_CLS`` with ``g_dim`` 16, ``rnn_size`` 32, ``z_dim`` 4; the NVAE encoder and
decoder (the program's ``nvae.NVAE_ENCODER_VIDEO`` / ``NVAE_DECODER_VIDEO``, its stage sizes
[2, 2, 2, 2]) with ``num_filters`` 4 instead of 64 and the decoder's ``first_block_shape``
(2, 2, 32) instead of (8, 8, 512), for 16x16 frames instead of 64x64. Synthetic data: random
video in [0, 1] and 4-wide random actions, seed 0, a new batch every step; the rng: the
program's ``PRNGKey(0)``, split per device, advanced by the step. The trajectory: per step the
per-device ``loss/all``, ``loss/mse`` and ``loss/kld`` metrics, then the final parameters, the
batch statistics and the step counter.

Stand-ins (data loading, logging, metrics; none on the computation path): tensorflow,
tensorflow_datasets, tensorflow_addons, tensorflow_gan, tensorflow_hub, tensorboard; flax's file
layer is set to its plain Python backend (``flax.io``), as in ``vqvae_pixelcnn.py``. The model
calls ``nn.recurrent.LSTMCell()`` without ``features`` and the class's
``LSTMCell.initialize_carry(rng, batch_dims, size, init_fn=...)``, which today's flax refuses
(both sides; neither migrate nor the package handles it, it is no flax.optim name): the driver
gives both sides flax 0.3's LSTMCell API (``features`` defaults, ``__call__`` takes the width
from the carry, the same gates and initializers; ``initialize_carry`` a static method).
"""
import functools
import tempfile

import _driver  # noqa: E402

program, steps = _driver.setup('tensorflow', 'tensorflow_datasets', 'tensorflow_addons',
                               'tensorflow_gan', 'tensorflow_hub', 'tensorboard')
from flax import jax_utils  # noqa: E402
import flax.io  # noqa: E402
import flax.linen  # noqa: E402
import flax.linen.recurrent  # noqa: E402
import jax  # noqa: E402
import numpy as np  # noqa: E402

flax.io.set_mode(flax.io.BackendMode.DEFAULT)
assert jax.device_count() == 2, 'run it with both_ways.py --devices 2'


class LSTMCell(flax.linen.recurrent.LSTMCell):
  """flax 0.3's `LSTMCell()`: no `features` (the width comes from the carry) and a static
  `initialize_carry(rng, batch_dims, size, init_fn)`."""
  features: int = -1

  @staticmethod
  def initialize_carry(rng, batch_dims, size, init_fn=flax.linen.initializers.zeros):
    key1, key2 = jax.random.split(rng)
    mem_shape = batch_dims + (size,)
    return init_fn(key1, mem_shape), init_fn(key2, mem_shape)


flax.linen.recurrent.LSTMCell = LSTMCell
from fitvid import models  # noqa: E402
from fitvid import nvae  # noqa: E402
from fitvid import train  # noqa: E402
from fitvid import utils  # noqa: E402

DEVICES, PER_DEVICE, N_PAST, N_FUTURE, SIZE, ACTIONS, FILTERS = 2, 2, 2, 1, 16, 4, 4
encoder, decoder = nvae.NVAE_ENCODER_VIDEO, nvae.NVAE_DECODER_VIDEO
nvae.NVAE_ENCODER_VIDEO = functools.partial(encoder, num_filters=FILTERS)
nvae.NVAE_DECODER_VIDEO = lambda **kw: decoder(
    **{**kw, 'num_filters': FILTERS, 'first_block_shape': (SIZE // 8, SIZE // 8, FILTERS * 8)})

workdir = tempfile.mkdtemp(prefix='fitvid-')
train.FLAGS(['train', f'--output_dir={workdir}', f'--batch_size={DEVICES * PER_DEVICE}',
             f'--n_past={N_PAST}', f'--n_future={N_FUTURE}'])

data = np.random.RandomState(0)


def batches():
  lead = (DEVICES, PER_DEVICE, N_PAST + N_FUTURE)
  while True:
    yield {'video': data.rand(*lead, SIZE, SIZE, 3).astype(np.float32),
           'actions': data.rand(*lead, ACTIONS).astype(np.float32)}


ns = _driver.run_statements(
    train, 'train', ['rng_key', 'model_dir', 'summary_writer', 'data_itr', 'batch', 'sample',
                     'model', 'state', 'start_step'],
    stop='t_loop_start', get_data=lambda training: batches(),
    MODEL_CLS=functools.partial(models.FitVid, g_dim=16, rnn_size=32, z_dim=4))
model, batch, state, rng_key = ns['model'], ns['batch'], ns['state'], ns['rng_key']
assert ns['start_step'] == 0, ns['start_step']

values = []
for step in range(steps):
  state, rng_key, metrics, _ = train.train_step(model, batch, state, rng_key)
  if step == 0:
    state = utils.sync_batch_stats(state)
  for key in ('loss/all', 'loss/mse', 'loss/kld'):
    values.extend(np.asarray(metrics[key]).tolist())
  batch = next(ns['data_itr'])
final = jax_utils.unreplicate(state)
_driver.emit(values + [final.step], [_driver.params_of(final.optimizer), final.model_state])
