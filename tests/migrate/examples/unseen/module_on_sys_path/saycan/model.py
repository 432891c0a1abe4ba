import jax
import jax.numpy as jnp
from flax import linen as nn


class Net(nn.Module):

  @nn.compact
  def __call__(self, x):
    return nn.Dense(2)(nn.relu(nn.Dense(4)(x)))


@jax.jit
def train_step(optimizer, x):
  def loss_fn(params):
    return jnp.mean((Net().apply({'params': params}, x) - 1.0) ** 2)
  loss, grad = jax.value_and_grad(loss_fn)(optimizer.target)
  optimizer = optimizer.apply_gradient(grad)
  return optimizer, loss
