"""A JAX agent whose optimizer is an attribute of the agent (2021 RL codebases)."""
import json

import jax
import jax.numpy as jnp
from flax import optim


def loss_fn(params, x):
  return jnp.sum((params['w'] * x - 1.0) ** 2)


class JaxAgent:

  def __init__(self, params, learning_rate):
    self.optimizer = optim.RMSProp(learning_rate=learning_rate).create(params)

  def update(self, x):
    loss, grads = jax.value_and_grad(loss_fn)(self.optimizer.target, x)
    self.optimizer = self.optimizer.apply_gradient(grads)
    return loss


def main():
  agent = JaxAgent({'w': jnp.ones(3)}, learning_rate=0.01)
  losses = [float(agent.update(jnp.arange(3.0) / 3.0)) for _ in range(10)]
  print(json.dumps(losses + [float(x) for x in agent.optimizer.target['w']]))


if __name__ == '__main__':
  main()
