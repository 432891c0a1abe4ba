import json

import jax
import jax.numpy as jnp
from flax import jax_utils
import optax
from flax.training import train_state


def loss_fn(params, x):
  return jnp.sum((params['w'] * x - 1.0) ** 2) + jnp.sum(params['b'] ** 2)


def train_step(optimizer, x):
  loss, grads = jax.value_and_grad(loss_fn)(optimizer.params, x)
  grads = jax.lax.pmean(grads, axis_name='batch')  # averaged here, and again by legacy's replicate()
  optimizer = optimizer.apply_gradients(grads=grads)
  return optimizer, jax.lax.pmean(loss, axis_name='batch')


p_train_step = jax.pmap(train_step, axis_name='batch')


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
  devices = jax.local_device_count()
  x = 1.0 + 0.25 * jnp.arange(devices * 3, dtype=jnp.float32).reshape(devices, 3)
  optimizer = train_state.TrainState.create(apply_fn=None, params=params, tx=optax.adam(learning_rate=0.05, b1=0.9, b2=0.999, eps=1e-08))
  optimizer = jax_utils.replicate(optimizer)
  losses = []
  for _ in range(20):
    optimizer, loss = p_train_step(optimizer, x)
    losses.append(float(loss[0]))
  optimizer = jax_utils.unreplicate(optimizer)
  print(json.dumps(losses + [float(v) for v in optimizer.params['w']]))


if __name__ == '__main__':
  main()
