import json

import jax
import jax.numpy as jnp
import optax
from flax.training import dynamic_scale as dynamic_scale_lib, train_state


def loss_fn(params):
  return jnp.sum((params['w'] - 1.0) ** 2) + jnp.sum(params['b'] ** 2)


@jax.jit
def train_step(optimizer, dynamic_scale):
  grad_fn = dynamic_scale.value_and_grad(loss_fn)
  dynamic_scale, is_finite, loss, grads = grad_fn(optimizer.params)
  new_optimizer = optimizer.apply_gradients(grads=grads)
  optimizer = jax.tree_util.tree_map(
      lambda new, old: jnp.where(is_finite, new, old), new_optimizer, optimizer)
  return optimizer, dynamic_scale, loss


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
  optimizer = train_state.TrainState.create(apply_fn=None, params=params, tx=optax.sgd(learning_rate=0.05, momentum=0.9, nesterov=False))
  dynamic_scale = dynamic_scale_lib.DynamicScale(growth_interval=5)
  losses = []
  for _ in range(20):
    optimizer, dynamic_scale, loss = train_step(optimizer, dynamic_scale)
    losses.append(float(loss))
  print(json.dumps(losses + [float(dynamic_scale.scale)]))


if __name__ == '__main__':
  main()
