"""A trainer whose optimizer is a property (flaxseed's ``FlaxseedModule.optimizer``): the getter
creates it on first read, in a dict of the trainer's own, and returns what the setter stored
there; the step reads and sets ``self.optimizer`` as a field. Before, the property's uses were
left legacy with no record beside the rewritten create (half-migrated, reported whole)."""
import json

import jax
import jax.numpy as jnp
from flax import optim


class Trainer:

  def __init__(self, params):
    self._variables = {}
    self._init_params = params

  @property
  def optimizer(self):
    if 'optimizer' not in self._variables:
      self._variables['optimizer'] = optim.Momentum(learning_rate=0.1, beta=0.7).create(
          self._init_params)
    return self._variables['optimizer']

  @optimizer.setter
  def optimizer(self, value):
    self._variables['optimizer'] = value

  @property
  def params(self):
    return self.optimizer.target

  def update(self, x, y):
    def loss_fn(params):
      return jnp.mean((x @ params['w'] + params['b'] - y) ** 2)
    loss, grad = jax.value_and_grad(loss_fn)(self.params)
    self.optimizer = self.optimizer.apply_gradient(grad)
    return loss


def main():
  x = jax.random.normal(jax.random.PRNGKey(0), (8, 3))
  y = jnp.sin(x[:, :1])
  trainer = Trainer({'w': jnp.full((3, 1), 0.3), 'b': jnp.zeros((1,))})
  losses = [float(trainer.update(x, y)) for _ in range(6)]
  steps = int(trainer.optimizer.state.step)
  final = [float(v) for leaf in jax.tree_util.tree_leaves(trainer.params) for v in leaf.ravel()]
  print(json.dumps(losses + final + [steps]))


if __name__ == '__main__':
  main()
