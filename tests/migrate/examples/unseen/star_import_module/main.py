"""The program's main module (SayCan's ``main.py``): ``import flax``, its model's loss and a
step on ``flax.optim``; other scripts take all of it with ``from main import *``."""
import flax
import jax
import jax.numpy as jnp


def loss_fn(params, x, y):
  return jnp.mean((x @ params['w'] + params['b'] - y) ** 2)


@jax.jit
def train_step(optimizer, x, y):
  loss, grad = jax.value_and_grad(loss_fn)(optimizer.target, x, y)
  return optimizer.apply_gradient(grad), loss


def make_optimizer(params):
  return flax.optim.Adam(learning_rate=0.05, beta1=0.8).create(params)
