"""Walking checkpoint state dicts (where the optimizer sits, leaf paths) and restore templates."""
from typing import Any, List, Optional, Tuple

import jax
import numpy as np
from flax import serialization

from .. import _layouts
from .. import _tree
from ._codec import CheckpointError


def is_optimizer(node) -> bool:
  """Whether ``node`` is a legacy ``Optimizer.state_dict()``: ``{'target', 'state'}``."""
  if not isinstance(node, dict) or set(node) != {'target', 'state'}:
    return False
  state = node['state']
  return isinstance(state, dict) and (
      {'step', 'param_states'} <= set(state) or _layouts.is_per_group_multi_state(state))


def is_train_state(node) -> bool:
  """Whether ``node`` is what ``convert`` writes in place of an optimizer: a dict with
  ``params`` and ``opt_state`` (a TrainState's fields; ``step`` and carried keys beside them)."""
  return isinstance(node, dict) and {'params', 'opt_state'} <= set(node)


def find(tree, is_node, path=()) -> List[Tuple[str, ...]]:
  """The key paths of every node of ``tree`` for which ``is_node`` holds (outermost ones)."""
  if is_node(tree):
    return [path]
  if isinstance(tree, dict):
    return [p for k, v in tree.items() for p in find(v, is_node, path + (str(k),))]
  return []


def find_optimizers(tree) -> List[Tuple[str, ...]]:
  """The key paths of every legacy optimizer in ``tree`` (outermost ones; not inside another)."""
  return find(tree, is_optimizer)


def at(tree, path):
  """The node of ``tree`` at the key path ``path``."""
  for key in path:
    tree = tree[key]
  return tree


def replace_at(tree, path, value):
  """A copy of ``tree`` (the dicts along ``path`` rebuilt) with ``value`` at the key path ``path``."""
  if not path:
    return value
  return {k: (replace_at(v, path[1:], value) if k == path[0] else v) for k, v in tree.items()}


def locate(tree: dict, where: str) -> Tuple[str, ...]:
  """The key path of the one optimizer in ``tree``; CheckpointError for none or several."""
  found = find_optimizers(tree)
  if not found:
    raise CheckpointError(
        f'{where} holds no legacy optimizer: no {{"target", "state": {{"step", '
        f'"param_states"}}}} node (top-level keys: {sorted(tree, key=str)[:10]}).')
  if len(found) > 1:
    raise CheckpointError(f'{where} holds {len(found)} optimizers, at '
                          f'{", ".join(_tree.join_keys(p) for p in found)}; convert them one '
                          'at a time from their state dicts.')
  return found[0]


def leaves(tree, path=()) -> List[Tuple[Tuple[str, ...], Any]]:
  """``[(key path, leaf), ...]`` in order; an empty dict is a leaf."""
  if isinstance(tree, dict) and tree:
    return [x for k, v in tree.items() for x in leaves(v, path + (str(k),))]
  return [(path, tree)]


def abstract_optimizer(opt_def, target):
  """``opt_def.create(target)`` with read-only zero-stride leaves: shapes and dtypes only.

  The strict restore checks the file against a template; building it abstractly
  (``jax.eval_shape``) keeps a 1 GB checkpoint from allocating a second, zero-filled state.
  """
  abstract = jax.eval_shape(opt_def.create, target)
  return jax.tree_util.tree_map(
      lambda s: np.broadcast_to(np.zeros((), s.dtype), s.shape), abstract)


def template(opt_target, opt_state) -> dict:
  """The state dict ``{'target', 'state'}`` an optimizer of this target and state writes."""
  return {'target': serialization.to_state_dict(opt_target),
          'state': serialization.to_state_dict(opt_state)}


def check_leaves(node, path: Tuple[str, ...], where: str) -> None:
  """CheckpointError unless every leaf under ``node`` is a number, an array of numbers or bools,
  None or an empty dict, and every key a string or int distinct from its siblings as a path.

  Run on an optimizer before anything of it reaches jax.
  """
  if isinstance(node, dict):
    names = {}
    for key in node:
      if not isinstance(key, (str, int)) or isinstance(key, bool):
        raise CheckpointError(f'{where}: the key {key!r} at {_tree.join_keys(path) or "/"} is a '
                              f'{type(key).__name__}, not a string.')
      if str(key) in names:
        raise CheckpointError(f'{where}: the keys {names[str(key)]!r} and {key!r} at '
                              f'{_tree.join_keys(path) or "/"} name the same path.')
      names[str(key)] = key
    for key, value in node.items():
      check_leaves(value, path + (str(key),), where)
    return
  if node is None or (isinstance(node, (bool, int, float, complex, np.ndarray, np.generic,
                                        jax.Array)) and _tree.leaf_kind(node) in tuple('biufc')):
    return
  what = (f'an array of dtype {np.dtype(node.dtype).name}' if hasattr(node, 'dtype')
          else f'a {type(node).__name__}')
  raise CheckpointError(f'{where}: the leaf at {_tree.join_keys(path) or "/"} is {what}, not a '
                        'number or an array of numbers.')


