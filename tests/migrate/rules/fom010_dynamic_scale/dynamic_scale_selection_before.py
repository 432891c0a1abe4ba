import functools
import json

import jax
import jax.numpy as jnp
import flax
from flax import optim
from flax.optim import dynamic_scale as dynamic_scale_lib


def loss_fn(params):
  return jnp.sum((params['w'] - 1.0) ** 2) + jnp.sum(params['b'] ** 2)


@jax.jit
def train_step(optimizer, dynamic_scale):
  grad_fn = dynamic_scale.value_and_grad(loss_fn)
  dynamic_scale, is_fin, loss, grads = grad_fn(optimizer.target)
  new_optimizer = optimizer.apply_gradient(grads)
  # Keep the old optimizer where the gradients were not finite (flax's imagenet example).
  new_optimizer = jax.tree_util.tree_map(
      functools.partial(jnp.where, is_fin), new_optimizer, optimizer)
  return new_optimizer, dynamic_scale, loss


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
  optimizer = optim.Adam(learning_rate=0.05).create(params)
  assert isinstance(optimizer, flax.optim.base.Optimizer)
  dynamic_scale = dynamic_scale_lib.DynamicScale(growth_interval=5)
  losses = []
  for _ in range(20):
    optimizer, dynamic_scale, loss = train_step(optimizer, dynamic_scale)
    losses.append(float(loss))
  final = jax.tree_util.tree_leaves(optimizer.target)
  del optimizer, params
  print(json.dumps(losses + [float(dynamic_scale.scale)] + [float(x) for x in final[0]]))


if __name__ == '__main__':
  main()
