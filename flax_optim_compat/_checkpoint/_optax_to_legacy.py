"""The way back: what ``convert`` wrote, read back, and a legacy state dict from an optax state.

A converted checkpoint (msgpack or orbax, flat or ``keep_layout``) holds one train state node;
its ``opt_state`` is restored against the transformation the legacy optimizer was converted
into (``_legacy_to_optax.targets``), for ``load_converted`` or for the legacy tree
``legacy_from_converted`` writes; ``to_legacy`` starts from params and an optax state in memory.
An empty optax state (``optax.EmptyState()``) is stored as ``{}`` by msgpack and read back as
None by orbax: both read alike here (``_state_check``'s rule).
"""
from typing import Any, Mapping, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import serialization

from . import _formats
from . import _legacy_to_optax
from . import _sources
from . import _state_dict
from .. import _tree
from ._codec import CheckpointError
from ..base import OptimizerDef


class ConvertedCheckpoint(NamedTuple):
  """``(params, opt_state, step)``: what :func:`load_converted` returns."""
  __module__ = 'flax_optim_compat.convert'
  params: Any
  opt_state: optax.OptState
  step: Any


def _converted_by() -> str:
  """The ``--to`` values whose output ``--to legacy`` reads back (``optax|train-state|orbax``),
  from the registered formats."""
  return '|'.join(f.name for f in _formats.all_formats() if not f.reads_converted)


def _read(source, optimizer_def, tx):
  """``(tree, where, path of the train state, params, opt_state, tx)`` of a converted file.

  The last ``tx`` is the one its ``opt_state`` belongs to, as ``optimizer_def.legacy_state``
  takes it (a list per group for a MultiOptimizer).
  """
  tree, where = _sources.read(source, mode='jax')
  if _state_dict.find_optimizers(tree):
    raise CheckpointError(f'{where} is already a legacy checkpoint; --to legacy converts what '
                          f'`convert --to {_converted_by()}` wrote.')
  found = _state_dict.find(tree, _state_dict.is_train_state) if isinstance(tree, dict) else []
  if len(found) != 1:
    raise CheckpointError(
        f'{where} has {"no" if not found else len(found)} {{"params", "opt_state"}} node'
        f'{"s" if found else ""}: --to legacy converts what `convert --to '
        f'{_converted_by()}` wrote.')
  node = _state_dict.at(tree, found[0])
  if 'step' in node:
    _state_dict.check_step(node['step'], f'{where}: at {_tree.join_keys(found[0] + ("step",))}')
  _state_dict.check_arrays(node['params'], found[0] + ('params',), where)
  params = jax.tree_util.tree_map(jnp.asarray, node['params'])
  if tx is None:
    full_tx, state_tx = _legacy_to_optax.default_targets(optimizer_def)[:2]
  else:
    # The warning points at convert.py's public function (two calls up from here).
    full_tx, state_tx = _legacy_to_optax.targets(optimizer_def, tx, stacklevel=4)[:2]
  try:
    template = jax.eval_shape(full_tx.init, params)
    raw = _state_dict.check_like(serialization.to_state_dict(template), node['opt_state'],
                                 found[0] + ('opt_state',), where, orbax=True)
    opt_state = serialization.from_state_dict(template, raw, name='opt_state')
  except (ValueError, KeyError, TypeError) as e:
    raise CheckpointError(f'{where}: its opt_state does not fit {optimizer_def!r} converted '
                          f'as by default or with this tx ({type(e).__name__}: {e}).') from None
  for key_path, leaf in _state_dict.leaves(raw, found[0] + ('opt_state',)):
    if key_path[-1] == 'count':
      _state_dict.check_step(leaf, f'{where}: at {_tree.join_keys(key_path)}', 'the count')
  opt_state = jax.tree_util.tree_map(jnp.asarray, opt_state)
  return tree, where, found[0], params, opt_state, state_tx


def load(source, optimizer_def, tx) -> ConvertedCheckpoint:
  """``(params, opt_state, step)`` of a converted source (``step`` None where it has none)."""
  tree, _, path, params, opt_state, _ = _read(source, optimizer_def, tx)
  step = _state_dict.at(tree, path).get('step')
  return ConvertedCheckpoint(params, opt_state,
                             None if step is None else _state_dict.check_step(step, 'the file'))


def legacy_tree(source, optimizer_def, *, tx, step, optimizer_key: str) -> dict:
  """The legacy tree of a converted source, as ``convert.legacy_from_converted`` describes it.

  Its train state node becomes the legacy optimizer; the keys carried beside it (flat layout)
  go back beside the optimizer, under ``optimizer_key``.
  """
  if isinstance(source, Mapping):
    source = serialization.to_state_dict(dict(source))
  tree, where, node_path, params, opt_state, state_tx = _read(source, optimizer_def, tx)
  node = _state_dict.at(tree, node_path)
  if step is None and _tree.first_count(opt_state) is None:
    step = node.get('step')
  if step is None and _tree.first_count(opt_state) is None:
    raise CheckpointError(f'{where}: the optax state has no `count` and the file no `step`; '
                          'give the legacy step (--step, step=).')
  _legacy_to_optax.check_def(optimizer_def)
  legacy = legacy_state_dict(params, opt_state, optimizer_def,
                             step=None if step is None else np.asarray(step), tx=state_tx)
  siblings = {k: v for k, v in node.items() if k not in ('step', 'params', 'opt_state')}
  if siblings:
    legacy = {'step': node.get('step', legacy['state']['step']), optimizer_key: legacy,
              **siblings}
  return _state_dict.replace_at(tree, node_path, legacy)


def legacy_state_dict(params, opt_state, optimizer_def: OptimizerDef, *, step, tx) -> dict:
  """The legacy ``{'target', 'state'}`` state dict of params and a state of ``tx`` (default:
  the default target), as ``convert.to_legacy`` describes it (the caller checks
  ``optimizer_def``: ``_legacy_to_optax.check_def``)."""
  if step is not None:
    step = _state_dict.check_step(step, 'to_legacy')
  params = jax.tree_util.tree_map(jnp.asarray, params)
  if tx is None:
    tx = _legacy_to_optax.default_targets(optimizer_def)[1]
  try:
    state = optimizer_def.legacy_state(params, opt_state, step=step, tx=tx)
  except NotImplementedError as e:
    raise CheckpointError(f'{type(optimizer_def).__name__} has no optax state: {e}') from None
  except ValueError as e:
    raise CheckpointError(f'opt_state does not fit {optimizer_def!r}: {e}') from None
  return optimizer_def.state_dict(params, state)
