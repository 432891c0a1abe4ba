"""A model with its optimizer in a dataclass field, created from the def the caller passes
(jaxrl's ``Model.with_optimizer(optim_def)``), and a plain helper that creates its def."""
from typing import Any, Callable, Optional, Tuple

import flax
import jax
from flax import optim


@flax.struct.dataclass
class Model:
  fn: Callable = flax.struct.field(pytree_node=False)
  params: Any = None
  optimizer: Optional[optim.Optimizer] = None

  def with_optimizer(self, optim_def):
    optimizer = optim_def.create(self.params)
    return self.replace(params=None, optimizer=optimizer)

  def __call__(self, x):
    return self.fn(self.params or self.optimizer.target, x)

  def apply_gradient(self, loss_fn) -> Tuple[Any, 'Model']:
    grad, info = jax.grad(loss_fn, has_aux=True)(self.optimizer.target)
    new_optimizer = self.optimizer.apply_gradient(grad)
    return self.replace(optimizer=new_optimizer), info


def make_optimizer(opt_def, params):
  return opt_def.create(params)
