"""Legacy ``flax.optim.dynamic_scale``: dynamic loss scaling for mixed-precision gradients.

Kept at its legacy import path (and as ``flax_optim_compat.DynamicScale``) with the legacy
fields, defaults and checkpoint keys, so train states that held one restore unchanged.
"""
import functools
from typing import Any, Callable, NamedTuple, Optional, Sequence, Union

import jax
import jax.numpy as jnp
import numpy as np
from flax import serialization
from flax import struct

from . import _restore
from . import _state_check

__all__ = ['DynamicScale', 'DynamicScaleResult']


class DynamicScaleResult(NamedTuple):
  """What the function returned by :meth:`DynamicScale.value_and_grad` returns."""
  dynamic_scale: 'DynamicScale'
  finite: jax.Array
  aux: Any
  grad: Any


class DynamicScale(struct.PyTreeNode):
  """Dynamic loss scaling: the largest loss multiplier whose gradients stay finite.

  Low-precision (``float16``) gradients underflow to zero when small; multiplying the loss by
  ``scale`` before differentiating (and the gradients by ``1 / scale`` after) keeps them
  representable. After a non-finite gradient the scale shrinks by ``backoff_factor``; after
  ``growth_interval`` consecutive finite steps, the next finite step grows it by
  ``growth_factor``. Skip the update yourself when ``finite`` is false (e.g. with
  ``jnp.where``).

  Attributes:
    growth_factor: multiplier applied after ``growth_interval`` finite steps (static).
    backoff_factor: multiplier applied after a non-finite gradient (static).
    growth_interval: number of consecutive finite steps before growing (static).
    fin_steps: consecutive finite steps so far.
    scale: the current loss multiplier.

  Only ``fin_steps`` and ``scale`` are pytree leaves, and they are the checkpoint:
  ``to_state_dict(DynamicScale()) == {'fin_steps': 0, 'scale': 65536.0}``. A restore checks
  them before anything is built: ``fin_steps`` must be a non-negative integer and ``scale`` a
  real number, each of the template's shape (``()``, or ``(n,)`` for a replicated one);
  anything else raises a ``ValueError`` naming the field.

  Examples:
    >>> import jax, jax.numpy as jnp
    >>> import flax_optim_compat as optim
    >>> loss_fn = lambda p: jnp.asarray(p, jnp.float16) ** 2
    >>> dyn_scale = optim.DynamicScale(growth_interval=2)
    >>> step = jax.jit(lambda ds, p: ds.value_and_grad(loss_fn)(p))
    >>> for _ in range(3):
    ...   dyn_scale, is_finite, loss, grad = step(dyn_scale, jnp.float32(1.0))
    ...   print(bool(is_finite), float(dyn_scale.scale), float(grad))
    False 32768.0 inf
    False 16384.0 inf
    True 16384.0 2.0

  Differences from ``flax.training.dynamic_scale`` (flax >= 0.6): no ``minimum_scale`` field
  and no cap on growth, as legacy; the algorithm and checkpoint keys are the same.

  Differences from flax.optim: legacy restored any value into ``fin_steps`` and ``scale``
  (a ``(3,)`` scale, a string) and failed at the next step with an unrelated message.
  """
  growth_factor: float = struct.field(pytree_node=False, default=2.0)
  backoff_factor: float = struct.field(pytree_node=False, default=0.5)
  growth_interval: int = struct.field(pytree_node=False, default=2000)
  fin_steps: Any = 0
  scale: Any = 65536.0

  def value_and_grad(self, fun: Callable[..., Any],
                     argnums: Union[int, Sequence[int]] = 0,
                     has_aux: bool = False,
                     axis_name: Optional[str] = None,
                     ) -> Callable[..., DynamicScaleResult]:
    """Like ``jax.value_and_grad``, with the loss scaled and the scale updated.

    Args:
      fun: the loss function; returns a scalar, or ``(scalar, aux)`` if ``has_aux``.
      argnums: which positional argument(s) to differentiate.
      has_aux: whether ``fun`` returns ``(loss, aux)``.
      axis_name: if given, the gradients are averaged over this ``pmap`` axis.

    Returns:
      A function of ``fun``'s arguments returning
      ``DynamicScaleResult(dynamic_scale, finite, aux, grad)``, where ``aux`` is the (unscaled)
      loss, or ``(loss, aux)`` if ``has_aux``, and ``grad`` is float32.
    """

    @functools.wraps(fun)
    def scaled_fun(*args):
      out = fun(*args)
      if has_aux:
        return self.scale * out[0], out[1]
      return self.scale * out

    grad_fn = jax.value_and_grad(scaled_fun, argnums, has_aux)

    def value_and_scaled_grad(*args):
      value, grad = grad_fn(*args)
      value = (value[0] / self.scale, value[1]) if has_aux else value / self.scale
      grad = jax.tree_util.tree_map(lambda g: jnp.asarray(g, jnp.float32) / self.scale, grad)
      if axis_name is not None:
        grad = jax.lax.pmean(grad, axis_name)
      finite = jnp.array(True)
      for g in jax.tree_util.tree_leaves(grad):
        finite &= jnp.all(jax.lax.is_finite(g))
      grow = self.fin_steps == self.growth_interval
      new_scale = jnp.where(
          finite,
          jnp.where(grow, self.scale * self.growth_factor, self.scale),
          self.scale * self.backoff_factor)
      new_fin_steps = jnp.where(grow | (~finite), 0, self.fin_steps + 1)
      new_self = self.replace(fin_steps=new_fin_steps, scale=new_scale)
      return DynamicScaleResult(new_self, finite, value, grad)

    return value_and_scaled_grad


