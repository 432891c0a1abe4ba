import json

import jax
import jax.numpy as jnp


@jax.jit
def step(x):
  y = jnp.clip(x, min=-1.0, max=1.5)
  z = jnp.clip(x * 3.0, max=2.0)
  return 2.0 * (y + z)


def main():
  x = jnp.linspace(-2.0, 2.0, 9)
  for _ in range(3):
    x = step(x) * 0.75
  print(json.dumps([float(v) for v in x] + [jax.process_index(), jax.process_count()]))


if __name__ == '__main__':
  main()
