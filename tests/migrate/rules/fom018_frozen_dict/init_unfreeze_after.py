import json

import flax.linen as nn
import jax
import jax.numpy as jnp
import flax
import optax
from flax.training import train_state


def merge_params(variables, extra):
  """flaxmodels' shape: init's FrozenDict unfrozen, edited, handed on."""
  params = flax.core.unfreeze(variables)['params']
  params['bias'] = params['bias'] + extra
  return params


def loss_fn(params, x, y):
  return jnp.mean((nn.Dense(2).apply({'params': params}, x) - y) ** 2)


@jax.jit
def train_step(optimizer, x, y):
  loss, grads = jax.value_and_grad(loss_fn)(optimizer.params, x, y)
  return optimizer.apply_gradients(grads=grads), loss


def main():
  x = jax.random.normal(jax.random.PRNGKey(1), (8, 3))
  y = jax.random.normal(jax.random.PRNGKey(2), (8, 2))
  variables = nn.Dense(2).init(jax.random.PRNGKey(0), x)
  optimizer = train_state.TrainState.create(apply_fn=None, params=merge_params(variables, 0.5), tx=optax.adam(learning_rate=0.05, b1=0.9, b2=0.999, eps=1e-08))
  losses = []
  for _ in range(10):
    optimizer, loss = train_step(optimizer, x, y)
    losses.append(float(loss))
  print(json.dumps(losses + [float(v) for v in jax.tree_util.tree_leaves(optimizer.params)
                             for v in jnp.ravel(v)]))


if __name__ == '__main__':
  main()
