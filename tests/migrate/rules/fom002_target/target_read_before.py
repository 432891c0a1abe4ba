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
  for _ in range(10):
    grads = jax.grad(loss_fn)(optimizer.target)
    optimizer = optimizer.apply_gradient(grads)
    trajectory.append(float(optimizer.target['b'][0]))
  final = optimizer.target
  print(json.dumps(trajectory + [float(x) for x in final['w']]))


if __name__ == '__main__':
  main()
