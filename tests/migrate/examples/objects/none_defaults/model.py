"""jaxrl's ``Model``: params and optimizer fields that default to ``None``, one of them set,
the optimizer set to ``None`` once frozen (``replace(optimizer=None)``); and a record of models
where one is ``None`` (``temp=None``). ``None`` is a value, never a place an optimizer is
stored: the ``None`` stored in the field is not the ``None`` passed elsewhere
(``jax.lax.cond(..., operand=None)``, ``temp=None``, ``entropy=None``)."""
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

  def frozen(self) -> 'Model':
    return self.replace(params=self.params or self.optimizer.target, optimizer=None)

  def apply_gradient(self, loss_fn) -> Tuple[Any, 'Model']:
    grad, info = jax.grad(loss_fn, has_aux=True)(self.optimizer.target)
    return self.replace(optimizer=self.optimizer.apply_gradient(grad)), info


@flax.struct.dataclass
class ActorCritic:
  actor: Model
  critic: Model
  target_critic: Model
  temp: Optional[Model]
