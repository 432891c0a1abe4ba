import json

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import optim


def merge_params(variables, extra):
  """flaxmodels' shape: init's FrozenDict unfrozen, edited, handed on."""
  params = variables.unfreeze()['params']
  params['bias'] = params['bias'] + extra
  return params


def loss_fn(params, x, y):
  return jnp.mean((nn.Dense(2).apply({'params': params}, x) - y) ** 2)


@jax.jit
def train_step(optimizer, x, y):
  loss, grads = jax.value_and_grad(loss_fn)(optimizer.target, x, y)
  return optimizer.apply_gradient(grads), loss


def main():
  x = jax.random.normal(jax.random.PRNGKey(1), (8, 3))
  y = jax.random.normal(jax.random.PRNGKey(2), (8, 2))
  variables = nn.Dense(2).init(jax.random.PRNGKey(0), x)
  optimizer = optim.Adam(learning_rate=0.05).create(merge_params(variables, 0.5))
  losses = []
  for _ in range(10):
    optimizer, loss = train_step(optimizer, x, y)
    losses.append(float(loss))
  print(json.dumps(losses + [float(v) for v in jax.tree_util.tree_leaves(optimizer.target)
                             for v in jnp.ravel(v)]))


if __name__ == '__main__':
  main()
