import json

import jax
import jax.numpy as jnp
import optax
from flax.training import train_state


def loss_fn(params):
  return jnp.sum((params['w'] - 1.0) ** 2) + jnp.sum(params['b'] ** 2)


@jax.jit
def train_step(optimizer):
  loss, grads = jax.value_and_grad(loss_fn)(optimizer.params)
  return optimizer.apply_gradients(grads=grads), loss


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
  opt_def = optax.adam(learning_rate=0.1, b1=0.8, b2=0.999, eps=1e-08)
  optimizer = jax.jit(lambda params: train_state.TrainState.create(apply_fn=None, params=params, tx=opt_def))(params)
  trajectory = [float(optimizer.step)] + [float(x) for x in optimizer.params['w']]
  for _ in range(20):
    optimizer, loss = train_step(optimizer)
    trajectory.append(float(loss))
  trajectory += [float(optimizer.step)] + [float(x) for x in optimizer.params['w']]
  print(json.dumps(trajectory))


if __name__ == '__main__':
  main()
