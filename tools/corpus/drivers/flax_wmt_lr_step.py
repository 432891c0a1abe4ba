"""flax's linen_examples/wmt as copied in tonywu95/flax at 095b4a6c (``linen_examples/wmt``: the
Transformer translation example of flax v0.3, on the program's own data set): the statements of
``train.train_and_evaluate`` that build the model, the optimizer and the step functions, run
as the program wrote them (or as migrate rewrote them; ``_driver.run_statements``, up to
``metrics_all``): ``models.TransformerConfig`` (train / eval / predict), the jitted ``init``,
``optim.Adam(config.learning_rate, beta1=0.9, beta2=0.98, eps=1e-9,
weight_decay=config.weight_decay).create(params)`` (migrated: ``optax.adamw`` with its
learning rate injected, in a ``TrainState``), ``checkpoints.restore_checkpoint(workdir,
optimizer)`` and ``start_step = int(optimizer.state.step)`` (``config.restore_checkpoints``),
``jax_utils.replicate``, ``create_learning_rate_scheduler`` and the pmapped ``train_step``
(``optimizer.state.step`` read for the rate of the step, ``apply_gradient(grad,
learning_rate=lr)``, migrated: the injected hyperparameter set, then ``apply_gradients``) and
``eval_step``, the ``dropout_rngs``.

Two runs on one work folder (``driver_workdir`` in the program copy, kept for inspection), as a
user runs and resumes the example:

1. STEPS steps from scratch (nothing to restore), then the program's own checkpoint statement
   of its training loop (the body of its ``if config.save_checkpoints and ...:``, found in the
   source and executed with the loop's ``step`` = STEPS - 1: ``checkpoints.save_checkpoint(
   workdir, jax_utils.unreplicate(optimizer), step)``);
2. the same statements again, which restore that checkpoint (``start_step`` = STEPS, asserted),
   and STEPS more steps; the rate schedule goes on from the restored step.

Config: the program's ``configs/default.py`` shrunk: vocabulary 32, one layer, ``emb_dim`` /
``qkv_dim`` 16, ``mlp_dim`` 32, 2 heads, length 8, batch 4 (2 per device on 2 simulated
devices: run with ``--devices 2``), float32, rate 0.05 with 3 warm-up steps
(``constant * linear_warmup * rsqrt_decay``: the rate changes every step), ``weight_decay``
0.1 (the default is 0: with it, the legacy Adam's decoupled decay and ``optax.adamw``'s both
run), label smoothing 0.1, dropout 0.1 (the default). Synthetic batches (seed 0, a new one each
step): ``inputs`` and ``targets`` token ids in [1, 32), each row padded with zeros after a
random length, unpacked (no positions / segmentation).

The trajectory: per step the loss, accuracy, denominator and learning rate the pmapped step
returns (device 0), after each run the program's ``p_eval_step`` on a fixed batch, then the
final parameters of both runs. Stand-ins: tensorflow, tensorboard, tensorflow_datasets,
tensorflow_text, sentencepiece (the input pipeline and summaries, not on the computation
path); ``flax.io`` set to its plain backend (``_driver.plain_flax_io``), since with a stand-in
tensorflow it would take tf.io.gfile; the work folder is made by the driver (the program makes
it with ``tf.io.gfile.makedirs``). ``--site``: ml_collections, six.

One change on both sides, not a flax.optim matter: the program calls the encoder-decoder
attention as flax of its time took it, ``nn.MultiHeadDotProductAttention(...)(y, encoded,
encoder_decoder_mask)``, and today's flax reads the third positional argument as ``inputs_v``
(``AssertionError: q, k, v must have same rank.``); the driver gives ``models`` a ``nn`` whose
``MultiHeadDotProductAttention`` (a subclass of the same name, so the same parameter names)
takes ``(inputs_q, inputs_kv, mask)`` and calls today's with ``mask=``
(``_driver.nn_with_kv_mask_attention``).
"""
import ast

import _driver

program, steps = _driver.setup('tensorflow', 'tensorboard', 'tensorflow_datasets',
                               'tensorflow_text', 'sentencepiece')
