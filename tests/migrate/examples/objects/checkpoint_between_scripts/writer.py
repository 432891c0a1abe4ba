"""Trains with a learning rate set per step, then saves the optimizer twice: a flax checkpoint
and a pickled state dict (RonghongJi/ElecFF's ``param_elecff.py``)."""
import os
import pickle

import flax
import jax
import jax.numpy as jnp
from flax import optim
from flax.training import checkpoints


def loss_fn(params, x, y):
  return jnp.mean((x @ params['w'] + params['b'] - y) ** 2)


@jax.jit
def step(optimizer, x, y, lr):
  loss, grad = jax.value_and_grad(loss_fn)(optimizer.target, x, y)
  return optimizer.apply_gradient(grad, learning_rate=lr), loss


def train(workdir, x, y):
  optimizer = optim.Adam(learning_rate=1.).create({'w': jnp.full((3, 1), 0.3),
                                                    'b': jnp.zeros((1,))})
  losses = []
  for i in range(4):
    optimizer, loss = step(optimizer, x, y, 0.1 / (i + 1))
    losses.append(float(loss))
  checkpoints.save_checkpoint(workdir, optimizer, 4)
  with open(os.path.join(workdir, 'state.pickle'), 'wb') as f:
    pickle.dump(flax.serialization.to_state_dict(optimizer), f)
  return losses
