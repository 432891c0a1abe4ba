"""A learner whose optimizer's keywords are whatever its caller passes (jaxrl's AWAC learner:
``Adam(**actor_optim_kwargs)``, the dict from a config chosen at run time, a dict default where
none is given), created by a model dataclass's ``with_optimizer``."""
from typing import Any, Callable, Optional

import flax
import jax
import jax.numpy as jnp
from flax import optim


@flax.struct.dataclass
class Model:
  fn: Callable = flax.struct.field(pytree_node=False)
  params: Any = None
  optimizer: Optional[optim.Optimizer] = None

  def with_optimizer(self, optim_def):
    return self.replace(params=None, optimizer=optim_def.create(self.params))

  def apply_gradient(self, loss_fn):
    loss, grad = jax.value_and_grad(loss_fn)(self.optimizer.target)
    return self.replace(optimizer=self.optimizer.apply_gradient(grad)), loss


def linear(params, x):
  return x @ params['w'] + params['b']


@jax.jit
def update(model, x, y):
  return model.apply_gradient(lambda p: jnp.mean((model.fn(p, x) - y) ** 2))


class Learner:

  def __init__(self, params, optim_kwargs: dict = {'learning_rate': 3e-2, 'weight_decay': 1e-2}):
    self.model = Model(linear, params).with_optimizer(optim.Adam(**optim_kwargs))

  def step(self, x, y):
    self.model, loss = update(self.model, x, y)
    return float(loss)
