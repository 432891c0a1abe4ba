"""``MultiOptimizer`` plumbing: traversals -> labels, groups -> one ``optax.multi_transform``.

A legacy ``MultiOptimizer((traversal_0, def_0), (traversal_1, def_1), ...)`` is, in optax terms,
``optax.multi_transform({'0': group(def_0), '1': group(def_1), ..., 'unmatched':
optax.set_to_zero()}, labels)``:

* ``labels`` mirrors the target; a leaf's label names the one traversal that selects it, or
  ``'unmatched'``. The traversals are run once per target structure on a tree of stand-ins
  (:class:`LeafInfo`), never on values, so the labels are static under ``jax.jit``.
* ``group(def_i)`` (:func:`group_transform`) is an optax transform whose state is the legacy
  ``OptimizerState`` of ``def_i`` over the masked target (``optax.MaskedNode`` where the leaf
  belongs to another group). Built-in optimizers compute their updates with their own optax
  transform (``_adapter.optax_update``), so a group updates its leaves exactly as the
  stand-alone optimizer would; any other ``OptimizerDef`` (WeightNorm, a user-written per-leaf
  subclass, a nested MultiOptimizer) runs its legacy ``apply_gradient`` and reports
  ``new_params - params`` as its update (``MultiOptimizer.apply_gradient`` takes those new
  params as they are, so they are not re-rounded).
* unmatched leaves get ``optax.set_to_zero()`` (not ``optax.masked``'s pass-through of the
  raw gradient, the pitfall of the update guide's recipe, spec 12.5).
* the legacy ``param_states`` (one tree, ``None`` for unmatched leaves) is split into the
  groups' masked states before the update and merged back afterwards (:func:`split_states`,
  :func:`merge_states`).
"""
from typing import Any, Callable, Dict, List, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax

from . import _adapter
from . import _tree

__all__ = ['LeafInfo', 'UNMATCHED', 'group_label', 'leaf_dtype', 'structure_key',
           'param_labels', 'runs_optax_natively', 'group_transform', 'multi_transform',
           'check_hyper_params', 'split_states', 'group_leaves',
           'merge_states']

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
    raise ValueError(
        f'{OVERLAP_MESSAGE}{overlap} (leaf path: indices of the (traversal, optimizer) pairs '
        'selecting it; each leaf may belong to one pair at most).')
  return [group_label(groups[0]) if groups else UNMATCHED for groups in owners]


# ----------------------------------------------------------------------------- groups


def runs_optax_natively(opt_def) -> bool:
  """True for defs whose whole-tree step is the adapter's (all built-ins but WeightNorm)."""
  from . import base  # pylint: disable=g-import-not-at-top  (base imports this module)
  cls = type(opt_def)
  # pylint: disable=protected-access
  return (opt_def._has_optax_transform() and not opt_def._is_per_leaf()
          and cls.init_state is base.OptimizerDef.init_state
          and cls.apply_gradient is base.OptimizerDef.apply_gradient)


def group_transform(opt_def, hyper_params,
                    init_fn: Optional[Callable[[Any], Any]] = None,
                    new_params_out: Optional[dict] = None) -> optax.GradientTransformation:
  """``opt_def`` as an optax transform whose state is its legacy ``OptimizerState``.

  Args:
    opt_def: any ``OptimizerDef``.
    hyper_params: the hyper-params of this step (may hold traced values).
    init_fn: replaces ``opt_def.init_state`` as the transform's ``init`` (used to rebuild an
      optax state from legacy states that already exist).
    new_params_out: for a def without a native optax update, ``update`` also stores the new
      params it computed under ``'params'`` here, so a caller that wants the target itself
      can take them as they are instead of re-rounding ``params + (new - params)``.

  Returns:
    An ``optax.GradientTransformation``; ``update`` needs ``params``.
  """
  native = runs_optax_natively(opt_def)

  def init(params):
    return opt_def.init_state(params) if init_fn is None else init_fn(params)

  def update(updates, state, params=None):
    if params is None:
      raise ValueError(f'{type(opt_def).__name__} as an optax transform needs params: call '
                       'update(updates, state, params).')
    if native:
      _tree.check_grads(params, updates)
      new_updates, new_param_states = _adapter.optax_update(
          opt_def, hyper_params, params, state, updates)
      return new_updates, state.replace(step=state.step + 1, param_states=new_param_states)
    # Only the new params exist here; their difference to the old ones is the update
    # (exact whenever old and new lie within a factor 2 of each other, else 1 ulp).
    new_params, new_state = opt_def.apply_gradient(hyper_params, params, state, updates)
    if new_params_out is not None:
      new_params_out['params'] = new_params
    new_updates = jax.tree_util.tree_map(lambda new, old: new - old, new_params, params)
    return new_updates, new_state

  return optax.GradientTransformation(init, update)


