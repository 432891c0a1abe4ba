import functools

from flax import optim
import jax
import jax.numpy as jnp


def train_step(optimizer, x, learning_rate):
  step = optimizer.state.step
  grad = jax.grad(lambda p: jnp.sum(p['w'] * x))(optimizer.target)
  return optimizer.apply_gradient(grad, learning_rate=learning_rate * (step + 1))


def init_optimizer_state(params):
  optimizer = optim.Adam(learning_rate=0.1).create(params)
  p_train_step = jax.jit(functools.partial(train_step, learning_rate=0.1))
  return optimizer, p_train_step


def update_params(optimizer_state, x):
  optimizer, p_train_step = optimizer_state
  optimizer = p_train_step(optimizer, x)
  return (optimizer, p_train_step), optimizer.target
