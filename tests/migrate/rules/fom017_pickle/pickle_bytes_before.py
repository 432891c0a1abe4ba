import json
import pickle

import jax
import jax.numpy as jnp
from flax import optim


def loss_fn(params):
  return jnp.sum((params['w'] - jnp.array([1.0, -2.0, 0.5])) ** 2)


@jax.jit
def train_step(optimizer):
  loss, grads = jax.value_and_grad(loss_fn)(optimizer.target)
  return optimizer.apply_gradient(grads), loss


def train(optimizer, steps):
  losses = []
  for _ in range(steps):
    optimizer, loss = train_step(optimizer)
    losses.append(float(loss))
  return optimizer, losses


def main():
  optimizer = optim.Momentum(learning_rate=0.1, beta=0.9).create({'w': jnp.zeros(3)})
  optimizer, losses = train(optimizer, 8)
  blob = pickle.dumps(optimizer)
  optimizer, more = train(optimizer, 4)   # trained on, then back to the pickled state
  optimizer = pickle.loads(blob)
  optimizer, again = train(optimizer, 4)
  assert more == again, (more, again)
  print(json.dumps(losses + again + [float(v) for v in optimizer.target['w']]))


if __name__ == '__main__':
  main()
