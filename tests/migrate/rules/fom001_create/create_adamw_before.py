import json

import jax
import jax.numpy as jnp
from flax import optim


def loss_fn(params):
  return jnp.sum((params['w'] - 1.0) ** 2) + jnp.sum(params['b'] ** 2)


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
  optimizer = optim.Adam(0.05, beta2=0.99, weight_decay=1e-3).create(params)
  losses = []
  for _ in range(20):
    loss, grads = jax.value_and_grad(loss_fn)(optimizer.target)
    optimizer = optimizer.apply_gradient(grads)
    losses.append(float(loss))
  print(json.dumps(losses))


if __name__ == '__main__':
  main()