def multi_transform(sub_optimizers, hyper_params, labels,
                    init_fns: Optional[Dict[str, Callable[[Any], Any]]] = None,
                    new_params_out: Optional[Dict[str, dict]] = None
                    ) -> optax.GradientTransformation:
  """The ``optax.multi_transform`` of the groups; unmatched leaves get ``set_to_zero``.

  Args:
    sub_optimizers: the groups' ``OptimizerDef`` s.
    hyper_params: one hyper-params object per group.
    labels: a label tree mirroring the params, or a function ``params -> labels``.
    init_fns: optional ``{label: init}`` overriding the groups' ``init``;
    new_params_out: optional ``{label: dict}``; see :func:`group_transform`.
  """
  init_fns = init_fns or {}
  new_params_out = new_params_out or {}
  transforms = {UNMATCHED: optax.set_to_zero()}
  for i, (opt_def, hp) in enumerate(zip(sub_optimizers, hyper_params)):
    label = group_label(i)
    transforms[label] = group_transform(opt_def, hp, init_fns.get(label),
                                        new_params_out.get(label))
  return optax.multi_transform(transforms, labels)


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


# ----------------------------------------------------------------------------- legacy states


def _masked_treedef(treedef, labels: List[str], label: str):
  """Structure of the params with ``optax.MaskedNode`` at every leaf not labelled ``label``
  (what ``optax.masked`` hands the group's transform)."""
  masked = treedef.unflatten([0 if l == label else optax.MaskedNode() for l in labels])
  return jax.tree_util.tree_structure(masked)


def split_states(treedef, labels: List[str], leaf_states: list, label: str):
  """Group ``label``'s legacy states over its masked params (``MaskedNode`` elsewhere)."""
  return treedef.unflatten([s if l == label else optax.MaskedNode()
                            for l, s in zip(labels, leaf_states)])


def group_leaves(treedef, labels: List[str], label: str, masked_tree, what: str) -> dict:
  """``{leaf position: value}`` of group ``label`` from a tree over its masked params."""
  try:
    values = _masked_treedef(treedef, labels, label).flatten_up_to(masked_tree)
  except (ValueError, TypeError) as e:
    raise ValueError(f'MultiOptimizer: group {label} returned {what} that do not mirror its '
                     f'parameters ({e}).') from None
  return dict(zip([j for j, l in enumerate(labels) if l == label], values))


def merge_states(treedef, labels: List[str], multi_state, sub_optimizers):
  """The legacy ``param_states`` tree from the groups' states in a ``multi_transform`` state.

  ``multi_state.inner_states[label].inner_state`` is group ``label``'s legacy
  ``OptimizerState`` (the public fields of ``optax.PartitionState`` / ``optax.MaskedState``).
  """
  merged = [None] * len(labels)
  for i, opt_def in enumerate(sub_optimizers):
    label = group_label(i)
    group_state = multi_state.inner_states[label].inner_state
    found = group_leaves(treedef, labels, label, group_state.param_states,
                         f'({type(opt_def).__name__}) states')
    for j, s in found.items():
      merged[j] = s
  return treedef.unflatten(merged)
