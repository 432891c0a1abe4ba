import json

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax.training import dynamic_scale as dynamic_scale_lib
import flax


def merge_params(variables, extra):
  """flaxmodels' GAN: its only flax.optim use is DynamicScale, and init's value is unfrozen."""
  params = flax.core.unfreeze(variables)['params']
  params['bias'] = params['bias'] + extra
  return params


def loss_fn(params, x, y):
  return jnp.mean((nn.Dense(2).apply({'params': params}, x) - y) ** 2)


@jax.jit
def train_step(params, dynamic_scale, x, y):
  grad_fn = dynamic_scale.value_and_grad(loss_fn)
  dynamic_scale, is_finite, loss, grads = grad_fn(params, x, y)
  params = jax.tree_util.tree_map(lambda p, g: p - 0.05 * g, params, grads)
  return params, dynamic_scale, loss, is_finite


def main():
  x = jax.random.normal(jax.random.PRNGKey(1), (8, 3))
  y = jax.random.normal(jax.random.PRNGKey(2), (8, 2))
  variables = nn.Dense(2).init(jax.random.PRNGKey(0), x)
  params = merge_params(variables, 0.5)
  dynamic_scale = dynamic_scale_lib.DynamicScale()
  values = []
  for _ in range(10):
    params, dynamic_scale, loss, is_finite = train_step(params, dynamic_scale, x, y)
    values += [float(loss), float(is_finite), float(dynamic_scale.scale)]
  print(json.dumps(values + [float(v) for v in jax.tree_util.tree_leaves(params)
                             for v in jnp.ravel(v)]))


if __name__ == '__main__':
  main()
