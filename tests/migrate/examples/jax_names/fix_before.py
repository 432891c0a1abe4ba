import json

import jax
import jax.numpy as jnp


@jax.jit
def step(x, n):
  # jnp.fix rounds toward zero; an integer (or bool) array came back as a float array.
  return jnp.fix(x * 2.5) + jnp.fix(n) + jnp.fix(n > 0)


def main():
  x = jnp.linspace(-2.0, 2.0, 9)
  n = jnp.asarray([-3, -1, 0, 2, 5, 7, -8, 1, 4])
  y = step(x, n)
  eager = jax.numpy.fix(jnp.asarray([-1.5, 2.5], jnp.bfloat16))
  kinds = [float(v.dtype == jnp.float32) for v in (jnp.fix(n), jnp.fix(n > 0), jnp.fix(3))]
  print(json.dumps([float(v) for v in y] + [float(v) for v in eager] + [float(jnp.fix(-7))]
                   + kinds + [float(jnp.signbit(jnp.fix(jnp.asarray(-0.5))))]))


if __name__ == '__main__':
  main()
