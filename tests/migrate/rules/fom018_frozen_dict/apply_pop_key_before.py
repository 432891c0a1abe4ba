import json

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import optim


class Net(nn.Module):

  @nn.compact
  def __call__(self, x, train):
    x = nn.Dense(4)(x)
    self.sow('intermediates', 'hidden', x)
    x = nn.BatchNorm(use_running_average=not train, momentum=0.9)(x)
    return nn.Dense(2)(nn.relu(x))


def filter_key(frozen_dict, key):
  """slot-attention-video's filter_key_from_frozen_dict: a key given as a variable."""
  if key in frozen_dict:
    frozen_dict, _ = frozen_dict.pop(key)
  return frozen_dict


def loss_fn(params, model_state, x, y):
  out, mutable_vars = Net().apply({'params': params, **model_state}, x, train=True,
                                  mutable=['batch_stats', 'intermediates'])
  # apply's mutable variables, the step's sown values dropped before they are kept.
  new_state = filter_key(mutable_vars, 'intermediates')
  return jnp.mean((out - y) ** 2), new_state


@jax.jit
def train_step(optimizer, model_state, x, y):
  (loss, new_state), grads = jax.value_and_grad(loss_fn, has_aux=True)(
      optimizer.target, model_state, x, y)
  return optimizer.apply_gradient(grads), new_state, loss


def main():
  x = jax.random.normal(jax.random.PRNGKey(1), (8, 3))
  y = jax.random.normal(jax.random.PRNGKey(2), (8, 2))
  variables = Net().init(jax.random.PRNGKey(0), x, train=False)
  model_state, params = variables.pop('params')
  optimizer = optim.Adam(learning_rate=0.05).create(params)
  losses = []
  for _ in range(10):
    optimizer, model_state, loss = train_step(optimizer, model_state, x, y)
    losses.append(float(loss))
  print(json.dumps(losses + [float(v) for v in jax.tree_util.tree_leaves(
      (optimizer.target, model_state)) for v in jnp.ravel(v)]))


if __name__ == '__main__':
  main()
