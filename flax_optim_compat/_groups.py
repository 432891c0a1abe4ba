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
import jax.numpy as jnp
import numpy as np
import optax

from . import _state_check
from . import _tree

__all__ = ['UNMATCHED', 'stand_in', 'param_labels', 'masked', 'group_leaves', 'group_transforms',
           'multi_transform_source', 'transform', 'optax_state', 'legacy_states',
           'is_transformation', 'is_user_multi', 'label_groups', 'label_transform']

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
    if not is_transformation(tx):
      raise TypeError(f'MultiOptimizer group {i}: {type(tx).__name__} is not an optax '
                      'transformation.')
  return txs


def is_transformation(tx) -> bool:
  """``tx`` has an ``init`` and an ``update`` (an optax transformation, not a list of them)."""
  return callable(getattr(tx, 'init', None)) and callable(getattr(tx, 'update', None))


def is_user_multi(txs) -> bool:
  """``txs`` is one transformation (a user's own ``optax.multi_transform``), not one per group
  (an ``optax.GradientTransformation`` is a tuple: its ``init`` and ``update`` tell)."""
  return txs is not None and is_transformation(txs)


def multi_transform_source(group_sources: Sequence[str], labels: str = 'param_labels') -> str:
  """The Python source of :func:`transform` given each group's source, in order, and the
  source of the function that labels the params (``labels``).

  Examples:
    >>> multi_transform_source(['optax.sgd(learning_rate=0.1)'])
    "optax.multi_transform({'0': optax.sgd(learning_rate=0.1), 'unmatched': optax.set_to_zero()}, param_labels)"
  """
  inner = ', '.join(f"'{i}': {text}" for i, text in enumerate(group_sources))
  return (f"optax.multi_transform({{{inner}, '{UNMATCHED}': optax.set_to_zero()}}, "
          f'{labels})')


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


def legacy_states(sub_optimizers, txs, group_params, opt_state, step, names=None) -> list:
  """Each group's legacy ``param_states`` read from a ``multi_transform`` state.

  ``names``: the label of each group in ``opt_state`` (default ``'0'``, ``'1'``, ...); a group
  named None keeps no state there (its legacy state is its ``init_state``).
  """
  inner = getattr(opt_state, 'inner_states', None)
  if not isinstance(inner, dict):
    raise ValueError('MultiOptimizer: the optax state is not an optax.multi_transform state '
                     f'(got {type(opt_state).__name__}).')
  names = [str(i) for i in range(len(sub_optimizers))] if names is None else names
  out = []
  for i, (opt, tx) in enumerate(zip(sub_optimizers, txs)):
    if names[i] is None:
      out.append(opt.init_state(group_params[i]).param_states)
      continue
    if names[i] not in inner:
      raise ValueError(f'MultiOptimizer: the multi_transform state has no group {names[i]!r} '
                       f'(it has {sorted(inner)}); groups are labelled 0, 1, ... in order.')
    with _in_group(i, opt):
      out.append(opt.legacy_state(group_params[i], getattr(inner[names[i]], 'inner_state',
                                                           inner[names[i]]),
                                  step=step, tx=tx).param_states)
  return out


# ----------------------------------------------------------------------------- a user's multi_transform
# A user's own `optax.multi_transform(transforms, param_labels)` names its labels freely and
# decides them by its own function or tree. Which params a label covers is read from the
# transformation itself: `tx.init` wraps each label's state in an `optax.MaskedState` whose
# trees hold `optax.MaskedNode` at the params outside the label (optax >= 0.2.5). A label whose
# transformation keeps no per-parameter state shows no params there; such labels share the
# params no other label keeps state for.


def _few(paths) -> str:
  paths = list(paths)
  return ', '.join(paths[:3]) + (f' (and {len(paths) - 3} more)' if len(paths) > 3 else '')


def _covered(node, treedef) -> set:
  """Positions of the params a state (sub)tree keeps leaves for: its subtrees that mirror the
  params, ``optax.MaskedNode`` (no leaves) at the params it keeps nothing for."""
  if not jax.tree_util.tree_leaves(node):
    return set()
  try:
    values = treedef.flatten_up_to(node)
  except (ValueError, TypeError):
    values = None
  if values is not None:
    return {j for j, v in enumerate(values) if jax.tree_util.tree_leaves(v)}
  if jax.tree_util.treedef_is_leaf(jax.tree_util.tree_structure(node)):
    return set()
  children = jax.tree_util.tree_flatten(node, is_leaf=lambda x: x is not node)[0]
  return set().union(*(_covered(child, treedef) for child in children))


def _inner_states(tx, params) -> dict:
  """``{label: MaskedState}`` of ``jax.eval_shape(tx.init, params)``; ValueError if ``tx`` is
  not an ``optax.multi_transform``."""
  try:
    template = jax.eval_shape(tx.init, params)
  except Exception as e:  # pylint: disable=broad-except  # the user's labels or transforms
    raise ValueError(f'the multi_transform given cannot init the file\'s params '
                     f'({type(e).__name__}: {e}).') from None
  inner = getattr(template, 'inner_states', None)
  if not isinstance(inner, dict) or not all(isinstance(v, optax.MaskedState)
                                            for v in inner.values()):
    raise ValueError('a MultiOptimizer converts into one optax transformation per group '
                     '(a list) or into one optax.multi_transform of your own; the tx given '
                     f'is neither (its state is a {type(template).__name__}).')
  return inner


