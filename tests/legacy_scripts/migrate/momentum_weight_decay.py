"""SGD with momentum and L2 weight decay, `optim.Momentum(..., weight_decay=...)` (the decay
enters the momentum), the optimizer built by a helper and passed to the train step.

Usage: python momentum_weight_decay.py
Prints (last line) a JSON list: the 20 losses, then every final parameter.
"""
import json

import jax
import jax.numpy as jnp
import numpy as np
from flax import linen as nn
from flax import optim

NUM_STEPS = 20


class ConvNet(nn.Module):

  @nn.compact
  def __call__(self, x):
    x = nn.Conv(4, kernel_size=(3, 3))(x)
    x = nn.relu(x)
    x = x.reshape((x.shape[0], -1))
    return nn.Dense(1)(x)


def get_batch():
  rng = np.random.RandomState(4)
  x = rng.normal(size=(16, 5, 5, 1)).astype(np.float32)
  y = x.mean(axis=(1, 2)) - 0.5 * x[:, 2, 2]
  return {'x': x, 'y': y.astype(np.float32)}


def create_optimizer(params, learning_rate):
  optimizer_def = optim.Momentum(learning_rate=learning_rate, beta=0.9, weight_decay=1e-2)
  return optimizer_def.create(params)


def init_params(model, *inputs, **kwargs):
  """The model's params, with fixed values drawn by numpy (as from a pretrained checkpoint)."""
  params = model.init(jax.random.PRNGKey(0), *inputs, **kwargs)['params']
  rng = np.random.RandomState(0)
  return jax.tree_util.tree_map(
      lambda p: jnp.asarray(rng.normal(scale=0.4, size=p.shape), jnp.float32), params)


def loss_fn(params, batch):
  preds = ConvNet().apply({'params': params}, batch['x'])
  return jnp.mean((preds - batch['y']) ** 2)


@jax.jit
def train_step(optimizer, batch):
  loss, grads = jax.value_and_grad(loss_fn)(optimizer.target, batch)
  new_optimizer = optimizer.apply_gradient(grads)
  return new_optimizer, loss


def main():
  params = init_params(ConvNet(), jnp.ones((1, 5, 5, 1), jnp.float32))
  optimizer = create_optimizer(params, learning_rate=0.005)
  batch = get_batch()
  losses = []
  for _ in range(NUM_STEPS):
    optimizer, loss = train_step(optimizer, batch)
    losses.append(float(loss))
  leaves = jax.tree_util.tree_leaves(optimizer.target)
  print(json.dumps(losses + [float(v) for leaf in leaves for v in np.ravel(leaf)]))


if __name__ == '__main__':
  main()
