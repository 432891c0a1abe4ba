"""The one bridge between the legacy state layout and optax.

Users, checkpoints and old code see ``OptimizerState(step, param_states)`` where ``param_states``
mirrors the target and holds one legacy dataclass (e.g. ``_AdamParamState``) per leaf. The math
runs in an ``optax.GradientTransformation`` whose state is a chain of NamedTuples holding one tree
per field (e.g. ``ScaleByAdamState(count, mu, nu)``). An optimizer declares, as data, which legacy
field is which optax field (``{'grad_ema': 'mu', 'grad_sq_ema': 'nu'}``); this module transposes
between the two layouts, sets every optax ``count`` from the legacy ``step``, and checks inputs.

Everything here runs at trace time under ``jax.jit``: the compiled step contains only the optax
math (plus float32 up/down casts for 16-bit floats).
"""
from typing import Any, Callable, Dict, List

import jax
import jax.numpy as jnp
import numpy as np
import optax

from . import _tree

__all__ = ['init_param_states', 'apply_gradient', 'optax_update', 'to_optax_state']

_LOW_PRECISION = (jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float16))


# ----------------------------------------------------------------------------- dtype policy

def _upcast(tree):
  """16-bit floats -> float32, so the optax math runs in float32 (see ``apply_gradient``)."""
  return jax.tree_util.tree_map(
      lambda x: x.astype(jnp.float32) if jnp.result_type(x) in _LOW_PRECISION else x, tree)


def _cast_like(new_tree, like_tree):
  return jax.tree_util.tree_map(
      lambda new, old: jnp.asarray(new).astype(jnp.result_type(old)), new_tree, like_tree)


# ----------------------------------------------------------------------------- optax state walk

def _is_namedtuple(node) -> bool:
  return isinstance(node, tuple) and hasattr(node, '_fields')


def _map_state(node, on_field: Callable[[str, Any], Any], path=''):
  """Rebuilds an optax state, giving ``on_field(name, value)`` every NamedTuple field."""
  if _is_namedtuple(node):
    return type(node)(*[
        on_field(name, child, f'{path}{type(node).__name__}.{name}')
        for name, child in zip(node._fields, node)])
  if isinstance(node, (tuple, list)):
    return type(node)(_map_state(c, on_field, path) for c in node)
  if isinstance(node, dict):
    return {k: _map_state(v, on_field, f'{path}{k}/') for k, v in node.items()}
  return node


def _optax_fields(opt_def) -> Dict[str, str]:
  return dict(getattr(opt_def, 'optax_state_fields', {}))


def _fill_optax_state(template, step, field_trees: Dict[str, Any], opt_def):
  """optax state with the structure of ``template`` holding the legacy values."""
  seen: Dict[str, str] = {}

  def on_field(name, child, where):
    if name in field_trees:
      if name in seen:
        raise TypeError(f'{type(opt_def).__name__}: optax field {name!r} occurs twice '
                        f'({seen[name]} and {where}); the legacy mapping is ambiguous.')
      seen[name] = where
      return field_trees[name]
    if name == 'count':
      return jnp.asarray(step, dtype=child.dtype)
    if jax.tree_util.tree_leaves(child):
      if _is_namedtuple(child) or isinstance(child, (tuple, list, dict)):
        return _map_state(child, on_field, where + '/')
      raise TypeError(
          f'{type(opt_def).__name__}: the optax state field {where} has no legacy counterpart; '
          'declare it in optax_state_fields.')
    return child

  return _map_state(template, on_field)


def _read_optax_state(opt_state, wanted) -> Dict[str, Any]:
  found: Dict[str, Any] = {}

  def on_field(name, child, where):
    if name in wanted:
      found[name] = child
    elif _is_namedtuple(child) or isinstance(child, (tuple, list, dict)):
      _map_state(child, on_field, where + '/')
    return child

  _map_state(opt_state, on_field)
  return found


# ----------------------------------------------------------------------------- legacy <-> optax

def _absent_field_column(opt_def, legacy, num_leaves) -> List[Any]:
  """Values of a legacy field whose optax field is absent from the state.

  ``None`` (e.g. RMSProp ``mg`` when not centered), unless the optimizer declares
  ``legacy_placeholders = {legacy field: zero-argument factory}``, e.g. Adafactor's
  ``m = jnp.zeros((1,))`` when ``beta1 is None``: legacy kept a dummy array in unused slots.
  """
  factory = dict(getattr(opt_def, 'legacy_placeholders', {})).get(legacy)
  return [None if factory is None else factory() for _ in range(num_leaves)]


def _to_param_states(opt_def, treedef, field_trees: Dict[str, Any]):
  """Transposes {optax field: tree} into a tree of legacy per-leaf dataclasses."""
  param_state_cls = getattr(opt_def, 'param_state_cls', None)
  if param_state_cls is None:
    return treedef.unflatten([() for _ in range(treedef.num_leaves)])
  fields = _optax_fields(opt_def)
  columns = {legacy: (treedef.flatten_up_to(field_trees[name]) if name in field_trees
                      else _absent_field_column(opt_def, legacy, treedef.num_leaves))
             for legacy, name in fields.items()}
  leaves = [param_state_cls(**{legacy: col[i] for legacy, col in columns.items()})
            for i in range(treedef.num_leaves)]
  return treedef.unflatten(leaves)



