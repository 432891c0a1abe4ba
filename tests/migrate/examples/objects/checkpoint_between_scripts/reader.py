"""Restores what ``writer`` saved into optimizers of its own, whose learning rate no step sets
(ElecFF's ``train_elecff.py``): one from the checkpoint, trained on at its def's rate; one from
the pickled state dict, read."""
import os
import pickle

import flax
import jax
import jax.numpy as jnp
from flax import optim
from flax.training import checkpoints

import writer


def fresh():
  return {'w': jnp.zeros((3, 1)), 'b': jnp.zeros((1,))}


def resume(workdir, x, y):
  optimizer = optim.Adam(learning_rate=0.05).create(fresh())
  optimizer = checkpoints.restore_checkpoint(workdir, optimizer)
  losses = []
  for _ in range(3):
    loss, grad = jax.value_and_grad(writer.loss_fn)(optimizer.target, x, y)
    optimizer = optimizer.apply_gradient(grad)
    losses.append(float(loss))
  return losses, int(optimizer.state.step), optimizer.target


def read(workdir):
  optimizer = optim.Adam(learning_rate=0.05).create(fresh())
  with open(os.path.join(workdir, 'state.pickle'), 'rb') as f:
    optimizer = flax.serialization.from_state_dict(optimizer, pickle.load(f))
  return optimizer.target
