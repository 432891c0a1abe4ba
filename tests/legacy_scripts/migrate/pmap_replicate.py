"""Data-parallel training the flax 0.4 way: `jax_utils.replicate` of the optimizer, `jax.pmap`,
gradients averaged with `lax.pmean`, `jax_utils.unreplicate` at the end.

Usage: python pmap_replicate.py
Prints the final step, then (last line) a JSON list: the 20 losses, then every final parameter.
"""
import os
# 8 simulated CPU devices; must happen before jax is imported.
os.environ['XLA_FLAGS'] = ' '.join(
    [os.environ.get('XLA_FLAGS', ''), '--xla_force_host_platform_device_count=8']).strip()

import json

import jax
import jax.numpy as jnp
import numpy as np
from flax import jax_utils
from flax import linen as nn
from flax import optim
from flax.training import common_utils

NUM_STEPS = 20


class MLP(nn.Module):

  @nn.compact
  def __call__(self, x):
    x = nn.Dense(16)(x)
    x = nn.relu(x)
    return nn.Dense(1)(x)


def get_batch():
  rng = np.random.RandomState(1)
  x = rng.normal(size=(64, 3)).astype(np.float32)
  y = x @ np.array([[0.5], [-1.0], [2.0]], np.float32) + 0.3
  return {'x': x, 'y': y.astype(np.float32)}


def init_params(model, *inputs, **kwargs):
  """The model's params, with fixed values drawn by numpy (as from a pretrained checkpoint)."""
  params = model.init(jax.random.PRNGKey(0), *inputs, **kwargs)['params']
  rng = np.random.RandomState(0)
  return jax.tree_util.tree_map(
      lambda p: jnp.asarray(rng.normal(scale=0.4, size=p.shape), jnp.float32), params)


def loss_fn(params, batch):
  preds = MLP().apply({'params': params}, batch['x'])
  return jnp.mean((preds - batch['y']) ** 2)


def train_step(optimizer, batch):
  loss, grads = jax.value_and_grad(loss_fn)(optimizer.target, batch)
  grads = jax.lax.pmean(grads, axis_name='batch')
  loss = jax.lax.pmean(loss, axis_name='batch')
  optimizer = optimizer.apply_gradient(grads)
  return optimizer, loss


p_train_step = jax.pmap(train_step, axis_name='batch')


def main():
  assert jax.local_device_count() == 8, jax.devices()
  params = init_params(MLP(), jnp.ones((1, 3), jnp.float32))
  optimizer = optim.Momentum(learning_rate=0.05, beta=0.9, nesterov=True).create(params)
  optimizer = jax_utils.replicate(optimizer)
  batch = common_utils.shard(get_batch())
  losses = []
  for _ in range(NUM_STEPS):
    optimizer, loss = p_train_step(optimizer, batch)
    losses.append(float(loss[0]))
  optimizer = jax_utils.unreplicate(optimizer)
  print('final step', int(optimizer.state.step))
  leaves = jax.tree_util.tree_leaves(optimizer.target)
  print(json.dumps(losses + [float(v) for leaf in leaves for v in np.ravel(leaf)]))


if __name__ == '__main__':
  main()
