import json

import jax
import jax.numpy as jnp
import optax
from flax.training import train_state


def loss_fn(params):
  return jnp.sum((params['w'] - 1.0) ** 2) + jnp.sum(params['b'] ** 2)


def learning_rate_fn(step):
  return 0.1 * jnp.minimum(1.0, step / 5.0)


@jax.jit
def train_step(optimizer):
  loss, grads = jax.value_and_grad(loss_fn)(optimizer.params)
  optimizer = optimizer.apply_gradients(grads=grads)
  return optimizer, loss


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
  optimizer = train_state.TrainState.create(apply_fn=None, params=params, tx=optax.adam(learning_rate=lambda count: learning_rate_fn(count + 1), b1=0.9, b2=0.999, eps=1e-08))
  losses = []
  for _ in range(20):
    optimizer, loss = train_step(optimizer)
    losses.append(float(loss))
  print(json.dumps(losses))


if __name__ == '__main__':
  main()
