import json

import jax
import jax.numpy as jnp
from jax import lax


@jax.jit
def step(x):
  y = jnp.clip(x, a_min=-1.0, a_max=1.5)
  z = jnp.clip(x * 3.0, a_max=2.0)
  return 2.0 * lax.tie_in(x, y + z)


def main():
  x = jnp.linspace(-2.0, 2.0, 9)
  for _ in range(3):
    x = step(x) * 0.75
  print(json.dumps([float(v) for v in x] + [jax.host_id(), jax.host_count()]))


if __name__ == '__main__':
  main()
