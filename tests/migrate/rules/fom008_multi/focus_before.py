import json

import jax
import jax.numpy as jnp
from flax import optim


def loss_fn(params):
  return jnp.sum((params['dense']['kernel'] - 1.0) ** 2) + jnp.sum(params['head'] ** 2)


def main():
  params = {'dense': {'kernel': jnp.array([0.5, -1.0, 2.0])}, 'head': jnp.array([0.3])}
  optimizer = optim.Adam(learning_rate=0.05).create(
      params, focus=optim.ModelParamTraversal(lambda path, _: path.startswith('/dense')))
  losses = []
  for _ in range(20):
    loss, grads = jax.value_and_grad(loss_fn)(optimizer.target)
    optimizer = optimizer.apply_gradient(grads)
    losses.append(float(loss))
  print(json.dumps(losses))


if __name__ == '__main__':
  main()