def label_groups(tx, params, labels, names) -> dict:
  """``{label of tx: legacy group label}`` of a user's ``optax.multi_transform``.

  Each label that keeps per-parameter state continues the one legacy group (``labels``: each
  leaf's, from :func:`param_labels`) whose params it covers exactly; the labels that keep none
  share the remaining params: one such label continues their one group (or ``UNMATCHED``);
  several are left unmapped (None) when none of them keeps any state at all.

  Args:
    tx: the user's ``optax.multi_transform``.
    params: the params (the legacy target).
    labels: the legacy label of each leaf of ``params`` (flatten order).
    names: each group's name in messages (``'group 0 (Adam(...))'``).

  Raises:
    ValueError: one line naming the label(s) and the params, where the labels do not map
      one to one onto the legacy groups.
  """
  inner = _inner_states(tx, params)
  treedef = jax.tree_util.tree_structure(params)
  paths = _tree.tree_paths(params)
  groups = {}
  for j, g in enumerate(labels):
    groups.setdefault(g, set()).add(j)
  where = lambda g: names[int(g)] if g != UNMATCHED else 'the params no group selects'
  covered = {label: _covered(state.inner_state, treedef) for label, state in inner.items()}
  mapping, owner = {}, {}
  for label, cov in covered.items():
    if not cov:
      continue
    hit = sorted({labels[j] for j in cov})
    if len(hit) > 1:
      first = [next(paths[j] for j in sorted(cov) if labels[j] == g) for g in hit[:2]]
      raise ValueError(f'label {label!r} of the multi_transform covers params of two legacy '
                       f'groups: {first[0]} ({where(hit[0])}) and {first[1]} ({where(hit[1])}); '
                       'give each group its own label.')
    g = hit[0]
    if g == UNMATCHED:
      raise ValueError(f'label {label!r} of the multi_transform keeps state for '
                       f'{_few(paths[j] for j in sorted(cov))}, which no legacy group selects '
                       '(legacy never moved them): label them optax.set_to_zero().')
    if g in owner or cov != groups[g]:
      other = owner.get(g)
      rest = sorted(groups[g] - cov)
      split = (f'labels {other!r} and {label!r}' if other is not None
               else f'label {label!r} keeps state for {_few(paths[j] for j in sorted(cov))}, '
               f'not for {_few(paths[j] for j in rest)}:')
      raise ValueError(f'the multi_transform splits legacy {where(g)}: {split} one '
                       'label must cover exactly the params of one group.')
    mapping[label], owner[g] = g, label
  stateless = [label for label, cov in covered.items() if not cov]
  rest = sorted(set(range(len(labels))) - set().union(*covered.values()))
  rest_groups = sorted({labels[j] for j in rest})
  if len(stateless) == 1 and rest_groups:
    label = stateless[0]
    if len(rest_groups) > 1:
      first = [next(paths[j] for j in rest if labels[j] == g) for g in rest_groups[:2]]
      raise ValueError(f'label {label!r} of the multi_transform covers params of two legacy '
                       f'groups: {first[0]} ({where(rest_groups[0])}) and {first[1]} '
                       f'({where(rest_groups[1])}); give each group its own label.')
    mapping[label] = rest_groups[0]
  elif len(stateless) > 1:
    kept = [label for label in stateless if jax.tree_util.tree_leaves(inner[label])]
    if kept and rest:
      raise ValueError(
          f'labels {", ".join(repr(l) for l in stateless)} of the multi_transform keep no '
          'per-parameter state, so which params each covers cannot be read from it, and '
          f'{kept[0]!r} keeps a state (a count or hyper-parameters) that one legacy group must '
          f'fill ({_few(paths[j] for j in rest)}); write those groups\' labels as one '
          'label each with per-parameter state, or as one label.')
  for label, g in mapping.items():
    if g == UNMATCHED and jax.tree_util.tree_leaves(inner[label]):
      raise ValueError(f'label {label!r} of the multi_transform covers only params no legacy '
                       'group selects (legacy never moved them) but keeps a state: label them '
                       'optax.set_to_zero().')
  return mapping


