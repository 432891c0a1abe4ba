import json

import jax
import jax.numpy as jnp
from flax import optim


def loss_fn(params, x):
  return jnp.sum((params['w'] * x - 1.0) ** 2) + jnp.sum(params['b'] ** 2)


def fit(x):
  optimizer = optim.Adam(learning_rate=0.05).create({'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])})
  for _ in range(20):
    grads = jax.grad(loss_fn)(optimizer.target, x)
    optimizer = optimizer.apply_gradient(grads)
  return optimizer.target['w']


v_fit = jax.vmap(fit)
fit_all = jax.jit(v_fit)


def main():
  xs = 1.0 + 0.25 * jnp.arange(12, dtype=jnp.float32).reshape(4, 3)
  print(json.dumps([float(v) for v in fit_all(xs).ravel()]))


if __name__ == '__main__':
  main()
