import json

import jax
import jax.numpy as jnp
from jax.example_libraries import optimizers


def main():
  x = jnp.zeros(5)
  x = x.at[1:3].set(2.0)
  x = x.at[0].add(1.0)
  x = x.at[2].multiply(3.0)
  x = x.at[3].min(-1.0)
  x = (x + 0.5).at[4].max(4.0)
  summed = jax.tree_util.tree_map(lambda a, b: a + b, {'x': x}, {'x': jnp.ones(5)})
  init, update, get_params = optimizers.sgd(0.5)
  state = update(0, summed['x'], init(summed['x']))
  print(json.dumps([float(v) for v in get_params(state)]))


if __name__ == '__main__':
  main()
