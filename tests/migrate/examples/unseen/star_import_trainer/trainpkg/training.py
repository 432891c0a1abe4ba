import jax
import jax.numpy as jnp


def mse(p, x, y):
  return jnp.mean((x @ p['w'] + p['b'] - y) ** 2)


class Trainer:

  def __init__(self, x, y):
    self.x, self.y = x, y

  def train_epoch(self, optimizer, learning_rate):
    loss, grad = jax.value_and_grad(mse)(optimizer.target, self.x, self.y)
    return optimizer.apply_gradient(grad, learning_rate=learning_rate), loss
