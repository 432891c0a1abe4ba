import json

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import optim


class Model(nn.Module):

  @nn.compact
  def __call__(self, x, train):
    x = nn.Dense(4)(x)
    x = nn.BatchNorm(use_running_average=not train)(x)
    return nn.Dense(2)(nn.relu(x))


def model_size(params):
  """fitvid's print_model_size: the sizes' tree, read through the FrozenDict's _dict."""
  sizes = jax.tree_util.tree_map(lambda x: x.size, params)
  return {layer: sum(jax.tree_util.tree_leaves(entries))
          for layer, entries in sorted(sizes._dict.items())}


@jax.jit
def train_step(optimizer, model_state, x, y):
  def loss_fn(params):
    out, new_state = Model().apply({'params': params, **model_state}, x, train=True,
                                   mutable=['batch_stats'])
    return jnp.mean((out - y) ** 2), new_state
  (loss, new_state), grads = jax.value_and_grad(loss_fn, has_aux=True)(optimizer.target)
  return optimizer.apply_gradient(grads), new_state, loss


def main():
  x = jax.random.normal(jax.random.PRNGKey(1), (8, 3))
  y = jax.random.normal(jax.random.PRNGKey(2), (8, 2))
  variables = Model().init(jax.random.PRNGKey(0), x, train=False)
  model_state, params = variables.pop('params')
  sizes = model_size(params)
  optimizer = optim.Adam(learning_rate=0.05).create(params)
  losses = []
  for _ in range(10):
    optimizer, model_state, loss = train_step(optimizer, model_state, x, y)
    losses.append(float(loss))
  print(json.dumps([float(v) for _, v in sorted(sizes.items())] + losses
                   + [float(v) for v in jax.tree_util.tree_leaves(optimizer.target)
                      for v in jnp.ravel(v)]))


if __name__ == '__main__':
  main()
