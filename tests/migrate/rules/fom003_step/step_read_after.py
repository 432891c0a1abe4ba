import json

import jax
import jax.numpy as jnp
import optax
from flax.training import train_state


def loss_fn(params):
  return jnp.sum((params['w'] - 1.0) ** 2) + jnp.sum(params['b'] ** 2)


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
  optimizer = train_state.TrainState.create(apply_fn=None, params=params, tx=optax.sgd(learning_rate=0.1))
  trajectory = []
  while optimizer.step < 20:
    loss, grads = jax.value_and_grad(loss_fn)(optimizer.params)
    optimizer = optimizer.apply_gradients(grads=grads)
    trajectory.extend([float(loss), float(optimizer.step)])
  print(json.dumps(trajectory))


if __name__ == '__main__':
  main()
