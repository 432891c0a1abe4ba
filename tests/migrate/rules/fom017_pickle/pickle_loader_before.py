import json
import os
import pickle
import tempfile

import jax
import jax.numpy as jnp
from flax import optim


def load(path):   # the program's own loader: what it returns is what the file holds
  with open(path, 'rb') as f:
    return pickle.load(f)


def save(path, value):
  with open(path, 'wb') as f:
    pickle.dump(value, f)


@jax.jit
def train_step(optimizer, x):
  loss, grads = jax.value_and_grad(
      lambda p: jnp.sum((p['w'] * x - 1.0) ** 2))(optimizer.target)
  return optimizer.apply_gradient(grads), loss


def main():
  folder = tempfile.mkdtemp()
  x = jnp.array([1.0, 1.5, 2.0])
  optimizer = optim.Adam(learning_rate=0.05).create({'w': jnp.zeros(3)})
  losses = []
  for _ in range(5):
    optimizer, loss = train_step(optimizer, x)
    losses.append(float(loss))
  with open(os.path.join(folder, 'opt.pkl'), 'wb') as f:
    pickle.dump(optimizer, f)
  save(os.path.join(folder, 'x.pkl'), {'x': [1.0, 1.5, 2.0]})
  x = jnp.array(load(os.path.join(folder, 'x.pkl'))['x'])   # a pickle of no optimizer
  optimizer = load(os.path.join(folder, 'opt.pkl'))
  for _ in range(5):
    optimizer, loss = train_step(optimizer, x)
    losses.append(float(loss))
  print(json.dumps(losses + [float(v) for v in optimizer.target['w']]))


if __name__ == '__main__':
  main()
