import json

import jax
import jax.numpy as jnp
import numpy as np
from flax import optim


def loss_fn(codes, x):
  return jnp.mean((x @ codes['w'] + codes['b']) ** 2)


def main():
  # nianticlabs/nerf-object-removal's latent codes: a new target put in with the optimizer's
  # own state passed back (Adam's moments and step kept), then trained on.
  rng = np.random.RandomState(0)
  x = jnp.asarray(rng.randn(8, 3), jnp.float32)
  codes = {'w': jnp.asarray(rng.randn(3, 2), jnp.float32), 'b': jnp.zeros(2)}
  optimizer = optim.Adam(learning_rate=0.05).create(codes)
  losses = []
  for step in range(12):
    loss, grads = jax.value_and_grad(loss_fn)(optimizer.target, x)
    optimizer = optimizer.apply_gradient(grads)
    losses.append(float(loss))
    if step == 5:
      new_codes = jax.tree_util.tree_map(lambda v: 0.5 * v + 0.1, optimizer.target)
      optimizer_ = optimizer
      optimizer = optimizer_.replace(target=new_codes, state=optimizer_.state)
  params = [float(v) for leaf in jax.tree_util.tree_leaves(optimizer.target)
            for v in np.ravel(leaf)]
  print(json.dumps(losses + params))


if __name__ == '__main__':
  main()
