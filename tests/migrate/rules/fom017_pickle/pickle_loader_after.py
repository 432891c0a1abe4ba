import json
import os
import pickle
import tempfile

import jax
import jax.numpy as jnp
import flax
import optax
from flax.training import train_state


def load(path):   # the program's own loader: what it returns is what the file holds
  with open(path, 'rb') as f:
    return pickle.load(f)


def save(path, value):
  with open(path, 'wb') as f:
    pickle.dump(value, f)


@jax.jit
def train_step(optimizer, x):
  loss, grads = jax.value_and_grad(
      lambda p: jnp.sum((p['w'] * x - 1.0) ** 2))(optimizer.params)
  return optimizer.apply_gradients(grads=grads), loss


def main():
  folder = tempfile.mkdtemp()
  x = jnp.array([1.0, 1.5, 2.0])
  optimizer = train_state.TrainState.create(apply_fn=None, params={'w': jnp.zeros(3)}, tx=optax.adam(learning_rate=0.05, b1=0.9, b2=0.999, eps=1e-08))
  losses = []
  for _ in range(5):
    optimizer, loss = train_step(optimizer, x)
    losses.append(float(loss))
  with open(os.path.join(folder, 'opt.pkl'), 'wb') as f:
    pickle.dump(flax.serialization.to_state_dict(optimizer), f)
  save(os.path.join(folder, 'x.pkl'), {'x': [1.0, 1.5, 2.0]})
  x = jnp.array(load(os.path.join(folder, 'x.pkl'))['x'])   # a pickle of no optimizer
  optimizer = flax.serialization.from_state_dict(optimizer, load(os.path.join(folder, 'opt.pkl')))
  for _ in range(5):
    optimizer, loss = train_step(optimizer, x)
    losses.append(float(loss))
  print(json.dumps(losses + [float(v) for v in optimizer.params['w']]))


if __name__ == '__main__':
  main()
