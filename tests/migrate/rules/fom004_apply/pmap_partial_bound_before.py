import functools
import json

import jax
import jax.numpy as jnp
from flax import jax_utils
from flax import optim


def loss_fn(params, x, scale):
  return jnp.sum((params['w'] * x * scale - 1.0) ** 2) + jnp.sum(params['b'] ** 2)


def train_step(scale, optimizer, x):
  loss, grads = jax.value_and_grad(loss_fn)(optimizer.target, x, scale)
  grads = jax.lax.pmean(grads, axis_name='batch')
  optimizer = optimizer.apply_gradient(grads)
  return optimizer, jax.lax.pmean(loss, axis_name='batch')


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
  devices = jax.local_device_count()
  x = 1.0 + 0.25 * jnp.arange(devices * 3, dtype=jnp.float32).reshape(devices, 3)
  optimizer = optim.Adam(learning_rate=0.05).create(params)
  optimizer = jax_utils.replicate(optimizer)
  train_fn = functools.partial(train_step, 0.75)
  p_train_step = jax.pmap(train_fn, axis_name='batch')
  losses = []
  for _ in range(20):
    optimizer, loss = p_train_step(optimizer, x)
    losses.append(float(loss[0]))
  optimizer = jax_utils.unreplicate(optimizer)
  print(json.dumps(losses + [float(v) for v in optimizer.target['w']]))


if __name__ == '__main__':
  main()