def _from_param_states(opt_def, params, param_states, wanted) -> Dict[str, Any]:
  """Transposes the legacy per-leaf dataclasses into {optax field: tree}."""
  treedef = jax.tree_util.tree_structure(params)
  per_leaf = _tree.per_leaf_states(opt_def, treedef, param_states)
  paths = _tree.tree_paths(params)
  trees = {}
  for legacy, name in _optax_fields(opt_def).items():
    if name not in wanted:
      continue
    column = []
    for path, s in zip(paths, per_leaf):
      value = getattr(s, legacy, None)
      if value is None:
        raise ValueError(
            f'{type(opt_def).__name__}: the state of {path!r} has no {legacy!r} but these '
            'hyper-params need it (an override may not change the state layout, e.g. '
            'centered= or beta1=None -> value).')
      column.append(value)
    trees[name] = treedef.unflatten(column)
  return trees


def _expand_placeholders(opt_def, field_trees: Dict[str, Any], template) -> Dict[str, Any]:
  """Declared placeholders where the transform needs a real state -> zeros of ``tx.init``'s shape.

  A legacy state holds a ``legacy_placeholders`` value in a slot that the per-call
  hyper-params may use after all (Adafactor built with ``beta1=None``, then
  ``apply_gradient(..., beta1=0.9)``). Legacy broadcast the ``(1,)`` zeros against the
  parameter; we read the slot as zeros of the shape and dtype ``tx.init`` would give, which is
  the same value, except that for a 0-d parameter legacy's broadcast also turned the
  parameter itself into shape ``(1,)``.
  """
  placeholder_fields = getattr(opt_def, 'legacy_placeholders', {})
  names = {_optax_fields(opt_def)[legacy] for legacy in placeholder_fields} & set(field_trees)
  if not names:
    return field_trees
  specs = _read_optax_state(template, names)
  expand = lambda value, spec: (value if np.shape(value) == spec.shape
                                else jnp.zeros(spec.shape, spec.dtype))
  return {name: (jax.tree_util.tree_map(expand, tree, specs[name]) if name in specs else tree)
          for name, tree in field_trees.items()}


def init_param_states(opt_def, params):
  """Legacy ``param_states`` for ``params``, from the optax transform's own ``init``."""
  tx = opt_def.optax_transform(opt_def.hyper_params)
  opt_state = tx.init(params)
  field_trees = _read_optax_state(opt_state, set(_optax_fields(opt_def).values()))
  return _to_param_states(opt_def, jax.tree_util.tree_structure(params), field_trees)


def _legacy_to_optax(opt_def, tx, params, state, cast=lambda tree: tree):
  """``(opt_state, wanted optax fields, legacy field trees)`` for ``tx`` from a legacy state.

  ``cast`` is applied to the params before ``tx.init``'s shapes are taken and to the state
  values put into the optax state (the float32 policy of :func:`optax_update`).
  """
  template = jax.eval_shape(tx.init, cast(params))
  wanted = set(_read_optax_state(template, set(_optax_fields(opt_def).values())))
  old_fields = _from_param_states(opt_def, params, state.param_states, wanted)
  old_fields = _expand_placeholders(opt_def, old_fields, template)
  opt_state = _fill_optax_state(template, state.step, cast(old_fields), opt_def)
  return opt_state, wanted, old_fields


def to_optax_state(opt_def, params, state):
  """The state of ``opt_def.optax_transform()`` holding the values of a legacy ``state``.

  For migrating to plain optax: ``tx.update(grads, to_optax_state(...), params)`` continues
  exactly where the legacy optimizer stopped (every ``count`` is the legacy ``step``).
  """
  tx = opt_def.optax_transform()
  return _legacy_to_optax(opt_def, tx, params, state)[0]


def optax_update(opt_def, hyper_params, params, state, grads):
  """One legacy step of ``opt_def`` as an optax update: ``(updates, new_param_states)``.

  Fills the optax state of ``opt_def.optax_transform(hyper_params)`` from the legacy
  ``state`` (every ``count`` = ``state.step``), runs ``tx.update`` and reads the new legacy
  per-leaf states back. ``optax.apply_updates(params, updates)`` (cast to the params' dtypes)
  is the new target. Used by :func:`apply_gradient` and by compositions that apply the updates
  themselves (``MultiOptimizer`` runs one ``optax.multi_transform`` over several groups).

  ``params`` may contain ``optax.MaskedNode`` (no leaves) where ``state.param_states`` has
  one too, as inside ``optax.masked``.

  16-bit float params, grads and states are computed in float32: ``updates`` are float32 for
  them and the new states are cast back to their own dtypes.

  Returns:
    ``(updates, new_param_states)``; the caller advances the step.
  """
  tx = opt_def.optax_transform(hyper_params)
  params32, grads32 = _upcast(params), _upcast(grads)
  opt_state, wanted, old_fields = _legacy_to_optax(opt_def, tx, params, state, _upcast)
  updates, new_opt_state = tx.update(grads32, opt_state, params32)
  new_fields = _read_optax_state(new_opt_state, wanted)
  new_fields = {name: _cast_like(tree, old_fields[name]) for name, tree in new_fields.items()}
  new_param_states = _to_param_states(opt_def, jax.tree_util.tree_structure(params), new_fields)
  return updates, new_param_states


def apply_gradient(opt_def, hyper_params, params, state, grads):
  """One legacy ``apply_gradient`` through ``opt_def.optax_transform(hyper_params)``.

  16-bit float params, grads and states are computed in float32 and cast back to their own
  dtypes, so e.g. Adam's bias correction ``1 - 0.999**t`` does not round to zero in bfloat16
  (legacy computed it in the param dtype and bfloat16 params never moved).

  Returns:
    ``(new_params, new_param_states)``; the caller advances the step.
  """
  updates, new_param_states = optax_update(opt_def, hyper_params, params, state, grads)
  # `p + u` promotes a 16-bit p to the float32 update and apply_updates casts back to p's dtype.
  return optax.apply_updates(params, updates), new_param_states
