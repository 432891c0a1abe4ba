"""ray-project/distml (2021): a framework's operator base class declares an abstract
``register(model=..., optimizer=...)``, its flax subclass implements it (storing the optimizer on
``self``), and the user's operator, a subclass of that, calls ``self.register(...)`` in its
``setup``. Python runs the flax subclass's method (the nearest in the MRO, as no subclass of the
user's class overrides it). Before, two methods of that name in the family stopped the analysis:
FOM107 "self.register is not a function or class of the given files"."""
import json

import jax
import jax.numpy as jnp
from flax import optim


class TrainingOperator:

  def register(self, *, model, optimizer):
    raise NotImplementedError


class FlaxTrainingOperator(TrainingOperator):

  def __init__(self, data):
    self.data = data
    self.setup()

  def register(self, *, model, optimizer):
    self.model = model
    self.optimizer = optimizer

  def train_step(self):
    def loss_fn(params):
      return jnp.mean((self.model(params, self.data) - 0.5) ** 2)
    loss, grad = jax.value_and_grad(loss_fn)(self.optimizer.target)
    self.optimizer = self.optimizer.apply_gradient(grad)
    return float(loss)


class LinearOperator(FlaxTrainingOperator):

  def setup(self):
    params = {'w': jnp.linspace(-0.4, 0.4, 6).reshape(3, 2), 'b': jnp.zeros(2)}
    optimizer = optim.Momentum(learning_rate=0.05, beta=0.8).create(params)
    self.register(model=lambda p, x: jnp.tanh(x @ p['w'] + p['b']), optimizer=optimizer)


operator = LinearOperator(jnp.cos(jnp.arange(12.0).reshape(4, 3)))
losses = [operator.train_step() for _ in range(4)]
print(json.dumps(losses + [float(v) for leaf in jax.tree_util.tree_leaves(operator.optimizer.target)
                           for v in jnp.ravel(leaf)]))
