import json
import os
import tempfile

import jax
import jax.numpy as jnp
from flax.training import train_state, checkpoints
import flax
import optax

# Checkpoints as the legacy program wrote them (flax.optim imported): msgpack, relative paths.
flax.config.update('flax_use_orbax_checkpointing', False)


def loss_fn(params):
  return jnp.sum((params['w'] - 1.0) ** 2)


def main():
  cwd = os.getcwd()
  os.chdir(tempfile.mkdtemp())   # the relative folder 'ckpt' below is this run's own
  optimizer = train_state.TrainState.create(apply_fn=None, params={'w': jnp.zeros(3)}, tx=optax.adam(learning_rate=0.1, b1=0.9, b2=0.999, eps=1e-08))
  losses = []
  for step in range(10):
    loss, grads = jax.value_and_grad(loss_fn)(optimizer.params)
    optimizer = optimizer.apply_gradients(grads=grads)
    losses.append(float(loss))
    if step == 4:
      checkpoints.save_checkpoint('ckpt', optimizer, step)
      optimizer = checkpoints.restore_checkpoint('ckpt', optimizer)
  # One msgpack file per step, as flax.optim's programs wrote them.
  files = sorted(os.listdir('ckpt'))
  assert files == ['checkpoint_4'] and os.path.isfile(os.path.join('ckpt', files[0])), files
  os.chdir(cwd)
  print(json.dumps(losses + [float(x) for x in optimizer.params['w']]))


if __name__ == '__main__':
  main()
