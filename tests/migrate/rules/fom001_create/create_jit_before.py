import json

import jax
import jax.numpy as jnp
from flax import optim


def loss_fn(params):
  return jnp.sum((params['w'] - 1.0) ** 2) + jnp.sum(params['b'] ** 2)


@jax.jit
def train_step(optimizer):
  loss, grads = jax.value_and_grad(loss_fn)(optimizer.target)
  return optimizer.apply_gradient(grads), loss


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
  opt_def = optim.Adam(learning_rate=0.1, beta1=0.8)
  optimizer = jax.jit(opt_def.create)(params)
  trajectory = [float(optimizer.state.step)] + [float(x) for x in optimizer.target['w']]
  for _ in range(20):
    optimizer, loss = train_step(optimizer)
    trajectory.append(float(loss))
  trajectory += [float(optimizer.state.step)] + [float(x) for x in optimizer.target['w']]
  print(json.dumps(trajectory))


if __name__ == '__main__':
  main()
