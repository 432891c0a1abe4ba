"""flax's examples/nlp_seq of v0.5.0 (flax.optim: `optim.Adam(learning_rate, beta1=0.9,
beta2=0.98, eps=1e-9, weight_decay=1e-1)` built in `train.main`, replicated; the pmapped
`train_step` sets the rate of every step with `optimizer.apply_gradient(grad, learning_rate=lr)`
from `create_learning_rate_scheduler` of `optimizer.state.step`, and returns the next dropout rng).

The statements of `train.main` that build the model, init it (the jitted
`initialize_variables`), build and replicate the optimizer, the schedule and `p_train_step` run
as the program wrote them (or as migrate rewrote them), up to `eval_step`; the driver gives
them a small `models.TransformerConfig` (vocabulary 32, 5 tags, 1 layer, emb/qkv 16, mlp 32,
2 heads, max_len 8) instead of the vocabularies `input_pipeline.create_vocabs` reads, and
`learning_rate` 1000 (the schedule's fixed 8000-step warmup and rsqrt decay then give a rate of
about 1.4e-3 * step; 0.05, the default, gives updates of 1e-7). `steps` pmapped steps (over every
device: `--devices 2`), 2 sentences of 8 random token ids with padding per device, the dropout
rngs carried as the loop carries them. Emitted: the loss of every step (summed loss over the
summed weights of device 0's metrics), then the final params.
"""
import _driver

program, steps = _driver.setup('tensorflow', 'tensorflow_datasets', 'tensorboard', 'clu')
import jax  # noqa: E402
import numpy as np  # noqa: E402
from flax import jax_utils  # noqa: E402
import models  # noqa: E402
import train  # noqa: E402

VOCAB, TAGS, LENGTH = 32, 5, 8
config = models.TransformerConfig(vocab_size=VOCAB, output_vocab_size=TAGS, max_len=LENGTH,
                                  emb_dim=16, num_heads=2, num_layers=1, qkv_dim=16, mlp_dim=32)
ns = _driver.run_statements(
    train, 'main', ['model', 'rng', 'init_rng', 'init_variables', 'optimizer_def', 'optimizer',
                    'learning_rate_fn', 'p_train_step'],
    stop='p_eval_step', config=config, learning_rate=1000.0, random_seed=0)
optimizer, p_train_step = ns['optimizer'], ns['p_train_step']
n_dev = jax.local_device_count()
dropout_rngs = jax.random.split(ns['rng'], n_dev)
data = np.random.RandomState(0)
losses = []
for _ in range(steps):
  inputs = data.randint(1, VOCAB, size=(n_dev, 2, LENGTH)).astype(np.int32)
  targets = data.randint(1, TAGS, size=(n_dev, 2, LENGTH)).astype(np.int32)
  inputs[..., 6:] = 0
  targets[..., 6:] = 0
  optimizer, metrics, dropout_rngs = p_train_step(
      optimizer, {'inputs': inputs, 'targets': targets}, dropout_rng=dropout_rngs)
  losses.append(metrics['loss'][0] / metrics['denominator'][0])
_driver.emit(losses, _driver.params_of(jax_utils.unreplicate(optimizer)))
