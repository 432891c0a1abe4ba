"""jesse-michael-han's fork of flax at 8583bb9a, ``examples/wmt`` (flax's Transformer
translation example, with its own prediction path ``build_pred_thunks`` / ``predict_step2``,
used by ``predict.py``): a checkpoint written by the training function and restored by a
different function of the program, into an optimizer that function builds itself (each of the
program's three ``optim.Adam(config.learning_rate, beta1=0.9, beta2=0.98, eps=1e-9,
weight_decay=config.weight_decay)`` sites is rewritten on its own; the checkpoint only loads if
they agree on the layout).

1. Training: the statements of ``train.train_and_evaluate`` that build the model, the
   optimizer and the step functions, as the program wrote them (or as migrate rewrote them;
   ``_driver.run_statements``, up to ``hooks``): ``TransformerConfig``, the jitted ``init``,
   the ``Adam`` above ``.create(params)`` (migrated: ``optax.adamw`` with its learning rate
   injected, in a ``TrainState``), ``restore_checkpoint`` (nothing there yet),
   ``jax_utils.replicate``, ``create_learning_rate_scheduler`` and the pmapped ``train_step``
   (``optimizer.state.step`` read for the rate, ``apply_gradient(grad, learning_rate=lr)``),
   ``eval_step``; STEPS steps; then the program's own checkpoint statement of its loop (the
   body of ``if save_ckpt_flag:``, found in the source and executed with the loop's ``step`` =
   STEPS - 1; its ``report_progress`` a stand-in): ``checkpoints.save_checkpoint(workdir,
   jax_utils.unreplicate(optimizer), step)``.
2. Prediction: the program's ``build_pred_thunks(config, workdir)`` (its own ``Adam``
   ``.create``, ``restore_checkpoint(workdir, optimizer)``, ``start_step =
   int(optimizer.state.step)``, the pmapped ``initialize_cache`` and ``predict_step2``); the
   restored parameters it returns must equal the trained ones (asserted, on each side), and are
   emitted. Its ``p_init_cache`` / ``p_pred_step`` (beam search) are not run: the program's
   fast decoding fails on today's flax on both sides (a ``ConcretizationTypeError`` in
   ``decode.beam_search``'s loop through ``Transformer.decode``'s cache), before and after
   migration alike.

Config: the program's ``configs/default.py`` shrunk: vocabulary 32, one layer, ``emb_dim`` /
``qkv_dim`` 16, ``mlp_dim`` 32, 2 heads, length 8, 2 per device on 2 simulated devices (run
with ``--devices 2``), rate 0.05 with 3 warm-up steps (the rate changes every step),
``weight_decay`` 0.1 (default 0), label smoothing 0.1, dropout 0.1. Synthetic batches (seed 0):
token ids in [1, 32) padded with zeros after a random length.

The trajectory: per training step the loss, accuracy, denominator and learning rate (device 0),
``p_eval_step`` on a fixed batch, then the trained parameters, then the parameters
``build_pred_thunks`` restored (asserted equal to them on each side). Stand-ins: tensorflow,
tensorboard, tensorflow_datasets, tensorflow_text, sentencepiece, clu (input pipeline, metric
writers, progress reports: not on the computation path); the program's
``input_pipeline.get_wmt_datasets``, which ``build_pred_thunks`` calls for the encoder,
returns no data sets and an encoder of the vocabulary size (the driver's); ``flax.io`` set to
its plain backend (``_driver.plain_flax_io``; a stand-in tensorflow would make it take tf.io.gfile); the work folder
(``driver_workdir`` in the program copy, kept for inspection) made by the driver.
``--site``: ml_collections, six.

One change on both sides, not a flax.optim matter: the program calls the encoder-decoder
attention as the flax of its time took it, ``nn.MultiHeadDotProductAttention(...)(y, encoded,
encoder_decoder_mask)``, which today's flax reads as ``inputs_v``; the driver gives ``models`` a
``nn`` whose ``MultiHeadDotProductAttention`` (a subclass of the same name, so the same
parameter names) takes ``(inputs_q, inputs_kv, mask)`` (``_driver.nn_with_kv_mask_attention``).
"""
import ast

import _driver

program, steps = _driver.setup('tensorflow', 'tensorboard', 'tensorflow_datasets',
                               'tensorflow_text', 'sentencepiece', 'clu')
