import json

import jax
import jax.numpy as jnp
from flax import optim


def loss_fn(params):
  return jnp.sum((params['w'] - 1.0) ** 2)


def step(optimizer_or_params, grads):
  if isinstance(optimizer_or_params, optim.Optimizer):
    return optimizer_or_params.apply_gradient(grads)
  return jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, optimizer_or_params, grads)


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0])}
  optimizer = optim.Momentum(learning_rate=0.1, beta=0.9).create(params)
  losses = []
  for _ in range(10):
    loss, grads = jax.value_and_grad(loss_fn)(optimizer.target)
    optimizer = step(optimizer, grads)
    losses.append(float(loss))
  print(json.dumps(losses + [float(x) for x in optimizer.target['w']]))


if __name__ == '__main__':
  main()
