"""A factory reached through its package's re-export (``optpkg.make_optimizer``, defined in
``optpkg/factory.py`` and re-exported by ``from .factory import *``): the optimizer it returns
is stepped here. Before, the call did not resolve and only the factory's create was rewritten,
leaving this file's apply_gradient and target as they were (half-migrated, no record)."""
import json

import jax
import jax.numpy as jnp

import optpkg


def main():
  params = {'w': jnp.full((3, 2), 0.2), 'b': jnp.zeros(2)}
  optimizer = optpkg.make_optimizer(params, 0.05)
  x = jax.random.normal(jax.random.PRNGKey(0), (8, 3))
  y = jnp.cos(x[:, :2])
  losses = []
  for _ in range(4):
    def loss_fn(p):
      return jnp.mean((x @ p['w'] + p['b'] - y) ** 2)
    loss, grad = jax.value_and_grad(loss_fn)(optimizer.target)
    optimizer = optimizer.apply_gradient(grad)
    losses.append(float(loss))
  print(json.dumps(losses + [float(v) for v in jax.tree_util.tree_leaves(optimizer.target)
                             for v in jnp.ravel(v)]))


if __name__ == '__main__':
  main()
