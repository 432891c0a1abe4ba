"""verilylifesciences/site-selection-tool's bsst/optimization.py (2021): the def and the optimizer
share one variable (``optimizer = optim.Adam(lr)``, ``optimizer = optimizer.create(params)``),
then a ``while`` loop in the same function rebinds it at each step and the result is read after
the loop. Each read after the create sees the optimizer, never the def: the loop's rebinding
runs only after the create."""
import json

import jax
import jax.numpy as jnp
from flax import optim


def fit(params, x, y, max_steps=6):
  def loss(p):
    return jnp.mean((jnp.tanh(x @ p['w']) - y) ** 2)

  optimizer = optim.Adam(0.05)
  optimizer = optimizer.create(params)
  losses = []
  while True:
    value, grad = jax.value_and_grad(loss)(optimizer.target)
    losses.append(float(value))
    optimizer = optimizer.apply_gradient(grad)
    if len(losses) >= max_steps:
      break
  return losses, optimizer.target


def main():
  params = {'w': jax.random.normal(jax.random.PRNGKey(0), (4, 3)) * 0.5}
  x = jax.random.normal(jax.random.PRNGKey(1), (8, 4))
  y = jnp.cos(x[:, :3])
  losses, final = fit(params, x, y)
  print(json.dumps(losses + [float(v) for v in jnp.ravel(final['w'])]))


if __name__ == '__main__':
  main()
