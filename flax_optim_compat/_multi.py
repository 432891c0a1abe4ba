"""``MultiOptimizer`` plumbing: traversals -> per-leaf group labels, masked group trees.

A legacy ``MultiOptimizer((traversal_0, def_0), (traversal_1, def_1), ...)`` updates the leaves
each traversal selects with that pair's optimizer. Here every leaf gets a label: the index of
the one traversal that selects it, or ``'unmatched'``. The traversals run once per target
structure on a tree of stand-ins (:class:`LeafInfo`), never on values, so the labels are static
under ``jax.jit``. Group ``i`` then sees the target with ``optax.MaskedNode`` (a node without
leaves, as inside ``optax.masked``) in place of every leaf that is not its own
(:func:`masked`), and its results are read back by position (:func:`group_leaves`).
"""
from typing import Any, List, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax

from . import _tree

__all__ = ['LeafInfo', 'UNMATCHED', 'group_label', 'structure_key', 'param_labels',
           'check_hyper_params', 'masked', 'group_leaves']

UNMATCHED = 'unmatched'
OVERLAP_MESSAGE = 'Multiple optimizers match the same leaves : '


def group_label(index: int) -> str:
  """The optax label of the ``index``-th (traversal, optimizer) pair."""
  return str(index)


class LeafInfo:
  """What a traversal's ``filter_fn`` sees in place of a parameter: its shape and dtype.

  Legacy ``MultiOptimizer`` called ``filter_fn(path, value)`` with ``value`` being, depending
  on the moment, a private shape/dtype wrapper, the parameter, its gradient, its optimizer
  state or ``None``; only path-based filters worked reliably. We call the traversals once per
  target structure (also at trace time under ``jax.jit``) on a tree of ``LeafInfo`` objects,
  so a filter may rely on ``value.shape``, ``value.ndim``, ``value.size`` and
  ``value.dtype``, and never sees concrete values.
  """
  __slots__ = ('shape', 'dtype', 'index')

  def __init__(self, shape, dtype, index):
    self.shape = tuple(shape)
    self.dtype = dtype
    self.index = index

  @property
  def ndim(self) -> int:
    return len(self.shape)

  @property
  def size(self) -> int:
    return int(np.prod(self.shape, dtype=np.int64))

  def __repr__(self):
    return f'LeafInfo(shape={self.shape}, dtype={self.dtype})'


def leaf_dtype(leaf):
  if hasattr(leaf, 'dtype'):
    return leaf.dtype
  try:
    return jnp.result_type(leaf)
  except TypeError:
    return None


def structure_key(tree):
  """What the labels of ``tree`` may depend on: its structure, leaf shapes and dtypes."""
  leaves, treedef = jax.tree_util.tree_flatten(tree)
  return treedef, tuple((np.shape(leaf), str(leaf_dtype(leaf))) for leaf in leaves)


def param_labels(traversals: Sequence[Any], params) -> List[str]:
  """Per leaf of ``params`` (flatten order): the label of the traversal that selects it.

  A traversal may yield a leaf or a whole sub-tree (e.g. ``t_identity['encoder']``), which
  selects every leaf in it. A leaf selected twice by one traversal counts once.

  Raises:
    ValueError: a leaf is selected by more than one traversal (the message names the leaf
      paths and the indices of the pairs that select them).
  """
  leaves, treedef = jax.tree_util.tree_flatten(params)
  infos = [LeafInfo(np.shape(leaf), leaf_dtype(leaf), i) for i, leaf in enumerate(leaves)]
  stand_ins = jax.tree_util.tree_unflatten(treedef, infos)
  by_id = {id(info): info.index for info in infos}
  owners: List[List[int]] = [[] for _ in leaves]
  for group, traversal in enumerate(traversals):
    selected = set()
    for value in traversal.iterate(stand_ins):
      for found in jax.tree_util.tree_leaves(value):
        if id(found) in by_id:
          selected.add(by_id[id(found)])
    for index in selected:
      owners[index].append(group)
  overlap = {path: sorted(groups)
             for path, groups in zip(_tree.tree_paths(params), owners) if len(groups) > 1}
  if overlap:
    # Legacy's message: the target's tree with the list of matching pair indices at every leaf.
    legacy_tree = treedef.unflatten([sorted(groups) for groups in owners])
    raise ValueError(
        f'{OVERLAP_MESSAGE}{legacy_tree} (leaf path: indices of the (traversal, optimizer) '
        f'pairs selecting it: {overlap}; each leaf may belong to one pair at most).')
  return [group_label(groups[0]) if groups else UNMATCHED for groups in owners]


# ----------------------------------------------------------------------------- hyper-params


def check_hyper_params(sub_optimizers, hyper_params) -> list:
  """``hyper_params`` as a list, after checking it has one right-typed entry per group.

  Legacy accepted any sequence and truncated a short one silently (the trailing groups lost
  their state); we raise before anything is computed.

  Raises:
    TypeError: not a list/tuple, or an entry is not of its sub-optimizer's hyper-param class.
    ValueError: wrong length.
  """
  names = ', '.join(type(opt).__name__ for opt in sub_optimizers)
  if not isinstance(hyper_params, (list, tuple)):
    raise TypeError(
        f'MultiOptimizer hyper_params must be a list with one hyper-params object per '
        f'(traversal, optimizer) pair ({len(sub_optimizers)}: {names}), got '
        f'{type(hyper_params).__name__}.')
  if len(hyper_params) != len(sub_optimizers):
    raise ValueError(
        f'MultiOptimizer hyper_params must have one entry per (traversal, optimizer) pair: '
        f'expected {len(sub_optimizers)} ({names}), got {len(hyper_params)}.')
  for i, (hp, opt) in enumerate(zip(hyper_params, sub_optimizers)):
    expected = type(opt.hyper_params)
    if not isinstance(hp, expected):
      raise TypeError(
          f'MultiOptimizer hyper_params[{i}] must be a {expected.__name__} (the hyper-params '
          f'of sub-optimizer {i}, {type(opt).__name__}), got {type(hp).__name__}.')
  return list(hyper_params)


# ----------------------------------------------------------------------------- group trees


def masked(treedef, labels: List[str], label: str, leaves: list):
  """The tree of ``leaves`` with ``optax.MaskedNode`` at every leaf not labelled ``label``."""
  return treedef.unflatten([leaf if l == label else optax.MaskedNode()
                            for l, leaf in zip(labels, leaves)])


def group_leaves(treedef, labels: List[str], label: str, masked_tree, what: str) -> dict:
  """``{leaf position: value}`` of group ``label`` from a tree over its masked target."""
  positions = [j for j, l in enumerate(labels) if l == label]
  structure = jax.tree_util.tree_structure(
      masked(treedef, labels, label, [0] * len(labels)))
  try:
    values = structure.flatten_up_to(masked_tree)
  except (ValueError, TypeError) as e:
    raise ValueError(f'MultiOptimizer: group {label} returned {what} that do not mirror its '
                     f'parameters ({e}).') from None
  return dict(zip(positions, values))
