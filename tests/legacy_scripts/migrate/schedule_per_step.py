"""A learning-rate schedule fed per step from the optimizer's own step counter, inside a
jitted train step: `apply_gradient(grads, learning_rate=learning_rate_fn(step + 1))`, with a
1-based warm-up (the first update uses learning_rate_fn(1), not 0).

Usage: python schedule_per_step.py
Prints (last line) a JSON list: the 25 losses, then every final parameter.
"""
import json

import jax
import jax.numpy as jnp
import numpy as np
from flax import linen as nn
from flax import optim

NUM_STEPS = 25
BASE_LR = 0.05
WARMUP_STEPS = 10


class MLP(nn.Module):

  @nn.compact
  def __call__(self, x):
    x = nn.Dense(12)(x)
    x = nn.tanh(x)
    return nn.Dense(2)(x)


def get_batch():
  rng = np.random.RandomState(2)
  x = rng.uniform(-1.0, 1.0, size=(32, 4)).astype(np.float32)
  y = np.stack([np.sin(3.0 * x[:, 0]), x[:, 1] * x[:, 2] - x[:, 3]], axis=1)
  return {'x': x, 'y': y.astype(np.float32)}


def learning_rate_fn(step):
  """Linear warm-up to BASE_LR over WARMUP_STEPS, then halved every 5 steps."""
  warmup = jnp.minimum(1.0, step / WARMUP_STEPS)
  decay = 0.5 ** jnp.maximum(0, (step - WARMUP_STEPS) // 5)
  return BASE_LR * warmup * decay


def init_params(model, *inputs, **kwargs):
  """The model's params, with fixed values drawn by numpy (as from a pretrained checkpoint)."""
  params = model.init(jax.random.PRNGKey(0), *inputs, **kwargs)['params']
  rng = np.random.RandomState(0)
  return jax.tree_util.tree_map(
      lambda p: jnp.asarray(rng.normal(scale=0.4, size=p.shape), jnp.float32), params)


def loss_fn(params, batch):
  preds = MLP().apply({'params': params}, batch['x'])
  return jnp.mean((preds - batch['y']) ** 2)


@jax.jit
def train_step(optimizer, batch):
  step = optimizer.state.step
  loss, grads = jax.value_and_grad(loss_fn)(optimizer.target, batch)
  optimizer = optimizer.apply_gradient(grads, learning_rate=learning_rate_fn(step + 1))
  return optimizer, loss


def main():
  params = init_params(MLP(), jnp.ones((1, 4), jnp.float32))
  optimizer = optim.Adam(learning_rate=BASE_LR, beta1=0.9, beta2=0.99).create(params)
  batch = get_batch()
  losses = []
  for _ in range(NUM_STEPS):
    optimizer, loss = train_step(optimizer, batch)
    losses.append(float(loss))
  leaves = jax.tree_util.tree_leaves(optimizer.target)
  print(json.dumps(losses + [float(v) for leaf in leaves for v in np.ravel(leaf)]))


if __name__ == '__main__':
  main()
