"""Checkpoints saved with a leading device axis on every leaf (``jax_utils.replicate(optimizer)``
written without unreplicating): recognised, checked and reduced to one replica."""
from typing import Optional

import numpy as np

from . import _state_dict
from .. import _tree
from ._codec import CheckpointError


def _shape(leaf):
  shape = getattr(leaf, 'shape', None)
  return None if shape is None else tuple(shape)


def count(optimizer_node) -> Optional[int]:
  """The number of replicas of a legacy ``{'target', 'state'}`` node, or None if not replicated.

  Legacy's ``step`` is a scalar; a replicated optimizer's is ``int32[N]`` and every array leaf
  has the leading axis ``N``.
  """
  state = optimizer_node.get('state') if isinstance(optimizer_node, dict) else None
  step_shape = _shape(state.get('step')) if isinstance(state, dict) else None
  if not step_shape or len(step_shape) != 1:
    return None
  n = step_shape[0]
  for _, leaf in _state_dict.leaves(optimizer_node):
    shape = _shape(leaf)
    if shape is not None and (not shape or shape[0] != n):
      return None
  return n


def take(tree, n: int, replica: Optional[int], where: str):
  """``tree`` with replica ``replica`` of every leaf with the leading axis ``n``.

  With ``replica=None`` the replicas must agree (they do after a ``pmap`` step that averages
  the gradients) and replica 0 is taken.

  Raises:
    CheckpointError: ``replica`` out of range, or replicas that differ (naming the first leaf).
  """
  if replica is not None and not 0 <= replica < n:
    raise CheckpointError(f'{where}: --replica {replica} is out of range: the file holds {n} '
                          f'replicas (0 to {n - 1}).')

  def reduce(path, leaf):
    shape = _shape(leaf)
    if shape is None or not shape or shape[0] != n:
      return leaf
    if replica is None:
      first = np.asarray(leaf[0])
      for i in range(1, n):
        if not np.array_equal(np.asarray(leaf[i]), first, equal_nan=True):
          raise CheckpointError(
              f'{where}: the replicas differ at {_tree.join_keys(path)} (replica {i} is not '
              'replica 0); choose one with --replica N (replica=N).')
    return leaf[0 if replica is None else replica]

  def walk(node, path):
    if isinstance(node, dict):
      return {k: walk(v, path + (str(k),)) for k, v in node.items()}
    return reduce(path, node)

  return walk(tree, ())