import flax.io  # noqa: E402
from flax import jax_utils  # noqa: E402
import jax  # noqa: E402
import numpy as np  # noqa: E402

_driver.plain_flax_io()   # checkpoints on the real file system, not the tensorflow stand-in

from configs import default  # noqa: E402
import input_pipeline  # noqa: E402
import models  # noqa: E402
import train  # noqa: E402


models.nn = _driver.nn_with_kv_mask_attention()   # attention called as (q, kv, mask)

VOCAB, LENGTH, PER_DEVICE = 32, 8, 2
DEVICES = jax.local_device_count()
NAMES = ['train_config', 'eval_config', 'predict_config', 'start_step', 'rng', 'init_rng',
         'input_shape', 'target_shape', 'm', 'initial_variables', 'optimizer_def', 'optimizer',
         'learning_rate_fn', 'p_train_step', 'p_eval_step', 'dropout_rngs']


class Encoder:
  def vocab_size(self):
    return VOCAB


input_pipeline.get_wmt_datasets = lambda **kwargs: (None, None, None, Encoder())


def make_config():
  config = default.get_config()
  config.vocab_size, config.num_layers, config.num_heads = VOCAB, 1, 2
  config.emb_dim, config.qkv_dim, config.mlp_dim = 16, 16, 32
  config.max_target_length = config.max_eval_target_length = LENGTH
  config.max_predict_length = LENGTH
  config.per_device_batch_size, config.use_bfloat16 = PER_DEVICE, False
  config.learning_rate, config.warmup_steps, config.weight_decay = 0.05, 3, 0.1
  config.label_smoothing, config.beam_size = 0.1, 4
  config.save_checkpoints = config.restore_checkpoints = True
  config.seed = 0
  return config


def save_statements():
  """The body of the training loop's ``if save_ckpt_flag:``."""
  with open(train.__file__) as f:
    tree = ast.parse(f.read())
  function = next(n for n in tree.body
                  if isinstance(n, ast.FunctionDef) and n.name == 'train_and_evaluate')
  for node in ast.walk(function):
    if isinstance(node, ast.If) and ast.unparse(node.test) == 'save_ckpt_flag':
      return compile(ast.Module(body=node.body, type_ignores=[]), train.__file__, 'exec')
  raise AssertionError('no save_ckpt_flag statement')


def tokens(data):
  ids = data.randint(1, VOCAB, (DEVICES, PER_DEVICE, LENGTH)).astype(np.int32)
  lengths = data.randint(2, LENGTH + 1, (DEVICES, PER_DEVICE, 1))
  return np.where(np.arange(LENGTH) < lengths, ids, 0)


data, values = np.random.RandomState(0), []
workdir = program / 'driver_workdir'
workdir.mkdir()
ns = _driver.run_statements(train, 'train_and_evaluate', NAMES, stop='hooks',
                            config=make_config(), workdir=str(workdir), vocab_size=VOCAB)
assert ns['start_step'] == 0, ns['start_step']
optimizer, dropout_rngs = ns['optimizer'], ns['dropout_rngs']
for _ in range(steps):
  batch = {'inputs': tokens(data), 'targets': tokens(data)}
  optimizer, metrics = ns['p_train_step'](optimizer, batch, dropout_rng=dropout_rngs)
  values.extend(float(metrics[k][0])
                for k in ('loss', 'accuracy', 'denominator', 'learning_rate'))
fixed = np.random.RandomState(7)
metrics = ns['p_eval_step'](_driver.params_of(optimizer),
                            {'inputs': tokens(fixed), 'targets': tokens(fixed)})
values.extend(float(metrics[k][0]) for k in ('loss', 'accuracy', 'denominator'))
trained = _driver.params_of(jax_utils.unreplicate(optimizer))
exec(save_statements(), dict(vars(train), workdir=str(workdir), optimizer=optimizer,
                             step=steps - 1, report_progress=_driver._StandIn()))

_, _, restored, _, _, _ = train.build_pred_thunks(make_config(), str(workdir))
same = jax.tree_util.tree_map(lambda a, b: bool(np.array_equal(a, b)), trained, restored)
assert all(jax.tree_util.tree_leaves(same)), 'restored parameters differ from the trained ones'
_driver.emit(values, [trained, restored])
