import json
import os
import tempfile

import flax
import jax
import jax.numpy as jnp
from flax import optim
from flax.training import checkpoints


@flax.struct.dataclass
class TrainState:
  step: int
  optimizer: optim.Optimizer


def loss_fn(params):
  return jnp.sum((params['w'] - 1.0) ** 2)


def main():
  workdir = tempfile.mkdtemp()
  optimizer = optim.Adam(learning_rate=0.1).create({'w': jnp.zeros(3)})
  losses = []
  for step in range(5):
    loss, grads = jax.value_and_grad(loss_fn)(optimizer.target)
    optimizer = optimizer.apply_gradient(grads)
    losses.append(float(loss))
  checkpoints.save_checkpoint(workdir, TrainState(step=5, optimizer=optimizer), 5)
  # ai-weather-climate's get_params: the checkpoint read back raw, by its keys
  raw = checkpoints.restore_checkpoint(workdir, target=None)
  params = raw['optimizer']['target']
  step = raw['optimizer']['state']['step']
  assert os.listdir(workdir) == ['checkpoint_5']
  print(json.dumps(losses + [float(x) for x in params['w']] + [int(step)]))


if __name__ == '__main__':
  main()
