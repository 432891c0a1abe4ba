"""Cli212's flax-BERT at c50887f2 (a Linen BERT for masked-language-model training with HF-style
module names, flax.optim in two scripts):

1. ``main.py``: ``optimizer = Adam().create(model.params)`` (no learning rate: migrated to
   ``optax.inject_hyperparams(optax.adam)`` with a 0.0 placeholder), ``jax_utils.replicate``, and
   the module-level ``train_step`` pmapped over ``"batch"`` (``donate_argnums=(0,)``): it reads
   ``optimizer.state.step``, takes that step's rate from the program's
   ``create_learning_rate_scheduler`` (``constant * linear_warmup * rsqrt_decay``, base 1e-3,
   warm-up ``min(args.warmup_steps, 1)`` = 1: the first step's rate is 0), ``pmean``s the
   gradient and calls ``apply_gradient(grad, learning_rate=lr)``. The statements of the
   ``__main__`` block that assign ``rng``, ``optimizer``, ``lr_scheduler_fn``,
   ``p_training_step``, ``dropout_rngs`` (up to the training loop) run as the program wrote them
   (or as migrate rewrote them), with ``model`` the driver's; ``train_step`` reads ``model`` and
   ``lr_scheduler_fn`` as globals of ``main``, so the driver sets them there. STEPS pmapped steps
   (``--devices 2``) on random token ids (about 15% of the positions carry a label, the others
   -100, the program's convention; the last two positions are padding, attention mask 0).
2. ``speed_test.py``: ``FlaxBertBenchmark(..., fp16=True)`` builds ``DynamicScale()`` (flax.optim's
   on the legacy side, ``flax.training.dynamic_scale``'s on the migrated side), and its
   ``train_speed_memory`` jits a step whose gradient comes from
   ``self.dynamic_scale.value_and_grad(loss_fn)`` (the program takes that branch only on a GPU:
   ``speed_test`` gets a ``jax`` whose devices say ``'gpu'`` (``_driver.GpuPlatform``);
   everything else is jax's own, but for ``jax.profiler.save_device_memory_profile``, a no-op).
   The program hands the step to ``timeit.repeat`` and keeps only the time: ``speed_test``'s
   ``timeit`` is a stand-in whose ``repeat`` calls the step once and records its outputs (the
   flattened gradient of the fp16 model at the program's own fixed inputs). At the default
   scale (65536) most of that gradient overflows; the program drops the returned dynamic scale,
   so the driver backs the benchmark's scale off as a non-finite step would (``replace(scale=
   scale * backoff_factor)``, fields both classes have) and runs the benchmark again, until the
   gradient is finite (at 32768).

The model: the program's ``bert.FlaxBertForPretrained`` (``layers.FlaxBertForMaskedLMModule``)
built from a config object with the fields it reads (vocabulary 32, hidden 16, 2 heads, 1 layer,
intermediate 32, 16 positions, dropout 0.1, gelu) and parameters from the module's own ``init``
(its ``from_pretrained`` reads a PyTorch checkpoint); float32 for 1, float16 for 2 (same seed).

Emitted: the loss of every step of 1 (device 0); for every benchmark run of 2 its scale, the
number of non-finite gradient entries and the gradient (non-finite entries as 0, the same on both
sides); then the final parameters of 1. Stand-ins (data, tokenizer, progress bars, GPU memory, tables; none on the
computation path): transformers (its ``BertConfig`` / ``TensorType`` are imported, not used
here), datasets, tqdm, py3nvml, pandas.
"""
import argparse
import types

import _driver

program, steps = _driver.setup('transformers', 'datasets', 'tqdm', 'py3nvml', 'pandas')
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from flax import jax_utils  # noqa: E402

import bert  # noqa: E402
import main  # noqa: E402
import speed_test  # noqa: E402

