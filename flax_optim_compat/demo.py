"""Trains a tiny linen MLP through the legacy ``flax.optim`` API on generated data.

Run it with ``python -m flax_optim_compat.demo``; it prints the loss going down.
"""
import jax
import jax.numpy as jnp
import flax.linen as nn

import flax_optim_compat as optim


class _MLP(nn.Module):

  @nn.compact
  def __call__(self, x):
    return nn.Dense(1)(nn.tanh(nn.Dense(16)(x)))


def train(steps: int = 200, learning_rate: float = 0.05, seed: int = 0, log_every: int = 25):
  """Fits ``y = sin(3 x0) + x1`` with legacy ``optim.Adam``; returns the list of losses.

  Examples:
    >>> losses = train(steps=30, log_every=0)
    >>> bool(losses[-1] < 0.5 * losses[0])
    True
  """
  kx, kinit = jax.random.split(jax.random.PRNGKey(seed))
  x = jax.random.uniform(kx, (256, 2), minval=-1.0, maxval=1.0)
  y = jnp.sin(3.0 * x[:, :1]) + x[:, 1:]
  model = _MLP()
  optimizer = optim.Adam(learning_rate=learning_rate).create(model.init(kinit, x)['params'])

  @jax.jit
  def train_step(optimizer, lr):
    def loss_fn(params):
      return jnp.mean((model.apply({'params': params}, x) - y) ** 2)
    loss, grads = jax.value_and_grad(loss_fn)(optimizer.target)
    return optimizer.apply_gradient(grads, learning_rate=lr), loss

  losses = []
  for step in range(steps):
    # A per-step learning-rate override, the legacy way to run a schedule.
    lr = learning_rate * (1.0 - 0.5 * step / steps)
    optimizer, loss = train_step(optimizer, lr)
    losses.append(float(loss))
    if log_every and (step % log_every == 0 or step == steps - 1):
      print(f'step {step:4d}  loss {float(loss):.5f}')
  return losses


if __name__ == '__main__':
  import warnings
  warnings.simplefilter('ignore', optim.FlaxOptimDeprecationWarning)
  train()
