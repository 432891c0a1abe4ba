"""Walking checkpoint state dicts (where the optimizer sits, leaf paths) and restore templates."""
from typing import Any, List, Tuple

import jax
import numpy as np
from flax import serialization

from . import _layouts
from . import _tree
from ._codec import CheckpointError


def is_optimizer(node) -> bool:
  """Whether ``node`` is a legacy ``Optimizer.state_dict()``: ``{'target', 'state'}``."""
  if not isinstance(node, dict) or set(node) != {'target', 'state'}:
    return False
  state = node['state']
  return isinstance(state, dict) and (
      {'step', 'param_states'} <= set(state) or _layouts.is_per_group_multi_state(state))


def find_optimizers(tree, path=()) -> List[Tuple[str, ...]]:
  """The key paths of every legacy optimizer in ``tree`` (outermost ones; not inside another)."""
  if is_optimizer(tree):
    return [path]
  if isinstance(tree, dict):
    return [p for k, v in tree.items() for p in find_optimizers(v, path + (str(k),))]
  return []


def at(tree, path):
  """The node of ``tree`` at the key path ``path``."""
  for key in path:
    tree = tree[key]
  return tree


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