import flax.io  # noqa: E402
from flax import jax_utils  # noqa: E402
import jax  # noqa: E402
import numpy as np  # noqa: E402

_driver.plain_flax_io()   # checkpoints on the real file system, not the tensorflow stand-in

from configs import default  # noqa: E402
import models  # noqa: E402
import train  # noqa: E402


models.nn = _driver.nn_with_kv_mask_attention()   # attention called as (q, kv, mask)

VOCAB, LENGTH, BATCH = 32, 8, 4
DEVICES = jax.local_device_count()
NAMES = ['n_devices', 'train_config', 'eval_config', 'predict_config', 'start_step', 'rng',
         'init_rng', 'input_shape', 'target_shape', 'm', 'initial_variables', 'optimizer_def',
         'optimizer', 'learning_rate_fn', 'p_train_step', 'p_eval_step', 'dropout_rngs']


def make_config():
  config = default.get_config()
  config.vocab_size, config.num_layers, config.num_heads = VOCAB, 1, 2
  config.emb_dim, config.qkv_dim, config.mlp_dim = 16, 16, 32
  config.max_target_length = config.max_eval_target_length = LENGTH
  config.max_predict_length = LENGTH
  config.batch_size, config.use_bfloat16 = BATCH, False
  config.learning_rate, config.warmup_steps, config.weight_decay = 0.05, 3, 0.1
  config.label_smoothing = 0.1
  config.save_checkpoints = config.restore_checkpoints = True
  config.seed = 0
  return config


def save_statements():
  """The body of the training loop's ``if config.save_checkpoints and ...:``."""
  with open(train.__file__) as f:
    tree = ast.parse(f.read())
  function = next(n for n in tree.body
                  if isinstance(n, ast.FunctionDef) and n.name == 'train_and_evaluate')
  for node in ast.walk(function):
    if isinstance(node, ast.If) and 'save_checkpoints' in ast.unparse(node.test):
      return compile(ast.Module(body=node.body, type_ignores=[]), train.__file__, 'exec')
  raise AssertionError('no save_checkpoints statement')


def batch(data):
  tokens = data.randint(1, VOCAB, (2, BATCH, LENGTH)).astype(np.int32)
  lengths = data.randint(2, LENGTH + 1, (2, BATCH, 1))
  tokens = np.where(np.arange(LENGTH) < lengths, tokens, 0)
  shard = lambda x: x.reshape((DEVICES, BATCH // DEVICES, LENGTH))
  return {'inputs': shard(tokens[0]), 'targets': shard(tokens[1])}


def run(workdir, data, values, expect_start):
  ns = _driver.run_statements(train, 'train_and_evaluate', NAMES, stop='metrics_all',
                              config=make_config(), workdir=str(workdir), vocab_size=VOCAB)
  assert ns['start_step'] == expect_start, ns['start_step']
  optimizer, dropout_rngs = ns['optimizer'], ns['dropout_rngs']
  for _ in range(steps):
    optimizer, metrics, dropout_rngs = ns['p_train_step'](optimizer, batch(data),
                                                          dropout_rng=dropout_rngs)
    values.extend(float(metrics[k][0])
                  for k in ('loss', 'accuracy', 'denominator', 'learning_rate'))
  metrics = ns['p_eval_step'](_driver.params_of(optimizer), batch(np.random.RandomState(7)))
  values.extend(float(metrics[k][0]) for k in ('loss', 'accuracy', 'denominator'))
  return ns, optimizer


data, values, held = np.random.RandomState(0), [], []
workdir = program / 'driver_workdir'
workdir.mkdir()
ns, optimizer = run(workdir, data, values, 0)
namespace = dict(vars(train), config=make_config(), workdir=str(workdir), optimizer=optimizer,
                 step=steps - 1)
exec(save_statements(), namespace)
held.append(_driver.params_of(jax_utils.unreplicate(optimizer)))
ns, optimizer = run(workdir, data, values, steps)
held.append(_driver.params_of(jax_utils.unreplicate(optimizer)))
_driver.emit(values, held)
