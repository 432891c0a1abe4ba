import json
import os
import pickle
import tempfile

import jax
import jax.numpy as jnp
from flax import jax_utils
from flax import optim


def loss_fn(params, x):
  return jnp.sum((params['w'] * x - 1.0) ** 2)


def train_step(optimizer, x):
  loss, grads = jax.value_and_grad(loss_fn)(optimizer.target, x)
  grads = jax.lax.pmean(grads, axis_name='batch')
  return optimizer.apply_gradient(grads), jax.lax.pmean(loss, axis_name='batch')


p_train_step = jax.pmap(train_step, axis_name='batch')


def train(optimizer, x, steps, losses):
  for _ in range(steps):
    optimizer, loss = p_train_step(optimizer, x)
    losses.append(float(loss[0]))
  return optimizer


def main():
  path = os.path.join(tempfile.mkdtemp(), 'state.pkl')
  devices = jax.local_device_count()
  x = 1.0 + 0.25 * jnp.arange(devices * 3, dtype=jnp.float32).reshape(devices, 3)
  optimizer = optim.Momentum(learning_rate=0.05, beta=0.9).create({'w': jnp.zeros(3)})
  optimizer = jax_utils.replicate(optimizer)
  losses = []
  optimizer = train(optimizer, x, 6, losses)
  with open(path, 'wb') as f:
    pickle.dump(jax_utils.unreplicate(optimizer), f)
  with open(path, 'rb') as f:   # loaded into a variable of its own, then replicated
    restored = pickle.load(f)
  optimizer = jax_utils.replicate(restored)
  optimizer = train(optimizer, x, 4, losses)
  with open(path, 'rb') as f:   # loaded and replicated in one expression
    optimizer = jax_utils.replicate(pickle.load(f))
  optimizer = train(optimizer, x, 4, losses)
  print(json.dumps(losses + [float(v) for v in jax_utils.unreplicate(optimizer).target['w']]))


if __name__ == '__main__':
  main()
