import json

import jax
import jax.numpy as jnp
from flax import optim


def lr_fn(step):
  return 0.1 / (1.0 + step)


def loss_fn(params, x):
  return jnp.sum((params['w'] * x - 1.0) ** 2)


@jax.jit
def train_step(optimizer, x):
  step = optimizer.state.step
  grads = jax.grad(loss_fn)(optimizer.target, x)
  optimizer = optimizer.apply_gradient(grads, learning_rate=lr_fn(step))
  grads = jax.grad(loss_fn)(optimizer.target, 2.0 * x)
  optimizer = optimizer.apply_gradient(grads, learning_rate=lr_fn(step))
  return optimizer


def main():
  optimizer = optim.GradientDescent(learning_rate=0.1).create({'w': jnp.ones(3)})
  trajectory = []
  for _ in range(10):
    optimizer = train_step(optimizer, jnp.arange(3.0))
    trajectory.extend(float(v) for v in optimizer.target['w'])
  print(json.dumps(trajectory))


if __name__ == '__main__':
  main()
