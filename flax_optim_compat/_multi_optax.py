"""``MultiOptimizer`` as ``optax.multi_transform``: the transform of given group transforms, its
state from the legacy state and back, each group through its sub-optimizer's own bridge.

Labels: ``'0'``, ``'1'``, ... for the (traversal, optimizer) pairs in order, ``'unmatched'`` for
the params no traversal selects, which ``optax.set_to_zero()`` leaves untouched (as legacy).
"""
from typing import Any, List, Optional, Sequence

import jax
import optax

from . import _multi

__all__ = ['group_transforms', 'transform', 'optax_state', 'legacy_param_states', 'first_count']


def group_transforms(multi, txs: Optional[Sequence[Any]], hyper_params) -> List[Any]:
  """One transformation per group: ``txs`` (checked), or each sub-optimizer's own."""
  if txs is None:
    hps = _multi.check_hyper_params(multi.sub_optimizers, hyper_params)
    return [opt.optax_transform(hp) for opt, hp in zip(multi.sub_optimizers, hps)]
  txs = list(txs) if isinstance(txs, (list, tuple)) else None
  if txs is None or len(txs) != len(multi.sub_optimizers):
    raise ValueError(
        f'MultiOptimizer with {len(multi.sub_optimizers)} groups needs one optax '
        f'transformation per group, in order (a list of {len(multi.sub_optimizers)}).')
  for i, tx in enumerate(txs):
    if not (callable(getattr(tx, 'init', None)) and callable(getattr(tx, 'update', None))):
      raise TypeError(f'MultiOptimizer group {i}: {type(tx).__name__} is not an optax '
                      'transformation.')
  return txs


def transform(labels_of, txs) -> optax.GradientTransformation:
  """``optax.multi_transform`` of the group transforms; ``labels_of(tree)`` labels each leaf."""
  transforms = {_multi.UNMATCHED: optax.set_to_zero()}
  for i, tx in enumerate(txs):
    transforms[_multi.group_label(i)] = tx
  label_tree = lambda tree: jax.tree_util.tree_structure(tree).unflatten(labels_of(tree))
  return optax.multi_transform(transforms, label_tree)


def _group_params(multi, params, labels):
  treedef = jax.tree_util.tree_structure(params)
  leaves = treedef.flatten_up_to(params)
  return treedef, [_multi.masked(treedef, labels, _multi.group_label(i), leaves)
                   for i in range(len(multi.sub_optimizers))]


def optax_state(multi, tx, txs, params, state, labels, group_states):
  """The ``multi_transform`` state of ``tx`` (built from ``txs``) holding the legacy ``state``."""
  template = jax.eval_shape(tx.init, params)
  _, group_params = _group_params(multi, params, labels)
  inner = dict(template.inner_states)
  for i, (opt, group_tx) in enumerate(zip(multi.sub_optimizers, txs)):
    label = _multi.group_label(i)
    try:
      group_state = opt.optax_state(group_params[i],
                                    state.replace(param_states=group_states[i]), tx=group_tx)
    except ValueError as e:
      raise type(e)(f'MultiOptimizer group {label} ({opt!r}): {e}') from None
    inner[label] = inner[label]._replace(inner_state=group_state)
  return template._replace(inner_states=inner)


def legacy_param_states(multi, txs, params, opt_state, step, labels) -> list:
  """Each group's legacy ``param_states`` read from a ``multi_transform`` state."""
  inner = getattr(opt_state, 'inner_states', None)
  if not isinstance(inner, dict):
    raise ValueError('MultiOptimizer: the optax state is not an optax.multi_transform state '
                     f'(got {type(opt_state).__name__}).')
  _, group_params = _group_params(multi, params, labels)
  out = []
  for i, (opt, group_tx) in enumerate(zip(multi.sub_optimizers, txs)):
    label = _multi.group_label(i)
    if label not in inner:
      raise ValueError(f'MultiOptimizer: the multi_transform state has no group {label!r} '
                       f'(it has {sorted(inner)}); groups are labelled 0, 1, ... in order.')
    group_state = getattr(inner[label], 'inner_state', inner[label])
    try:
      out.append(opt.legacy_state(group_params[i], group_state, step=step,
                                  tx=group_tx).param_states)
    except ValueError as e:
      raise type(e)(f'MultiOptimizer group {label} ({opt!r}): {e}') from None
  return out


def first_count(opt_state) -> Optional[Any]:
  """The first ``count`` field anywhere in ``opt_state`` (None if there is none)."""
  for key_path, leaf in jax.tree_util.tree_flatten_with_path(opt_state)[0]:
    if key_path and getattr(key_path[-1], 'name', None) == 'count':
      return leaf
  return None
