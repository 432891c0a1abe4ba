import json

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax
import flax


def loss_fn(params, x, y):
  return jnp.mean((nn.Dense(2).apply({'params': params}, x) - y) ** 2)


@jax.jit
def train_step(params, opt_state, x, y):
  loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
  updates, opt_state = TX.update(grads, opt_state, params)
  return optax.apply_updates(params, updates), opt_state, loss


TX = optax.sgd(0.1, momentum=0.9)


def main():
  x = jax.random.normal(jax.random.PRNGKey(1), (8, 3))
  y = jax.random.normal(jax.random.PRNGKey(2), (8, 2))
  # Already optax; init's FrozenDict (flax.optim's import set flax_return_frozendict) unfrozen.
  params = flax.core.unfreeze(nn.Dense(2).init(jax.random.PRNGKey(0), x))['params']
  opt_state = TX.init(params)
  losses = []
  for _ in range(10):
    params, opt_state, loss = train_step(params, opt_state, x, y)
    losses.append(float(loss))
  print(json.dumps(losses + [float(v) for v in jax.tree_util.tree_leaves(params)
                             for v in jnp.ravel(v)]))


if __name__ == '__main__':
  main()
