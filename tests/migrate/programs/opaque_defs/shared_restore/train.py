import functools

import jax
import jax.numpy as jnp
from flax import optim

from myopt import MyOpt


def restore_checkpoint(optimizer, ema):
  # stands in for flax.training.checkpoints.restore_checkpoint(workdir, (optimizer, ema))
  return optimizer, ema


def train_step(optimizer, batch):
  grad = jax.grad(lambda p: jnp.sum((p['w'] * batch) ** 2))(optimizer.target)
  return optimizer.apply_gradient(grad)


def main(use_mine, params, batch):
  optimizer_def = (functools.partial(MyOpt, scale=2.0) if use_mine else optim.Adam)(
      learning_rate=0.1, beta1=0.9)
  optimizer = optimizer_def.create(params)
  optimizer, ema = restore_checkpoint(optimizer, params)
  step_offset = int(optimizer.state.step)
  optimizer = train_step(optimizer, batch)
  return optimizer.target, step_offset
