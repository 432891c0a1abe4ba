import json

import jax
import jax.numpy as jnp
from flax import optim


def loss_fn(params):
  return jnp.sum((params['w'] - 1.0) ** 2) + jnp.sum(params['b'] ** 2)


def learning_rate_fn(step):
  return 0.1 * jnp.minimum(1.0, step / 5.0)


@jax.jit
def train_step(optimizer):
  loss, grads = jax.value_and_grad(loss_fn)(optimizer.target)
  lr = learning_rate_fn(optimizer.state.step + 1)
  optimizer = optimizer.apply_gradient(grads, learning_rate=lr)
  return optimizer, loss


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
  optimizer = optim.Adam(learning_rate=0.1).create(params)
  losses = []
  for _ in range(20):
    optimizer, loss = train_step(optimizer)
    losses.append(float(loss))
  print(json.dumps(losses))


if __name__ == '__main__':
  main()
