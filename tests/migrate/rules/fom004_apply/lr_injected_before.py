import json

import jax
import jax.numpy as jnp
from flax import optim


def loss_fn(params):
  return jnp.sum((params['w'] - 1.0) ** 2) + jnp.sum(params['b'] ** 2)


@jax.jit
def train_step(optimizer, lr):
  loss, grads = jax.value_and_grad(loss_fn)(optimizer.target)
  optimizer = optimizer.apply_gradient(grads, learning_rate=lr)
  return optimizer, loss


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
  optimizer = optim.Momentum(beta=0.8).create(params)
  losses = []
  for epoch in range(4):
    for _ in range(5):
      optimizer, loss = train_step(optimizer, 0.1 * 0.5 ** epoch)
      losses.append(float(loss))
  print(json.dumps(losses))


if __name__ == '__main__':
  main()
