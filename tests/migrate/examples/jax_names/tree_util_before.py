import json

import jax
import jax.numpy as jnp
from jax import tree_leaves


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.25])}
  for _ in range(5):
    grads = jax.tree_map(lambda p: 2.0 * p - 1.0, params)
    params = jax.tree_map(lambda p, g: p - 0.1 * g, params, grads)
  leaves, treedef = jax.tree_flatten(params)
  tripled = jax.tree_unflatten(jax.tree_structure(params), [leaf * 3.0 for leaf in leaves])
  pairs = [(params['w'], tripled['w']), (params['b'], tripled['b'])]
  swapped = jax.tree_transpose(jax.tree_structure([0, 0]), jax.tree_structure((0, 0)), pairs)
  values = [float(v) for leaf in tree_leaves([tripled, swapped]) for v in leaf]
  print(json.dumps(values + [float(treedef.num_leaves)]))


if __name__ == '__main__':
  main()
