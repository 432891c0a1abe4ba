import json

import jax
import jax.numpy as jnp
from flax import optim


def loss_fn(params):
  return jnp.sum((params['w'] - 1.0) ** 2) + jnp.sum(params['b'] ** 2)


def create_optimizer(params, learning_rate):
  optimizer_def = optim.Momentum(learning_rate, nesterov=True)
  return optimizer_def.create(params)


@jax.jit
def train_step(optimizer):
  loss, grads = jax.value_and_grad(loss_fn)(optimizer.target)
  optimizer = optimizer.apply_gradient(grads)
  return optimizer, loss


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
  optimizer = create_optimizer(params, 0.05)
  losses = []
  for _ in range(20):
    optimizer, loss = train_step(optimizer)
    losses.append(float(loss))
  print(json.dumps(losses))


if __name__ == '__main__':
  main()
