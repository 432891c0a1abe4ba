import json

import flax.linen as nn
import jax
import jax.numpy as jnp
import flax
import optax
from flax.training import train_state


class Net(nn.Module):

  @nn.compact
  def __call__(self, x, train):
    x = nn.Dense(4)(x)
    x = nn.BatchNorm(use_running_average=not train, momentum=0.9)(x)
    return nn.Dense(2)(nn.relu(x))


def initialized(key, x):
  """flax 0.3's imagenet: init's FrozenDict split into the model state and the params."""
  variables = Net().init(key, x, train=False)
  model_state, params = flax.core.pop(variables, 'params')
  return params, model_state


def loss_fn(params, model_state, x, y):
  out, new_state = Net().apply({'params': params, **model_state}, x, train=True,
                               mutable=['batch_stats'])
  return jnp.mean((out - y) ** 2), new_state


@jax.jit
def train_step(optimizer, model_state, x, y):
  (loss, new_state), grads = jax.value_and_grad(loss_fn, has_aux=True)(
      optimizer.params, model_state, x, y)
  # flax 0.3's imagenet: the batch statistics put back with the FrozenDict's copy.
  model_state = flax.core.copy(model_state, {'batch_stats': new_state['batch_stats']})
  return optimizer.apply_gradients(grads=grads), model_state, loss


def main():
  x = jax.random.normal(jax.random.PRNGKey(1), (8, 3))
  y = jax.random.normal(jax.random.PRNGKey(2), (8, 2))
  params, model_state = initialized(jax.random.PRNGKey(0), x)
  optimizer = train_state.TrainState.create(apply_fn=None, params=params, tx=optax.sgd(learning_rate=0.05, momentum=0.9, nesterov=False))
  losses = []
  for _ in range(10):
    optimizer, model_state, loss = train_step(optimizer, model_state, x, y)
    losses.append(float(loss))
  print(json.dumps(losses + [float(v) for v in jax.tree_util.tree_leaves(
      (optimizer.params, model_state)) for v in jnp.ravel(v)]))


if __name__ == '__main__':
  main()