def label_transform(tx, label, params, positions) -> optax.GradientTransformation:
  """Label ``label`` of the user's multi_transform ``tx`` as a transformation of its group's
  masked params (``optax.MaskedNode`` at the leaves in no position of ``positions``): what a
  group's own ``optax_state`` / ``legacy_state`` maps its state into and out of."""
  leaves, treedef = jax.tree_util.tree_flatten(params)

  def whole(tree, fill):
    try:
      values = treedef.flatten_up_to(tree)
    except (ValueError, TypeError):
      raise ValueError(f'label {label!r}: not a tree of its params') from None
    return treedef.unflatten([v if j in positions else fill(leaves[j])
                              for j, v in enumerate(values)])

  def init(group_params):
    return tx.init(whole(group_params, lambda x: x)).inner_states[label].inner_state

  def update(updates, state, group_params=None):
    full_params = params if group_params is None else whole(group_params, lambda x: x)
    start = tx.init(full_params)
    inner = dict(start.inner_states)
    inner[label] = inner[label]._replace(inner_state=state)
    new_updates, new_state = tx.update(whole(updates, jnp.zeros_like),
                                       start._replace(inner_states=inner), full_params)
    values = treedef.flatten_up_to(new_updates)
    return (treedef.unflatten([v if j in positions else optax.MaskedNode()
                               for j, v in enumerate(values)]),
            new_state.inner_states[label].inner_state)

  return optax.GradientTransformation(init, update)


def user_optax_state(sub_optimizers, tx, mapping, params, labels, group_params, group_states):
  """The state of the user's multi_transform ``tx`` holding each group's legacy state (its
  ``label_groups`` ``mapping``); a label mapped to no group keeps its own (leafless) init."""
  template = jax.eval_shape(tx.init, params)
  own = [label for label in template.inner_states if mapping.get(label, UNMATCHED) == UNMATCHED]
  # A label that continues no group keeps its own init (no per-parameter leaves: checked).
  inner = jax.jit(lambda p: {label: tx.init(p).inner_states[label] for label in own})(params)
  for label, g in mapping.items():
    if g == UNMATCHED:
      continue
    i = int(g)
    positions = {j for j, l in enumerate(labels) if l == g}
    try:
      with _in_group(i, sub_optimizers[i]):
        state = sub_optimizers[i].optax_state(
            group_params[i], group_states[i], tx=label_transform(tx, label, params, positions))
    except ValueError as e:
      raise type(e)(f'label {label!r} of the multi_transform covers the params of {e}') from None
    inner[label] = template.inner_states[label]._replace(inner_state=state)
  return template._replace(inner_states={label: inner[label] for label in template.inner_states})


def check_pairs(pairs, optimizer_def_class) -> None:
  """MultiOptimizer's arguments checked: at least one ``(traversal, optimizer_def)`` pair, each
  a traversal with ``iterate`` and an instance of ``optimizer_def_class`` (TypeError/ValueError
  naming the argument)."""
  if not pairs:
    raise ValueError('MultiOptimizer needs at least one (traversal, optimizer_def) pair.')
  for i, pair in enumerate(pairs):
    if not isinstance(pair, (tuple, list)) or len(pair) != 2:
      raise TypeError(f'MultiOptimizer argument {i} must be a (traversal, optimizer_def) '
                      f'pair, got {type(pair).__name__}.')
    traversal, opt_def = pair
    if not callable(getattr(traversal, 'iterate', None)):
      raise TypeError(f'MultiOptimizer argument {i}: {type(traversal).__name__} is not a '
                      'traversal (flax.traverse_util.Traversal, e.g. ModelParamTraversal).')
    if not isinstance(opt_def, optimizer_def_class):
      raise TypeError(f'MultiOptimizer argument {i}: {type(opt_def).__name__} is not an '
                      'OptimizerDef.')


def user_group_txs(tx, label_of_group, params, labels, count):
  """``(names, txs)``: for each of ``count`` legacy groups, the label of a user's own
  ``optax.multi_transform`` ``tx`` that continues it (``label_of_group``: ``{label: group}``,
  from :func:`label_groups`) and that label's transformation on the group's params (None where
  no label continues the group)."""
  by_group = {g: label for label, g in label_of_group.items()}
  names = [by_group.get(str(i)) for i in range(count)]
  txs = [None if name is None else label_transform(
      tx, name, params, {j for j, l in enumerate(labels) if l == str(i)})
         for i, name in enumerate(names)]
  return names, txs


def check_hyper_params(hyper_params, sub_optimizers) -> list:
  """``hyper_params`` as a list, checked: one object per pair, of its def's class (legacy
  truncated a short list silently and the trailing groups lost their state)."""
  names = ', '.join(type(opt).__name__ for opt in sub_optimizers)
  count = len(sub_optimizers)
  if not isinstance(hyper_params, (list, tuple)):
    raise TypeError(f'MultiOptimizer hyper_params must be a list with one hyper-params object '
                    f'per (traversal, optimizer) pair ({count}: {names}), got '
                    f'{_state_check.describe_value(hyper_params)}.')
  if len(hyper_params) != count:
    raise ValueError(f'MultiOptimizer hyper_params must have one entry per (traversal, '
                     f'optimizer) pair: expected {count} ({names}), got {len(hyper_params)}.')
  for i, (hp, opt) in enumerate(zip(hyper_params, sub_optimizers)):
    expected = type(opt.hyper_params)
    if not isinstance(hp, expected):
      raise TypeError(
          f'MultiOptimizer hyper_params[{i}] must be a {expected.__name__} (the hyper-params '
          f'of sub-optimizer {i}, {type(opt).__name__}), got '
          f'{_state_check.describe_value(hp)}.')
  return list(hyper_params)
