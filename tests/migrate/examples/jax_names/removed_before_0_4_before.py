import json

import jax
import jax.numpy as jnp
from jax.experimental import optimizers
from jax.ops import index, index_update


def main():
  jax.config.enable_omnistaging()
  x = jnp.zeros(5)
  x = index_update(x, index[1:3], 2.0)
  x = jax.ops.index_add(x, jax.ops.index[0], 1.0)
  x = jax.ops.index_mul(x, jax.ops.index[2], 3.0)
  x = jax.ops.index_min(x, 3, -1.0)
  x = jax.ops.index_max(x + 0.5, jax.ops.index[4], 4.0)
  summed = jax.tree_multimap(lambda a, b: a + b, {'x': x}, {'x': jnp.ones(5)})
  init, update, get_params = optimizers.sgd(0.5)
  state = update(0, summed['x'], init(summed['x']))
  print(json.dumps([float(v) for v in get_params(state)]))


if __name__ == '__main__':
  main()
