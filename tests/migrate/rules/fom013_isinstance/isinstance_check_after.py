import json

import jax
import jax.numpy as jnp
import optax
from flax.training import train_state


def loss_fn(params):
  return jnp.sum((params['w'] - 1.0) ** 2)


def step(optimizer_or_params, grads):
  if isinstance(optimizer_or_params, train_state.TrainState):
    return optimizer_or_params.apply_gradients(grads=grads)
  return jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, optimizer_or_params, grads)


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0])}
  optimizer = train_state.TrainState.create(apply_fn=None, params=params, tx=optax.sgd(learning_rate=0.1, momentum=0.9, nesterov=False))
  losses = []
  for _ in range(10):
    loss, grads = jax.value_and_grad(loss_fn)(optimizer.params)
    optimizer = step(optimizer, grads)
    losses.append(float(loss))
  print(json.dumps(losses + [float(x) for x in optimizer.params['w']]))


if __name__ == '__main__':
  main()
