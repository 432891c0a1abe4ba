import json

import jax
import jax.numpy as jnp


@jax.jit
def step(x, n):
  # jnp.fix rounds toward zero; an integer (or bool) array came back as a float array.
  return jnp.trunc(jnp.true_divide(x * 2.5, True)) + jnp.trunc(jnp.true_divide(n, True)) + jnp.trunc(jnp.true_divide(n > 0, True))


def main():
  x = jnp.linspace(-2.0, 2.0, 9)
  n = jnp.asarray([-3, -1, 0, 2, 5, 7, -8, 1, 4])
  y = step(x, n)
  eager = jax.numpy.trunc(jax.numpy.true_divide(jnp.asarray([-1.5, 2.5], jnp.bfloat16), True))
  kinds = [float(v.dtype == jnp.float32) for v in (jnp.trunc(jnp.true_divide(n, True)), jnp.trunc(jnp.true_divide(n > 0, True)), jnp.trunc(jnp.true_divide(3, True)))]
  print(json.dumps([float(v) for v in y] + [float(v) for v in eager] + [float(jnp.trunc(jnp.true_divide(-7, True)))]
                   + kinds + [float(jnp.signbit(jnp.trunc(jnp.true_divide(jnp.asarray(-0.5), True))))]))


if __name__ == '__main__':
  main()
