"""The imagenet-example idiom of flax 0.4: a train-state dataclass holding the optimizer beside
the model state (BatchNorm statistics), saved and restored with `flax.training.checkpoints`.

Usage: python train_state_checkpoint.py WORKDIR NUM_STEPS
Restores the latest checkpoint in WORKDIR if there is one, trains up to NUM_STEPS (one batch per
step, drawn from the step number), saves a checkpoint at NUM_STEPS. Prints the starting step,
then (last line) a JSON list: the losses of the steps run here, then every final parameter and
every BatchNorm statistic.
"""
import json
import sys
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import linen as nn
from flax import optim
from flax import struct
from flax.training import checkpoints


class Model(nn.Module):

  @nn.compact
  def __call__(self, x, train):
    x = nn.Dense(8, use_bias=False)(x)  # BatchNorm removes any bias
    x = nn.BatchNorm(use_running_average=not train, momentum=0.8)(x)
    x = nn.relu(x)
    return nn.Dense(1)(x)


@struct.dataclass
class TrainState:
  step: int
  optimizer: optim.Optimizer
  model_state: Any


def get_batch(step):
  rng = np.random.RandomState(200 + step)
  x = rng.normal(size=(16, 3)).astype(np.float32)
  y = x[:, :1] * x[:, 1:2] + np.abs(x[:, 2:3])
  return {'x': x, 'y': y.astype(np.float32)}


def create_train_state(rng):
  variables = Model().init(rng, jnp.ones((2, 3), jnp.float32), train=False)
  # Fixed values drawn by numpy (as from a pretrained checkpoint).
  np_rng = np.random.RandomState(0)
  params = jax.tree_util.tree_map(
      lambda p: jnp.asarray(np_rng.normal(scale=0.4, size=p.shape), jnp.float32),
      variables['params'])
  model_state = {k: v for k, v in variables.items() if k != 'params'}
  optimizer = optim.Adam(learning_rate=0.01, beta2=0.99).create(params)
  return TrainState(step=0, optimizer=optimizer, model_state=model_state)


@jax.jit
def train_step(state, batch):

  def loss_fn(params):
    preds, new_model_state = Model().apply({'params': params, **state.model_state}, batch['x'],
                                           train=True, mutable=['batch_stats'])
    return jnp.mean((preds - batch['y']) ** 2), new_model_state

  (loss, new_model_state), grads = jax.value_and_grad(loss_fn, has_aux=True)(
      state.optimizer.target)
  new_optimizer = state.optimizer.apply_gradient(grads)
  new_state = state.replace(step=state.step + 1, optimizer=new_optimizer,
                            model_state=dict(new_model_state))
  return new_state, loss


def main():
  workdir, num_steps = sys.argv[1], int(sys.argv[2])
  state = create_train_state(jax.random.PRNGKey(5))
  state = checkpoints.restore_checkpoint(workdir, state)
  start = int(state.step)
  print('starting at step', start)
  losses = []
  for step in range(start, num_steps):
    state, loss = train_step(state, get_batch(step))
    losses.append(float(loss))
  if num_steps > start:
    checkpoints.save_checkpoint(workdir, state, num_steps, keep=3)
  leaves = (jax.tree_util.tree_leaves(state.optimizer.target) +
            jax.tree_util.tree_leaves(state.model_state))
  print(json.dumps(losses + [float(v) for leaf in leaves for v in np.ravel(leaf)]))


if __name__ == '__main__':
  main()
