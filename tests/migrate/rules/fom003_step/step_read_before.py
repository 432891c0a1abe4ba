import json

import jax
import jax.numpy as jnp
from flax import optim


def loss_fn(params):
  return jnp.sum((params['w'] - 1.0) ** 2) + jnp.sum(params['b'] ** 2)


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
  optimizer = optim.GradientDescent(learning_rate=0.1).create(params)
  trajectory = []
  while optimizer.state.step < 20:
    loss, grads = jax.value_and_grad(loss_fn)(optimizer.target)
    optimizer = optimizer.apply_gradient(grads)
    trajectory.extend([float(loss), float(optimizer.state.step)])
  print(json.dumps(trajectory))


if __name__ == '__main__':
  main()
