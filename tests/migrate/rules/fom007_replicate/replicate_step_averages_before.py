import json

import jax
import jax.numpy as jnp
from flax import optim


def loss_fn(params, x):
  return jnp.sum((params['w'] * x - 1.0) ** 2) + jnp.sum(params['b'] ** 2)


def train_step(optimizer, x):
  loss, grads = jax.value_and_grad(loss_fn)(optimizer.target, x)
  grads = jax.lax.pmean(grads, axis_name='batch')  # averaged here, and again by legacy's replicate()
  optimizer = optimizer.apply_gradient(grads)
  return optimizer, jax.lax.pmean(loss, axis_name='batch')


p_train_step = jax.pmap(train_step, axis_name='batch')


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
  devices = jax.local_device_count()
  x = 1.0 + 0.25 * jnp.arange(devices * 3, dtype=jnp.float32).reshape(devices, 3)
  optimizer = optim.Adam(learning_rate=0.05).create(params)
  optimizer = optimizer.replicate()
  losses = []
  for _ in range(20):
    optimizer, loss = p_train_step(optimizer, x)
    losses.append(float(loss[0]))
  optimizer = optimizer.unreplicate()
  print(json.dumps(losses + [float(v) for v in optimizer.target['w']]))


if __name__ == '__main__':
  main()