VOCAB, SEQ, PER_DEVICE = 32, 8, 2
N_DEV = jax.local_device_count()
config = types.SimpleNamespace(
    vocab_size=VOCAB, hidden_size=16, type_vocab_size=2, max_position_embeddings=16,
    num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, hidden_dropout_prob=0.1,
    hidden_act='gelu')


def make_model(dtype):
  """The program's wrapper around its module, with the module's own initial parameters."""
  shell = bert.FlaxBertForPretrained(config, {'placeholder': None}, dtype=dtype)
  ids = jnp.ones((1, SEQ), jnp.int32)
  params = shell.module.init({'params': jax.random.PRNGKey(0)}, ids, jnp.ones_like(ids),
                             jnp.ones_like(ids), jnp.arange(SEQ)[None])['params']
  return bert.FlaxBertForPretrained(config, params, dtype=dtype)


# 1. main.py's pmapped Adam training.
model = make_model(jnp.float32)
args = argparse.Namespace(seed=0, warmup_steps=5, batch_size=N_DEV * PER_DEVICE, train=True)
ns = _driver.run_statements(main, None, ['rng', 'optimizer', 'lr_scheduler_fn',
                                         'p_training_step', 'dropout_rngs'],
                            stop='loss', args=args, model=model)
main.model, main.lr_scheduler_fn = model, ns['lr_scheduler_fn']
optimizer, dropout_rngs = ns['optimizer'], ns['dropout_rngs']
data = np.random.RandomState(0)
values = []
for _ in range(steps):
  shape = (N_DEV, PER_DEVICE, SEQ)
  ids = data.randint(1, VOCAB, size=shape).astype(np.int32)
  mask = np.ones(shape, np.int32)
  mask[..., -2:] = 0
  ids[..., -2:] = 0
  labeled = (data.uniform(size=shape) < 0.15) & (mask > 0)
  labeled[..., 0] = True   # at least one label per row
  labels = np.where(labeled, ids, -100).astype(np.int32)
  inputs = {'input_ids': ids, 'attention_mask': mask, 'token_type_ids': np.zeros_like(ids),
            'labels': labels}
  loss, optimizer, dropout_rngs = ns['p_training_step'](optimizer, inputs, dropout_rngs)
  values.append(loss[0])
final = jax_utils.unreplicate(optimizer)


# 2. speed_test.py's fp16 step through DynamicScale.
class GpuPlatform(_driver.GpuPlatform):
  """jax whose devices say they are GPUs, and that writes no memory profile."""

  profiler = types.SimpleNamespace(save_device_memory_profile=lambda *a, **k: None)


recorded = []


def repeat(stmt, repeat=5, number=1, globals=None):  # pylint: disable=redefined-builtin
  recorded.append([np.asarray(g) for g in globals['train_step']()])
  return [0.0]


speed_test.jax = GpuPlatform('jax')
speed_test.timeit = types.SimpleNamespace(repeat=repeat)
speed_test.workload = (2, SEQ)
bench = speed_test.FlaxBertBenchmark(speed_test.workload, model=make_model(jnp.float16), jit=True,
                                     repeat=1, fp16=True)
assert bench.dynamic_scale is not None
grads_values = []
for _ in range(8):
  recorded.clear()
  bench.run(True)   # the step runs twice (warm-up, timed): the same gradient
  assert len(recorded) == 2, len(recorded)
  grads = np.concatenate([np.ravel(np.asarray(g, np.float64)) for g in recorded[-1]])
  bad = ~np.isfinite(grads)
  print('scale', float(bench.dynamic_scale.scale), 'non-finite', int(bad.sum()), 'of', bad.size)
  grads_values += [float(bench.dynamic_scale.scale), float(bad.sum())] + np.where(
      bad, 0.0, grads).tolist()
  if not bad.any():
    break
  # What the program's DynamicScale would do with a non-finite step: back off.
  bench.dynamic_scale = bench.dynamic_scale.replace(
      scale=bench.dynamic_scale.scale * bench.dynamic_scale.backoff_factor)
_driver.emit(values + grads_values, _driver.params_of(final))
