import json

import jax
import jax.numpy as jnp
from jax import config

config.update('jax_numpy_rank_promotion', 'allow')


def noisy(x: jax.Array, key: jax.Array) -> jax.Array:
  assert isinstance(x, jax.Array)
  return x * 1.5 - 0.25 + key[1].astype(x.dtype)


def main():
  x = jnp.array([1.0, 2.0, 3.0])
  key = jax.random.PRNGKey(3)
  for _ in range(3):
    x = noisy(x, key)
  print(json.dumps([float(v) for v in x] + [float(isinstance(x, jax.Array))]))


if __name__ == '__main__':
  main()
