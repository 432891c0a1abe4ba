"""Two dataclasses with a field of one name, ``actor``: one holds the agent's modules, the other
its optimizers (ethanabrooks/jax-rl's SAC). ``self.module.actor`` is the field of the class
``self.module`` holds, a module whose ``init`` is its own, not the optimizer's field."""
from dataclasses import dataclass
import json

import jax
import jax.numpy as jnp
from flax import optim


@dataclass
class Optimizers:
  actor: optim.Optimizer


@dataclass
class Modules:
  actor: object


class Linear:

  def init(self, key):
    return {'w': jax.random.normal(key, (3, 1)), 'b': jnp.zeros((1,))}


class Agent:

  def __init__(self):
    self.module = None
    self.module = Modules(actor=Linear())
    params = self.new_params(self.module.actor)
    self.optimizer = Optimizers(actor=optim.Adam(learning_rate=0.05, beta1=0.8).create(params))

  def new_params(self, module):
    return module.init(jax.random.PRNGKey(1))

  def update(self, x, y):
    def loss_fn(params):
      return jnp.mean((x @ params['w'] + params['b'] - y) ** 2)
    loss, grad = jax.value_and_grad(loss_fn)(self.optimizer.actor.target)
    self.optimizer.actor = self.optimizer.actor.apply_gradient(grad)
    return loss


def main():
  x = jax.random.normal(jax.random.PRNGKey(0), (8, 3))
  y = jnp.sin(x[:, :1])
  agent = Agent()
  losses = [float(agent.update(x, y)) for _ in range(5)]
  target = agent.optimizer.actor.target
  final = [float(v) for leaf in jax.tree_util.tree_leaves(target) for v in leaf.ravel()]
  print(json.dumps(losses + final + [int(agent.optimizer.actor.state.step)]))


if __name__ == '__main__':
  main()
