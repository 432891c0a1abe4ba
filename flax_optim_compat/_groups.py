"""``MultiOptimizer``'s groups (``base.MultiOptimizer`` is the class): which leaf belongs to
which (traversal, optimizer) pair, the masked tree each group sees, and the groups as one
``optax.multi_transform`` (its transform, and its state from the groups' legacy states and
back, each group through its sub-optimizer's own ``optax_state`` / ``legacy_state``).

Labels: ``'0'``, ``'1'``, ... for the pairs in order, ``UNMATCHED`` for the params no traversal
selects, which ``optax.set_to_zero()`` leaves untouched (as legacy).
"""
import contextlib
from typing import Any, Callable, List, Optional, Sequence

import jax
import numpy as np
import optax

from . import _tree

__all__ = ['UNMATCHED', 'stand_in', 'param_labels', 'masked', 'group_leaves', 'group_transforms',
           'multi_transform_source', 'transform', 'optax_state', 'legacy_states']

UNMATCHED = 'unmatched'


# ----------------------------------------------------------------------------- labels and masks
# Every leaf gets a label: the index of the one traversal that selects it, or 'unmatched'. The
# traversals run once per target structure on `jax.ShapeDtypeStruct` stand-ins, never on
# values, so the labels are static under `jax.jit`. Group `i` sees the target with
# `optax.MaskedNode` (a node without leaves, as inside `optax.masked`) at every leaf that is not
# its own, and its results are read back by position.


def stand_in(leaf) -> jax.ShapeDtypeStruct:
  try:
    dtype = _tree.dtype_of(leaf)
  except TypeError:
    dtype = np.dtype(object)
  return jax.ShapeDtypeStruct(np.shape(leaf), dtype)


def param_labels(traversals, params) -> List[str]:
  """Per leaf of ``params`` (flatten order): the label of the one traversal that selects it.

  Raises:
    ValueError: a leaf is selected by more than one traversal (legacy's message, then the
      leaf paths and the indices of the pairs that select them).
  """
  leaves, treedef = jax.tree_util.tree_flatten(params)
  stand_ins = [stand_in(leaf) for leaf in leaves]
  position = {id(s): j for j, s in enumerate(stand_ins)}
  tree = treedef.unflatten(stand_ins)
  owners: List[List[int]] = [[] for _ in leaves]
  for i, traversal in enumerate(traversals):
    selected = {position[id(x)] for value in traversal.iterate(tree)
                for x in jax.tree_util.tree_leaves(value) if id(x) in position}
    for j in selected:
      owners[j].append(i)
  overlap = {path: sorted(groups)
             for path, groups in zip(_tree.tree_paths(params), owners) if len(groups) > 1}
  if overlap:
    raise ValueError(
        f'Multiple optimizers match the same leaves : '
        f'{treedef.unflatten([sorted(groups) for groups in owners])} (leaf path: indices of '
        f'the (traversal, optimizer) pairs selecting it: {overlap}; each leaf may belong to '
        'one pair at most).')
  return [str(groups[0]) if groups else UNMATCHED for groups in owners]


def masked(treedef, labels, label, leaves):
  """The tree of ``leaves`` with ``optax.MaskedNode`` at every leaf not labelled ``label``."""
  return treedef.unflatten([leaf if l == label else optax.MaskedNode()
                            for l, leaf in zip(labels, leaves)])


def group_leaves(treedef, labels, label, masked_tree, what):
  """``(leaf position, value)`` pairs of group ``label`` from a tree over its masked target."""
  structure = jax.tree_util.tree_structure(masked(treedef, labels, label, [0] * len(labels)))
  try:
    values = structure.flatten_up_to(masked_tree)
  except (ValueError, TypeError) as e:
    raise ValueError(f'MultiOptimizer: group {label} returned {what} that do not mirror its '
                     f'parameters ({e}).') from None
  return zip([j for j, l in enumerate(labels) if l == label], values)


# ----------------------------------------------------------------------------- multi_transform


def group_transforms(sub_optimizers, txs: Optional[Sequence[Any]], hyper_params) -> List[Any]:
  """One transformation per group: ``txs`` (checked), or each sub-optimizer's own."""
  if txs is None:
    return [opt.optax_transform(hp) for opt, hp in zip(sub_optimizers, hyper_params)]
  txs = list(txs) if isinstance(txs, (list, tuple)) else None
  if txs is None or len(txs) != len(sub_optimizers):
    raise ValueError(
        f'MultiOptimizer with {len(sub_optimizers)} groups needs one optax '
        f'transformation per group, in order (a list of {len(sub_optimizers)}).')
  for i, tx in enumerate(txs):
    if not (callable(getattr(tx, 'init', None)) and callable(getattr(tx, 'update', None))):
      raise TypeError(f'MultiOptimizer group {i}: {type(tx).__name__} is not an optax '
                      'transformation.')
  return txs


def multi_transform_source(group_sources: Sequence[str]) -> str:
  """The Python source of :func:`transform` given each group's source, in order.

  Examples:
    >>> multi_transform_source(['optax.sgd(learning_rate=0.1)'])
    "optax.multi_transform({'0': optax.sgd(learning_rate=0.1), 'unmatched': optax.set_to_zero()}, param_labels)"
  """
  inner = ', '.join(f"'{i}': {text}" for i, text in enumerate(group_sources))
  return (f"optax.multi_transform({{{inner}, '{UNMATCHED}': optax.set_to_zero()}}, "
          'param_labels)')


def transform(txs, label_tree: Callable[[Any], Any]) -> optax.GradientTransformation:
  """``optax.multi_transform`` of the group transforms; ``label_tree(tree)`` labels each leaf."""
  transforms = {UNMATCHED: optax.set_to_zero()}
  transforms.update((str(i), tx) for i, tx in enumerate(txs))
  return optax.multi_transform(transforms, label_tree)


@contextlib.contextmanager
def _in_group(i, opt):
  """A group's ``ValueError`` names the group."""
  try:
    yield
  except ValueError as e:
    raise type(e)(f'MultiOptimizer group {i} ({opt!r}): {e}') from None


def optax_state(sub_optimizers, txs, label_tree, params, group_params, group_states):
  """The ``multi_transform`` state of ``txs`` holding each group's legacy ``OptimizerState``."""
  template = jax.eval_shape(transform(txs, label_tree).init, params)
  inner = dict(template.inner_states)
  for i, (opt, tx) in enumerate(zip(sub_optimizers, txs)):
    with _in_group(i, opt):
      state = opt.optax_state(group_params[i], group_states[i], tx=tx)
    inner[str(i)] = inner[str(i)]._replace(inner_state=state)
  return template._replace(inner_states=inner)


def legacy_states(sub_optimizers, txs, group_params, opt_state, step) -> list:
  """Each group's legacy ``param_states`` read from a ``multi_transform`` state."""
  inner = getattr(opt_state, 'inner_states', None)
  if not isinstance(inner, dict):
    raise ValueError('MultiOptimizer: the optax state is not an optax.multi_transform state '
                     f'(got {type(opt_state).__name__}).')
  out = []
  for i, (opt, tx) in enumerate(zip(sub_optimizers, txs)):
    if str(i) not in inner:
      raise ValueError(f'MultiOptimizer: the multi_transform state has no group {str(i)!r} '
                       f'(it has {sorted(inner)}); groups are labelled 0, 1, ... in order.')
    with _in_group(i, opt):
      out.append(opt.legacy_state(group_params[i], getattr(inner[str(i)], 'inner_state',
                                                           inner[str(i)]),
                                  step=step, tx=tx).param_states)
  return out
