"""A training script in the flax 0.3-0.5 idiom (the `flax.optim` era), kept as such.

It is what tests/test_legacy_script_e2e.py runs, unchanged, in a fresh interpreter: it only
says `from flax import optim`, exactly like the old code our users run. Do not modernise it
(no optax, no TrainState, no flax_optim_compat import): that is the point.

Usage: python train_mlp_legacy.py WORKDIR NUM_STEPS
Trains a small linen MLP on a fixed regression problem, resuming from the latest checkpoint in
WORKDIR if there is one: steps [0, 10) under `jax.jit`, [10, 20) under `jax.pmap` with the
optimizer replicated by `jax_utils.replicate` and gradients averaged by `lax.pmean`, and from 20
on under `jax.pmap` with `optimizer.replicate()` (legacy ReplicatedOptimizer). A checkpoint is
saved at NUM_STEPS (unless there was nothing to do); WORKDIR/metrics.json gets the losses.
"""
import argparse
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
from flax import jax_utils
from flax import linen as nn
from flax import optim
from flax.training import checkpoints
from flax.training import common_utils

JIT_STEPS = 10
PMEAN_STEPS = 20
BATCH = 256


class MLP(nn.Module):
  """Two dense layers."""
  hidden: int = 32

  @nn.compact
  def __call__(self, x):
    x = nn.Dense(self.hidden)(x)
    x = nn.tanh(x)
    x = nn.Dense(1)(x)
    return x


def get_data():
  rng = np.random.RandomState(0)
  x = rng.uniform(-1.0, 1.0, size=(BATCH, 4)).astype(np.float32)
  y = (np.sin(2.0 * x[:, :1]) + x[:, 1:2] * x[:, 2:3] - 0.5 * x[:, 3:]).astype(np.float32)
  return {'x': x, 'y': y}


def learning_rate_fn(step):
  """Linear warm-up over 5 steps, then constant 0.1 (legacy per-step override)."""
  return 0.1 * jnp.minimum(1.0, (step + 1) / 5.0)


def create_optimizer(rng, learning_rate=0.1, beta=0.9):
  params = MLP().init(rng, jnp.ones((1, 4), jnp.float32))['params']
  optimizer_def = optim.Momentum(learning_rate=learning_rate, beta=beta)
  optimizer = optimizer_def.create(params)
  return optimizer


def loss_fn(params, batch):
  preds = MLP().apply({'params': params}, batch['x'])
  return jnp.mean((preds - batch['y']) ** 2)


@jax.jit
def train_step(optimizer, batch):
  step = optimizer.state.step
  loss, grad = jax.value_and_grad(loss_fn)(optimizer.target, batch)
  optimizer = optimizer.apply_gradient(grad, learning_rate=learning_rate_fn(step))
  return optimizer, loss


def train_step_pmean(optimizer, batch):
  step = optimizer.state.step
  loss, grad = jax.value_and_grad(loss_fn)(optimizer.target, batch)
  grad = jax.lax.pmean(grad, axis_name='batch')
  loss = jax.lax.pmean(loss, axis_name='batch')
  optimizer = optimizer.apply_gradient(grad, learning_rate=learning_rate_fn(step))
  return optimizer, loss


def train_step_replicated(optimizer, batch):
  # optimizer.replicate() averages the gradients itself (ReplicatedOptimizer).
  step = optimizer.state.step
  loss, grad = jax.value_and_grad(loss_fn)(optimizer.target, batch)
  loss = jax.lax.pmean(loss, axis_name='batch')
  optimizer = optimizer.apply_gradient(grad, learning_rate=learning_rate_fn(step))
  return optimizer, loss


p_train_step_pmean = jax.pmap(train_step_pmean, axis_name='batch')
p_train_step_replicated = jax.pmap(train_step_replicated, axis_name='batch')


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument('workdir')
  parser.add_argument('num_steps', type=int)
  args = parser.parse_args()

  batch = get_data()
  sharded_batch = common_utils.shard(batch)
  optimizer = create_optimizer(jax.random.PRNGKey(0))
  optimizer = checkpoints.restore_checkpoint(args.workdir, optimizer)
  start_step = int(optimizer.state.step)
  print(f'starting at step {start_step} on {jax.device_count()} devices')

  losses = {}
  step = start_step
  while step < min(args.num_steps, JIT_STEPS):
    optimizer, loss = train_step(optimizer, batch)
    losses[step] = float(loss)
    step += 1

  if step < args.num_steps and step < PMEAN_STEPS:
    optimizer = jax_utils.replicate(optimizer)
    while step < min(args.num_steps, PMEAN_STEPS):
      optimizer, loss = p_train_step_pmean(optimizer, sharded_batch)
      losses[step] = float(loss[0])
      step += 1
    optimizer = jax_utils.unreplicate(optimizer)

  if step < args.num_steps:
    optimizer = optimizer.replicate()
    while step < args.num_steps:
      optimizer, loss = p_train_step_replicated(optimizer, sharded_batch)
      losses[step] = float(loss[0])
      step += 1
    optimizer = optimizer.unreplicate()

  if step > start_step:
    checkpoints.save_checkpoint(args.workdir, optimizer, step, keep=2)
  metrics_path = os.path.join(args.workdir, 'metrics.json')
  metrics = {}
  if os.path.exists(metrics_path):
    with open(metrics_path) as f:
      metrics = json.load(f)
  metrics.update({str(k): v for k, v in losses.items()})
  with open(metrics_path, 'w') as f:
    json.dump(metrics, f)
  print(f'step {step}: loss {losses[step - 1]:.6f}' if losses else f'step {step}: nothing to do')


if __name__ == '__main__':
  main()
