import json

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax.training import train_state


def loss_fn(codes, x):
  return jnp.mean((x @ codes['w'] + codes['b']) ** 2)


def main():
  # nianticlabs/nerf-object-removal's latent codes: a new target put in with the optimizer's
  # own state passed back (Adam's moments and step kept), then trained on.
  rng = np.random.RandomState(0)
  x = jnp.asarray(rng.randn(8, 3), jnp.float32)
  codes = {'w': jnp.asarray(rng.randn(3, 2), jnp.float32), 'b': jnp.zeros(2)}
  optimizer = train_state.TrainState.create(apply_fn=None, params=codes, tx=optax.adam(learning_rate=0.05, b1=0.9, b2=0.999, eps=1e-08))
  losses = []
  for step in range(12):
    loss, grads = jax.value_and_grad(loss_fn)(optimizer.params, x)
    optimizer = optimizer.apply_gradients(grads=grads)
    losses.append(float(loss))
    if step == 5:
      new_codes = jax.tree_util.tree_map(lambda v: 0.5 * v + 0.1, optimizer.params)
      optimizer_ = optimizer
      optimizer = optimizer_.replace(params=jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(optimizer_.params), jax.tree_util.tree_leaves(new_codes)))
  params = [float(v) for leaf in jax.tree_util.tree_leaves(optimizer.params)
            for v in np.ravel(leaf)]
  print(json.dumps(losses + params))


if __name__ == '__main__':
  main()
