"""Walking checkpoint state dicts (where the optimizer sits, leaf paths) and checking what a file
holds (its keys and leaf types here; against a template by the strict restore's rules)."""
from typing import Any, List, Tuple

import jax
import numpy as np
from .. import _layouts
from .. import _state_check
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
  if node is None or ((isinstance(node, (bool, int, float, complex))
                       or _state_check.is_array(node, with_values=True))
                      and _tree.leaf_kind(node) in tuple('biufc')):
    return
  # Its type alone for a non-array: a string or bytes leaf may be long.
  what = (_state_check.describe_value(node) if _state_check.is_array(node)
          else f'a {type(node).__name__}')
  raise CheckpointError(f'{where}: the leaf at {_tree.join_keys(path) or "/"} is {what}, not a '
                        'number or an array of numbers.')


def check_arrays(tree, path: Tuple[str, ...], where: str) -> None:
  """CheckpointError unless every leaf under ``tree`` is an array of numbers or bools (a dict
  of them: e.g. params)."""
  check_leaves(tree, path, where)
  for leaf_path, leaf in leaves(tree, path):
    if not _state_check.is_array(leaf, with_values=True) and leaf != {}:
      raise CheckpointError(f'{where}: the leaf at {_tree.join_keys(leaf_path)} is a '
                            f'{type(leaf).__name__}, not an array.')


def check_like(expected, actual, path: Tuple[str, ...], where: str, *, orbax: bool = False):
  """``actual`` (a state dict read from a file) checked against ``expected`` (the state dict of
  an abstract template: ``jax.ShapeDtypeStruct`` leaves) by the strict restore's rules
  (``_state_check``): same keys and shapes, dtypes of the same family (cast to the template's
  where every value fits); with ``orbax``, None for an empty container. CheckpointError names
  the path."""
  check_leaves(actual, path, where)
  try:
    return _state_check.check(expected, _str_keys(actual), path,
                              may_cast=_state_check.same_family, orbax=orbax)
  except _state_check.Mismatch as e:
    raise CheckpointError(f'{where}: at {_tree.join_keys(e.path) or "/"} {e.detail}.') from None


def _str_keys(tree):
  """``tree`` with its keys as strings (:func:`check_leaves` made sure they stay distinct)."""
  if isinstance(tree, dict):
    return {str(k): _str_keys(v) for k, v in tree.items()}
  return tree


def check_step(step, where: str, what: str = 'the step') -> np.ndarray:
  """The legacy step as an int32 scalar; CheckpointError (naming ``where``, ``what`` and the
  value) unless it is an integer in [0, int32 max]."""
  if isinstance(step, bool) or not (_state_check.is_array(step, with_values=True)
                                    or isinstance(step, (int, float))):
    raise CheckpointError(f'{where}: {what} must be an integer, not '
                          f'{_state_check.describe_value(step)}.')
  value = np.asarray(step)
  if value.ndim or _tree.dtype_kind(value.dtype) not in 'iu':
    shown = (f'{value.item()!r} ({"a Python float" if isinstance(step, float) else value.dtype.name})'
             if not value.ndim else _state_check.describe_value(step))
    raise CheckpointError(f'{where}: {what} must be an integer scalar, not {shown}.')
  problem = _state_check.step_problem(value, what)
  if problem:
    raise CheckpointError(f'{where}: {problem}.')
  return np.asarray(value, np.int32)
