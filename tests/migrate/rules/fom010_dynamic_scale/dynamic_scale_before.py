import json

import jax
import jax.numpy as jnp
from flax import optim


def loss_fn(params):
  return jnp.sum((params['w'] - 1.0) ** 2) + jnp.sum(params['b'] ** 2)


@jax.jit
def train_step(optimizer, dynamic_scale):
  grad_fn = dynamic_scale.value_and_grad(loss_fn)
  dynamic_scale, is_finite, loss, grads = grad_fn(optimizer.target)
  new_optimizer = optimizer.apply_gradient(grads)
  optimizer = jax.tree_util.tree_map(
      lambda new, old: jnp.where(is_finite, new, old), new_optimizer, optimizer)
  return optimizer, dynamic_scale, loss


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
  optimizer = optim.Momentum(learning_rate=0.05, beta=0.9).create(params)
  dynamic_scale = optim.DynamicScale(growth_interval=5)
  losses = []
  for _ in range(20):
    optimizer, dynamic_scale, loss = train_step(optimizer, dynamic_scale)
    losses.append(float(loss))
  print(json.dumps(losses + [float(dynamic_scale.scale)]))


if __name__ == '__main__':
  main()
