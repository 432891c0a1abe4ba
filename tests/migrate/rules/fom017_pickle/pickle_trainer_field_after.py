import json
import os
import pickle
import tempfile

import jax
import jax.numpy as jnp
import flax
import optax
from flax.training import train_state


def loss_fn(params):
  return jnp.sum((params['w'] - jnp.array([1.0, -2.0, 0.5])) ** 2)


@jax.jit
def train_step(optimizer):
  loss, grads = jax.value_and_grad(loss_fn)(optimizer.params)
  return optimizer.apply_gradients(grads=grads), loss


class Trainer:
  """An optimizer kept in a field, saved and loaded by the class's own methods."""

  def __init__(self):
    self.optimizer = train_state.TrainState.create(apply_fn=None, params={'w': jnp.zeros(3)}, tx=optax.adam(learning_rate=0.1, b1=0.9, b2=0.999, eps=1e-08))
    self.losses = []

  def train(self, steps):
    for _ in range(steps):
      self.optimizer, loss = train_step(self.optimizer)
      self.losses.append(float(loss))

  def save(self, path):
    with open(path, 'wb') as f:
      pickle.dump(flax.serialization.to_state_dict(self.optimizer), f)

  def load(self, path):
    with open(path, 'rb') as f:
      self.optimizer = flax.serialization.from_state_dict(self.optimizer, pickle.load(f))


def main():
  path = os.path.join(tempfile.mkdtemp(), 'trainer.pkl')
  trainer = Trainer()
  trainer.train(6)
  trainer.save(path)
  trainer.train(3)
  trainer.load(path)   # back to step 6, trained on
  trainer.train(5)
  print(json.dumps(trainer.losses + [float(v) for v in trainer.optimizer.params['w']]))


if __name__ == '__main__':
  main()
