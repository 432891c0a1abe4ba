import json
import os
import tempfile

import flax
import jax
import jax.numpy as jnp
from flax.training import train_state, checkpoints
import optax

# Checkpoints as the legacy program wrote them (flax.optim imported): msgpack, relative paths.
flax.config.update('flax_use_orbax_checkpointing', False)


@flax.struct.dataclass
class TrainState:
  step: int
  optimizer: train_state.TrainState


def loss_fn(params):
  return jnp.sum((params['w'] - 1.0) ** 2)


def main():
  workdir = tempfile.mkdtemp()
  optimizer = train_state.TrainState.create(apply_fn=None, params={'w': jnp.zeros(3)}, tx=optax.adam(learning_rate=0.1, b1=0.9, b2=0.999, eps=1e-08))
  losses = []
  for step in range(5):
    loss, grads = jax.value_and_grad(loss_fn)(optimizer.params)
    optimizer = optimizer.apply_gradients(grads=grads)
    losses.append(float(loss))
  checkpoints.save_checkpoint(workdir, TrainState(step=5, optimizer=optimizer), 5)
  # ai-weather-climate's get_params: the checkpoint read back raw, by its keys
  raw = checkpoints.restore_checkpoint(workdir, target=None)
  params = raw['optimizer']['params']
  step = raw['optimizer']['step']
  assert os.listdir(workdir) == ['checkpoint_5']
  print(json.dumps(losses + [float(x) for x in params['w']] + [int(step)]))


if __name__ == '__main__':
  main()
