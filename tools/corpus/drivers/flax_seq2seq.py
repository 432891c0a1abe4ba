"""flax's examples/seq2seq of v0.3.x (flax.optim: `optim.Adam(learning_rate=FLAGS.learning_rate)
.create(param)` in `train.train_model`; the jitted `train.train_step` returns
`optimizer.apply_gradient(grad)`; `decode_batch` of `optimizer.target`).

The program calls `jax.mask` (`apply_model`), which today's jax does not have (removed in jax
0.3; migrate refuses the site, FOM299, and leaves it): the program fails there before and after
migration. The driver gives both sides a stand-in that ignores the logical shapes
(`jax.mask(f, ...)(args, shapes) == f(*args)`: the LSTMs run over the padding too; the loss
still masks by length), so the rest of the program can be compared. Its `nn.LSTMCell()` (no `features`) and
`nn.LSTMCell.initialize_carry(rng, (), size)` are flax 0.3's API, which today's flax refuses: the
driver gives both sides flax 0.3's cell (`LSTMCell` below). Neither is a flax.optim matter.

The statements of `train.train_model` that init the LSTM seq2seq and build the optimizer run as
the program wrote them (or as migrate rewrote them), up to its loop, with the program's flags
set to `--hidden_size 16 --batch_size 8` (rate 0.003, 3-digit queries). `steps` steps of
`train_step` on the program's own `get_batch` (Python's `random` seeded), keys split as the
loop splits them; then the sampled predictions of `decode_batch` (its `apply_model(...,
teacher_force=False)` on 5 examples, with the final params; `decode_batch` itself then fails on
both sides: today's jax arrays are not hashable as dict keys in `CTABLE.decode`). Emitted: the
loss and accuracy of every step, then the final params, then those predictions.
"""
import random

import _driver

program, steps = _driver.setup()
import jax  # noqa: E402

import jax.numpy as jnp  # noqa: E402
from flax import linen as nn  # noqa: E402

jax.mask = lambda fun, in_shapes, out_shape: lambda args, logical_shapes: fun(*args)


class LSTMCell(nn.Module):
  """flax 0.3's `nn.LSTMCell`: no `features` (the carry's size), four gates of Dense layers
  `ii`...`ho`, and a static `initialize_carry(rng, batch_dims, size)`; today's needs `features`
  and has an instance `initialize_carry(rng, input_shape)`."""

  @nn.compact
  def __call__(self, carry, inputs):
    c, h = carry
    dense_h = lambda name: nn.Dense(h.shape[-1], use_bias=True, name=name,
                                    kernel_init=nn.initializers.orthogonal(),
                                    bias_init=nn.initializers.zeros)
    dense_i = lambda name: nn.Dense(h.shape[-1], use_bias=False, name=name,
                                    kernel_init=nn.initializers.lecun_normal())
    i = nn.sigmoid(dense_i('ii')(inputs) + dense_h('hi')(h))
    f = nn.sigmoid(dense_i('if')(inputs) + dense_h('hf')(h))
    g = jnp.tanh(dense_i('ig')(inputs) + dense_h('hg')(h))
    o = nn.sigmoid(dense_i('io')(inputs) + dense_h('ho')(h))
    new_c = f * c + i * g
    new_h = o * jnp.tanh(new_c)
    return (new_c, new_h), new_h

  @staticmethod
  def initialize_carry(rng, batch_dims, size, init_fn=nn.initializers.zeros):
    key1, key2 = jax.random.split(rng)
    return init_fn(key1, batch_dims + (size,)), init_fn(key2, batch_dims + (size,))


nn.LSTMCell = LSTMCell
import train  # noqa: E402

train.FLAGS(['train.py', '--hidden_size=16', '--batch_size=8'])
random.seed(0)
ns = _driver.run_statements(train, 'train_model', ['param', 'optimizer', 'key'], stop='step')
optimizer, key = ns['optimizer'], ns['key']
losses = []
for step in range(steps):
  key, lstm_key = jax.random.split(key)
  batch, masks = train.get_batch(train.FLAGS.batch_size)
  optimizer, metrics = train.train_step(optimizer, batch, masks, lstm_key)
  losses += [metrics['loss'], metrics['accuracy']]
key, lstm_key = jax.random.split(key)
batch, masks = train.get_batch(5)
_, predictions = train.apply_model(batch, *masks, _driver.params_of(optimizer), lstm_key,
                                   teacher_force=False)
_driver.emit(losses, (_driver.params_of(optimizer), predictions))
