import json
import pickle

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


def train(optimizer, steps):
  losses = []
  for _ in range(steps):
    optimizer, loss = train_step(optimizer)
    losses.append(float(loss))
  return optimizer, losses


def main():
  optimizer = train_state.TrainState.create(apply_fn=None, params={'w': jnp.zeros(3)}, tx=optax.sgd(learning_rate=0.1, momentum=0.9, nesterov=False))
  optimizer, losses = train(optimizer, 8)
  blob = pickle.dumps(flax.serialization.to_state_dict(optimizer))
  optimizer, more = train(optimizer, 4)   # trained on, then back to the pickled state
  optimizer = flax.serialization.from_state_dict(optimizer, pickle.loads(blob))
  optimizer, again = train(optimizer, 4)
  assert more == again, (more, again)
  print(json.dumps(losses + again + [float(v) for v in optimizer.params['w']]))


if __name__ == '__main__':
  main()
