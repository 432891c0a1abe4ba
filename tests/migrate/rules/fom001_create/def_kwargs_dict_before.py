import json

import jax
import jax.numpy as jnp
from flax import optim

ADAM_KWARGS = {
    'beta1': 0.8,
    'beta2': 0.95,
    'eps': 1e-6,
}


def loss_fn(params):
  return jnp.sum((params['w'] - 1.0) ** 2) + jnp.sum(params['b'] ** 2)


@jax.jit
def train_step(optimizer, lr):
  loss, grads = jax.value_and_grad(loss_fn)(optimizer.target)
  optimizer = optimizer.apply_gradient(grads, learning_rate=lr)
  return optimizer, loss


@jax.jit
def momentum_step(optimizer):
  loss, grads = jax.value_and_grad(loss_fn)(optimizer.target)
  return optimizer.apply_gradient(grads), loss


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
  optimizer = optim.Adam(**ADAM_KWARGS).create(params)
  base = 0.05
  momentum_kwargs = dict(learning_rate=base * 2, beta=0.8, nesterov=True)
  other = optim.Momentum(**momentum_kwargs).create(params)
  losses = []
  for step in range(20):
    optimizer, loss = train_step(optimizer, 0.1 / (1 + step))
    other, other_loss = momentum_step(other)
    losses.extend([float(loss), float(other_loss)])
  print(json.dumps(losses))


if __name__ == '__main__':
  main()
