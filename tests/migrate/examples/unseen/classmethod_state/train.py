"""aqt's jax_legacy WMT trainer (2021): the training state is a dataclass made by a
``@classmethod`` that creates and replicates the optimizer and returns ``cls(optimizer=...)``;
the pmapped step (over every local device) reads ``state.optimizer`` and applies the gradient
with a learning rate per step."""
import dataclasses
import functools
import json
from typing import Any

import jax
import jax.numpy as jnp
from flax import jax_utils
from flax import optim


@dataclasses.dataclass
class TrainingState:
  optimizer: Any
  step: int

  @classmethod
  def initialize(cls, params):
    optimizer = optim.Adam(learning_rate=1e-2, beta1=0.8).create(params)
    optimizer = optimizer.replicate()
    return cls(optimizer=optimizer, step=0)


def train_step(optimizer, batch, lr):
  def loss_fn(params):
    return jnp.mean((batch['x'] @ params['w'] + params['b'] - batch['y']) ** 2)
  loss, grad = jax.value_and_grad(loss_fn)(optimizer.target)
  grad = jax.lax.pmean(grad, 'batch')
  return optimizer.apply_gradient(grad, learning_rate=lr), loss


p_train_step = jax.pmap(functools.partial(train_step), axis_name='batch')


def main():
  params = {'w': jnp.full((3, 2), 0.3), 'b': jnp.zeros(2)}
  state = TrainingState.initialize(params)
  n = jax.local_device_count()
  x = jax.random.normal(jax.random.PRNGKey(1), (n, 8, 3))
  batch = {'x': x, 'y': jnp.tanh(x[..., :2])}
  losses = []
  for i in range(6):
    lr = jnp.full((n,), 1e-2 / (1 + i))
    optimizer, loss = p_train_step(state.optimizer, batch, lr)
    state = dataclasses.replace(state, optimizer=optimizer, step=state.step + 1)
    losses.append(float(loss[0]))
  final = jax_utils.unreplicate(state.optimizer)
  print(json.dumps(losses + [float(v) for v in jax.tree_util.tree_leaves(final.target)
                             for v in jnp.ravel(v)]))


if __name__ == '__main__':
  main()
