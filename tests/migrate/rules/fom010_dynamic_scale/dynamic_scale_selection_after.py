import functools
import json

import jax
import jax.numpy as jnp
from flax.training import train_state, dynamic_scale as dynamic_scale_lib
import optax


def loss_fn(params):
  return jnp.sum((params['w'] - 1.0) ** 2) + jnp.sum(params['b'] ** 2)


@jax.jit
def train_step(optimizer, dynamic_scale):
  grad_fn = dynamic_scale.value_and_grad(loss_fn)
  dynamic_scale, is_fin, loss, grads = grad_fn(optimizer.params)
  new_optimizer = optimizer.apply_gradients(grads=grads)
  # Keep the old optimizer where the gradients were not finite (flax's imagenet example).
  new_optimizer = jax.tree_util.tree_map(
      functools.partial(jnp.where, is_fin), new_optimizer, optimizer)
  return new_optimizer, dynamic_scale, loss


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
  optimizer = train_state.TrainState.create(apply_fn=None, params=params, tx=optax.adam(learning_rate=0.05, b1=0.9, b2=0.999, eps=1e-08))
  assert isinstance(optimizer, train_state.TrainState)
  dynamic_scale = dynamic_scale_lib.DynamicScale(growth_interval=5)
  losses = []
  for _ in range(20):
    optimizer, dynamic_scale, loss = train_step(optimizer, dynamic_scale)
    losses.append(float(loss))
  final = jax.tree_util.tree_leaves(optimizer.params)
  del optimizer, params
  print(json.dumps(losses + [float(dynamic_scale.scale)] + [float(x) for x in final[0]]))


if __name__ == '__main__':
  main()
