"""Legacy ``flax.optim.weight_norm``: weight normalisation around any other optimizer."""
import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct

from . import _tree
from .base import OptimizerDef
from .base import OptimizerState

__all__ = ['WeightNorm']


@struct.dataclass
class _WeightNormHyperParams:
  inner: Any
  wn_decay: jax.Array | float
  wn_eps: jax.Array | float


@struct.dataclass
class _WeightNormParamState:
  direction_state: Any  # the wrapped optimizer's state of `direction`
  scale_state: Any      # ... of `scale` (`()` for leaves that are not normalised)
  direction: jax.Array  # v
  scale: Any            # s, shape (1, ..., 1, n), or `()` for leaves that are not normalised


def _is_normalised(path: str, param) -> bool:
  """Legacy rule: normalise over all axes but the last iff they hold more than one row."""
  shape = np.shape(param)
  if not shape:
    raise ValueError(
        f'WeightNorm cannot normalise the scalar (0-d) parameter at {path!r}: it normalises '
        'over all axes but the last, so every parameter needs at least one axis. Give it shape '
        '(1,) or optimise it with another optimizer.')
  return int(np.prod(shape)) > shape[-1]


def _sum_sq_but_last(x) -> jax.Array:
  return jnp.square(x).sum(tuple(range(x.ndim - 1)), keepdims=True)


def _merge(direction, scale, normalised: bool, eps):
  """``w = v * (s / sqrt(sum(v**2) + eps))`` (sums over all axes but the last)."""
  if not normalised:
    return direction
  return direction * (scale * jax.lax.rsqrt(_sum_sq_but_last(direction) + eps))


