"""An agent's optimizer read through getattr with a literal field name (as a runner that
reads each of an agent's named parts does): the same field as ``agent.optimizer``."""
import json

import jax
import jax.numpy as jnp
from flax import optim


class Agent:

  def __init__(self, params):
    self.optimizer = optim.Adam(learning_rate=0.05, beta1=0.8).create(params)

  def update(self, x, y):
    def loss_fn(params):
      return jnp.mean((x @ params['w'] + params['b'] - y) ** 2)
    loss, grad = jax.value_and_grad(loss_fn)(self.optimizer.target)
    self.optimizer = self.optimizer.apply_gradient(grad)
    return loss


def main():
  x = jax.random.normal(jax.random.PRNGKey(0), (8, 3))
  y = jnp.sin(x[:, :1])
  agent = Agent({'w': jnp.full((3, 1), 0.3), 'b': jnp.zeros((1,))})
  losses = [float(agent.update(x, y)) for _ in range(6)]
  target = getattr(agent, 'optimizer').target
  steps = int(getattr(agent, 'optimizer').state.step)
  final = [float(v) for leaf in jax.tree_util.tree_leaves(target) for v in leaf.ravel()]
  print(json.dumps(losses + final + [steps]))


if __name__ == '__main__':
  main()