# Legacy checkpoint keys, in the order of the dataclass fields.
_FIELDS = ('fin_steps', 'scale')
# Which kinds of number each field takes: fin_steps counts steps, scale multiplies the loss.
_KINDS = {'fin_steps': ('iu', 'a non-negative integer'), 'scale': ('iuf', 'a real number')}


def _check_field(name, template_value, value, where):
  kinds, what = _KINDS[name]
  shape = tuple(np.shape(template_value))
  if _state_check.is_array(value, with_values=True):
    kind, got_shape = np.dtype(value.dtype).kind, tuple(np.shape(value))
  elif isinstance(value, (int, float)) and not isinstance(value, bool):
    kind, got_shape = np.result_type(type(value)).kind, ()
  else:
    kind, got_shape = None, None
  problem = None
  if kind is None or kind not in kinds:
    problem = f'must be {what}'
  elif got_shape != shape:
    problem = f'must have shape {shape} (as the target)'
  elif name == 'fin_steps' and np.size(value) and np.min(value) < 0:
    problem = f'must be {what}'
  if problem:
    raise ValueError(f'Cannot restore DynamicScale: at {where + "/" + name!r} the value '
                     f'{problem}, but the checkpoint has {_state_check.describe_value(value)}. '
                     'Nothing was restored.')


def _to_state_dict(dyn_scale: DynamicScale) -> dict:
  return {name: serialization.to_state_dict(getattr(dyn_scale, name)) for name in _FIELDS}


def _from_state_dict(dyn_scale: DynamicScale, state: dict) -> DynamicScale:
  path = serialization.current_path()  # flax's spelling, for flax.struct's messages below
  where = _restore.outer_path()
  # flax.struct's own messages for missing and unknown fields (old tests match on them).
  if not isinstance(state, dict):
    raise ValueError(f'Cannot restore DynamicScale: at {where or "/"!r} the checkpoint has '
                     f'{_state_check.describe_value(state)} but the target expects a dict with '
                     f'the keys {list(_FIELDS)}. Nothing was restored.')
  for name in _FIELDS:
    if name not in state:
      raise ValueError(f'Missing field {name} in state dict while restoring an instance of '
                       f'DynamicScale, at path {path}')
  unknown = [str(k) for k in state if k not in _FIELDS]
  if unknown:
    raise ValueError(f'Unknown field(s) "{",".join(unknown)}" in state dict while restoring '
                     f'an instance of DynamicScale at path {path}')
  for name in _FIELDS:
    _check_field(name, getattr(dyn_scale, name), state[name], where)
  return dyn_scale.replace(**{
      name: serialization.from_state_dict(getattr(dyn_scale, name), state[name], name=name)
      for name in _FIELDS})


# The checkpoint layout stays the legacy one ({'fin_steps', 'scale'}); only the check is added.
serialization.register_serialization_state(
    DynamicScale, _to_state_dict, _from_state_dict, override=True)