class WeightNorm(OptimizerDef):
  """Weight normalisation (Salimans & Kingma, 2016) around another optimizer.

  Every parameter ``w`` with more than one row (all axes but the last) is kept in the state as
  a direction ``v`` and a scale ``s`` (one per output channel, the last axis), with
  ``w = v * s / sqrt(sum(v**2) + wn_eps)``. The wrapped optimizer updates ``v`` and ``s`` from
  the gradients with respect to them (the VJP of that formula, plus ``wn_decay * v``), in one
  ``apply_gradient`` over ``{'direction': v_tree, 'scale': s_tree}``, and the new target is
  recomputed from the new ``v`` and ``s``. Other parameters (1-D, or one row) are passed to the
  wrapped optimizer unchanged, as ``direction``, without a scale.

  This is an :class:`OptimizerDef` wrapper that delegates to the wrapped def's
  ``apply_gradient`` (itself optax-backed for the built-ins), not an optax transform: legacy
  keeps ``v``, ``s`` and the wrapped optimizer's own legacy per-leaf states inside each leaf's
  state and computes the target from them (the target's values are never read), so an
  additive optax update ``merge(v', s') - w`` would re-round every step, and the wrapped
  optimizer may be a user's per-leaf optimizer without an optax transform.

  Args:
    wrapped_optimizer: the :class:`OptimizerDef` to apply to ``(direction, scale)``.
    wn_decay: L2 decay of the direction ``v`` of normalised parameters (added to its gradient).
    wn_eps: added to ``sum(v**2)`` under the square root.

  Examples:
    >>> import jax.numpy as jnp
    >>> import flax_optim_compat as optim
    >>> optimizer = optim.WeightNorm(optim.Momentum(learning_rate=0.1)).create(
    ...     {'kernel': 2 * jnp.ones((2, 2))})
    >>> optimizer = optimizer.apply_gradient({'kernel': jnp.ones((2, 2))})
    >>> optimizer.target['kernel'].round(4)  # the scale moved by 0.1 * 2 ** 0.5 ...
    Array([[1.9, 1.9],
           [1.9, 1.9]], dtype=float32)
    >>> optimizer.state.param_states['kernel'].direction.round(4)  # ... the direction did not move
    Array([[0.7071, 0.7071],
           [0.7071, 0.7071]], dtype=float32)

    Hyper-params of the wrapped optimizer are overridden as usual:

    >>> optimizer = optimizer.apply_gradient({'kernel': jnp.ones((2, 2))}, learning_rate=0.0,
    ...                                      wn_decay=0.5)

  Differences from flax.optim:
    a scalar parameter raises ``ValueError`` naming its path (legacy: ``IndexError: tuple
    index out of range``), and a non-float parameter raises ``TypeError`` at ``create``
    (legacy: a ``float0`` cotangent ``TypeError`` at the first update). Gradients are cast to
    the dtype of their parameter before the VJP (legacy rejected a dtype mismatch).

  References:
    Salimans & Kingma, `Weight Normalization: A Simple Reparameterization to Accelerate
    Training of Deep Neural Networks <https://arxiv.org/abs/1602.07868>`_, 2016
  """

  # The checkpoint field holding the wrapped optimizer's own per-parameter state.
  wrapped_state_field = 'direction_state'

  @classmethod
  def checkpoint_fields(cls):
    """The keys of this optimizer's per-parameter state in a checkpoint."""
    return tuple(f.name for f in dataclasses.fields(_WeightNormParamState))

  def __init__(self, wrapped_optimizer: OptimizerDef, wn_decay=0, wn_eps=1e-8):
    super().__init__(_WeightNormHyperParams(wrapped_optimizer.hyper_params, wn_decay, wn_eps))
    self.wrapped_optimizer = wrapped_optimizer
    self.pure_jax_step = wrapped_optimizer.pure_jax_step  # its own step is pure jax

  def optax_transform(self, hyper_params=None) -> optax.GradientTransformation:
    """Not available: WeightNorm's state and target update are not an optax transform."""
    raise NotImplementedError(
        'WeightNorm has no optax transform (it keeps direction and scale in its state); its '
        'wrapped optimizer has one: wrapped_optimizer.optax_transform().')

  def optax_state(self, params, state, hyper_params=None):
    """Not available: see :meth:`optax_transform`."""
    raise NotImplementedError(
        'WeightNorm has no optax state (it keeps direction and scale in its state); its '
        'wrapped optimizer has one: wrapped_optimizer.optax_state(...) of the directions and '
        'scales.')

  def __repr__(self):
    hp = self.hyper_params
    return (f'{type(self).__name__}({self.wrapped_optimizer!r}, wn_decay={hp.wn_decay!r}, '
            f'wn_eps={hp.wn_eps!r})')

  def update_hyper_params(self, **hyper_param_overrides):
    """``wn_decay`` and ``wn_eps`` are ours; every other override goes to the wrapped def.

    ``hyper_params=`` may be a whole ``_WeightNormHyperParams`` (it becomes the base, as for
    every def, e.g. one group's entry of a ``MultiOptimizer`` list) or, as in legacy, the
    wrapped def's hyper-params (forwarded to it: they replace ``inner``).
    """
    base = self.hyper_params
    if isinstance(hyper_param_overrides.get('hyper_params'), _WeightNormHyperParams):
      base = hyper_param_overrides.pop('hyper_params')
    wn_decay = hyper_param_overrides.pop('wn_decay', base.wn_decay)
    wn_eps = hyper_param_overrides.pop('wn_eps', base.wn_eps)
    hyper_param_overrides.setdefault('hyper_params', base.inner)
    inner = self.wrapped_optimizer.update_hyper_params(**hyper_param_overrides)
    return base.replace(inner=inner, wn_decay=wn_decay, wn_eps=wn_eps)

  def init_state(self, params) -> OptimizerState:
    leaves_with_paths, treedef = jax.tree_util.tree_flatten_with_path(params)
    eps = self.hyper_params.wn_eps
    directions, scales = [], []
    for key_path, param in leaves_with_paths:
      path = _tree.format_path(key_path)
      if not jnp.issubdtype(jnp.result_type(param), jnp.floating):
        raise TypeError(f'WeightNorm needs float parameters; the parameter at {path!r} has '
                        f'dtype {jnp.result_type(param)}.')
      if _is_normalised(path, param):
        scale = jnp.sqrt(_sum_sq_but_last(param) + eps)
        directions.append(param / scale)
        scales.append(scale)
      else:
        directions.append(param)
        scales.append(())
    inner = self.wrapped_optimizer.init_state(
        {'direction': treedef.unflatten(directions), 'scale': treedef.unflatten(scales)})
    return inner.replace(param_states=self._wrap_states(treedef, inner.param_states,
                                                        directions, scales))

  def apply_gradient(self, hyper_params, params, state, grads):
    """Updates ``(direction, scale)`` with the wrapped optimizer; the target is recomputed.

    Raises:
      ValueError: ``grads`` or ``state`` do not match ``params``, or a parameter is a scalar.
    """
    _tree.check_grads(params, grads)
    treedef = jax.tree_util.tree_structure(params)
    paths = _tree.tree_paths(params)
    leaf_states = _tree.per_leaf_states(self, treedef, state.param_states)
    for path, leaf_state in zip(paths, leaf_states):
      if not isinstance(leaf_state, _WeightNormParamState):
        raise ValueError(f'WeightNorm: the state of {path!r} is a {type(leaf_state).__name__}, '
                         'not a _WeightNormParamState.')
    directions = [s.direction for s in leaf_states]
    scales = [s.scale for s in leaf_states]
    normalised = [_is_normalised(path, v) for path, v in zip(paths, directions)]
    eps, decay = hyper_params.wn_eps, hyper_params.wn_decay

    def merge_all(directions, scales):
      return [_merge(v, s, n, eps) for v, s, n in zip(directions, scales, normalised)]

    merged, vjp_fn = jax.vjp(merge_all, directions, scales)
    cotangents = [jnp.asarray(g, w.dtype) for g, w in zip(treedef.flatten_up_to(grads), merged)]
    direction_grads, scale_grads = vjp_fn(cotangents)
    direction_grads = [dv + decay * v if n else dv
                       for dv, v, n in zip(direction_grads, directions, normalised)]

    unflatten = treedef.unflatten
    new_inner_params, new_inner_state = self.wrapped_optimizer.apply_gradient(
        hyper_params.inner,
        {'direction': unflatten(directions), 'scale': unflatten(scales)},
        OptimizerState(state.step, {
            'direction': unflatten([s.direction_state for s in leaf_states]),
            'scale': unflatten([s.scale_state for s in leaf_states])}),
        {'direction': unflatten(direction_grads), 'scale': unflatten(scale_grads)})
    new_directions = treedef.flatten_up_to(new_inner_params['direction'])
    new_scales = treedef.flatten_up_to(new_inner_params['scale'])
    new_params = unflatten(merge_all(new_directions, new_scales))
    return new_params, new_inner_state.replace(param_states=self._wrap_states(
        treedef, new_inner_state.param_states, new_directions, new_scales))

  @staticmethod
  def _wrap_states(treedef, inner_param_states, directions, scales):
    """Per-leaf ``_WeightNormParamState`` from the wrapped optimizer's two state trees."""
    direction_states = treedef.flatten_up_to(inner_param_states['direction'])
    scale_states = treedef.flatten_up_to(inner_param_states['scale'])
    return treedef.unflatten([
        _WeightNormParamState(*fields)
        for fields in zip(direction_states, scale_states, directions, scales)])

