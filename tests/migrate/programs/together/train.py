"""Two optimizers that meet in one training function, one of them kept in a
``collections.deque`` (a value the analysis cannot follow); a third, in ``pretrain``, never
meets them."""
import collections
import json

import jax
import jax.numpy as jnp
from flax import optim


def loss_fn(params):
  return jnp.sum((params['w'] - 1.0) ** 2)


def pretrain():
  optimizer = optim.Adam(learning_rate=0.1).create({'w': jnp.zeros(2)})
  for _ in range(3):
    optimizer = optimizer.apply_gradient(jax.grad(loss_fn)(optimizer.target))
  return optimizer.target


def train(params):
  actor = optim.Adam(learning_rate=0.1).create(params)
  critic = optim.Momentum(learning_rate=0.1).create(params)
  history = collections.deque([critic], maxlen=2)
  for _ in range(3):
    actor = actor.apply_gradient(jax.grad(loss_fn)(actor.target))
    critic = critic.apply_gradient(jax.grad(loss_fn)(critic.target))
    history.append(critic)
  return actor.target, len(history)


if __name__ == '__main__':
  params, n = train(pretrain())
  print(json.dumps([float(v) for v in params['w']] + [n]))
