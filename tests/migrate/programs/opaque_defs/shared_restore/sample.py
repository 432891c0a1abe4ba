import jax.numpy as jnp
from flax import optim

import train


def sample(params):
  optimizer = optim.Adam(learning_rate=0.1).create(params)  # a template to restore into
  _, params = train.restore_checkpoint(optimizer, params)
  return params