def _is_array(x) -> bool:
  return isinstance(x, (np.ndarray, np.generic, jax.Array))


def check_arrays(tree, path: Tuple[str, ...], where: str) -> None:
  """CheckpointError unless every leaf under ``tree`` is an array of numbers or bools (a dict
  of them: e.g. params)."""
  check_leaves(tree, path, where)
  for leaf_path, leaf in leaves(tree, path):
    if not _is_array(leaf) and leaf != {}:
      raise CheckpointError(f'{where}: the leaf at {_tree.join_keys(leaf_path)} is a '
                            f'{type(leaf).__name__}, not an array.')


def check_like(expected, actual, path: Tuple[str, ...], where: str):
  """``actual`` (a state dict read from a file) checked against ``expected`` (the state dict of
  an abstract template: ``jax.ShapeDtypeStruct`` leaves): same keys, shapes and dtype families.
  Returns it with float leaves cast to the template's dtype; CheckpointError names the path."""
  here = _tree.join_keys(path) or '/'
  if isinstance(expected, dict):
    if not isinstance(actual, dict):
      raise CheckpointError(f'{where}: at {here} a dict with keys {sorted(expected)} is '
                            f'expected, not a {type(actual).__name__}.')
    if set(map(str, actual)) != set(expected):
      raise CheckpointError(f'{where}: at {here} the keys are {sorted(map(str, actual))}, '
                            f'not {sorted(expected)}.')
    check_leaves(actual, path, where)
    return {k: check_like(expected[k], actual[k], path + (k,), where) for k in expected}
  if expected is None:
    if actual is not None:
      raise CheckpointError(f'{where}: at {here} None is expected, not {_what(actual)}.')
    return None
  shape = tuple(np.shape(expected))
  dtype = np.dtype(expected.dtype)
  if not _is_array(actual) and isinstance(actual, (bool, int, float, complex)) and not shape:
    actual = np.asarray(actual)
  if not _is_array(actual) or tuple(np.shape(actual)) != shape or (
      _tree.dtype_kind(np.dtype(actual.dtype)) != _tree.dtype_kind(dtype)):
    raise CheckpointError(f'{where}: at {here} an array of shape {shape} and dtype {dtype.name} '
                          f'is expected, not {_what(actual)}.')
  if np.dtype(actual.dtype) != dtype:
    try:
      with np.errstate(over='raise', invalid='raise'):
        actual = np.asarray(actual).astype(dtype)
    except (OverflowError, FloatingPointError):
      raise CheckpointError(f'{where}: at {here} the values do not fit in {dtype.name}.') from None
  return actual


def _what(value) -> str:
  if _is_array(value):
    return f'an array of shape {tuple(np.shape(value))} and dtype {np.dtype(value.dtype).name}'
  return f'a {type(value).__name__}'


def check_step(step, where: str, what: str = 'the step') -> np.ndarray:
  """The legacy step as an int32 scalar; CheckpointError (naming ``where``, ``what`` and the
  value) unless it is an integer in [0, int32 max]."""
  if isinstance(step, bool) or not (_is_array(step) or isinstance(step, (int, float))):
    raise CheckpointError(f'{where}: {what} must be an integer, not {_what(step)}.')
  value = np.asarray(step)
  if value.ndim or _tree.dtype_kind(value.dtype) not in 'iu':
    shown = (f'{value.item()!r} ({"a Python float" if isinstance(step, float) else value.dtype.name})'
             if not value.ndim else _what(step))
    raise CheckpointError(f'{where}: {what} must be an integer scalar, not {shown}.')
  if not 0 <= int(value) <= np.iinfo(np.int32).max:
    raise CheckpointError(f'{where}: {what} {int(value)} is not in [0, 2**31 - 1].')
  return np.asarray(value, np.int32)


def permutation(forward, leaves) -> Optional[List[int]]:
  """For a ``forward(list of arrays) -> list of arrays`` that only reorders its inputs (its
  jaxpr has no equation and returns each input once): ``order`` with input ``k`` being output
  ``order[k]``; None for any other function."""
  jaxpr = jax.make_jaxpr(forward)(leaves).jaxpr
  outputs = list(jaxpr.outvars)
  if jaxpr.eqns or len(outputs) != len(jaxpr.invars):
    return None
  order = []
  for var in jaxpr.invars:
    found = [i for i, out in enumerate(outputs) if out is var]
    if len(found) != 1:
      return None
    order.append(found[0])
  return order
