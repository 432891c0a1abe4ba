"""A legacy optimizer's state in the state of an optax transformation, and back (``convert``'s engine).

The optimizer is restored from its state dict by the def's strict restore; the transformation
it converts into (the *target*) is a given ``tx`` or the plain optax expression that continues
the legacy numbers (one per group of a MultiOptimizer); the state mapping itself is the def's
``optax_state`` / ``legacy_state``. The converted tree is the flat ``{'step', 'params',
'opt_state', ...}`` layout with the keys that sat beside the optimizer, or the file's own tree
with the optimizer node replaced (``keep_layout``). Every conversion's notes are one line each.
"""
import warnings
from typing import Any, List, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import serialization
from flax.training import train_state as flax_train_state

from .. import _adapter_state
from .. import _layouts
from . import _replicas
from . import _state_dict
from .. import _tree
from ._codec import CheckpointError
from ..base import MultiOptimizer
from ..base import Optimizer
from ..base import OptimizerDef


class ConversionWarning(UserWarning):
  """A conversion that works but does not continue the legacy numbers exactly (one line why)."""
  __module__ = 'flax_optim_compat.convert'  # where users import it from


class Conversion(NamedTuple):
  """What :func:`convert_checkpoint` produced.

  Attributes:
    train_state: the ``flax.training.train_state.TrainState`` continuing the legacy run (its
      ``step`` is the train state's own ``step`` where the file has one beside the optimizer).
    state_dict: the tree the writers store: ``{'step', 'params', 'opt_state', ...}`` with every
      key that sat beside the optimizer (flat layout), or the file's own tree with the
      optimizer node replaced by ``{'step', 'params', 'opt_state'}`` (``keep_layout``);
      ``opt_state`` is the optax state itself (NamedTuples), as orbax and flax restore it.
    load_with: the optax expression whose state ``opt_state`` is, as Python source (None for
      a ``tx`` given as an object); a MultiOptimizer's reads
      ``optax.multi_transform({'0': ..., 'unmatched': optax.set_to_zero()}, param_labels)``.
    notes: one-line remarks: fields that fit several optimizers, no exact plain optax,
      replicas reduced, keys carried beside the train state.
  """
  __module__ = 'flax_optim_compat.convert'
  train_state: Any
  state_dict: Any
  load_with: Optional[str]
  notes: Tuple[str, ...]


class OptaxCheckpoint(NamedTuple):
  """``(params, tx, opt_state)``: what :func:`to_optax` returns."""
  __module__ = 'flax_optim_compat.convert'
  params: Any
  tx: optax.GradientTransformation
  opt_state: optax.OptState


def restore(tree: dict, where: str, opt_def: OptimizerDef) -> Tuple[Optimizer, Tuple[str, ...]]:
  """``(optimizer, its key path)``: the one legacy optimizer of ``tree`` restored as ``opt_def``."""
  if not isinstance(opt_def, OptimizerDef):
    raise TypeError(f'optimizer_def must be an OptimizerDef (e.g. optim.Adam(1e-3)), not '
                    f'{type(opt_def).__name__}.')
  path = _state_dict.locate(tree, where)
  node = _state_dict.at(tree, path)
  if _layouts.is_per_group_multi_state(node['state']):
    raise CheckpointError(f'{where}: the optimizer at {_tree.join_keys(path)} has the '
                          'MultiOptimizer layout of flax < 0.3.3, which later versions cannot '
                          'restore.')
  _state_dict.check_leaves(node, path, where)
  target = node['target']
  # An empty dict is a module without params (flax 0.5.3 writes `'Dropout_0': {}`).
  bad = [p for p, leaf in _state_dict.leaves(target)
         if not isinstance(leaf, (np.ndarray, np.generic, jax.Array)) and leaf != {}]
  if bad:
    leaf_path = _tree.join_keys(path + ('target',) + bad[0])
    raise CheckpointError(f'{where}: the target leaf at {leaf_path} is not an array.')
  template = _state_dict.abstract_optimizer(opt_def, target)
  try:
    restored = serialization.from_state_dict(template, node, name=_tree.join_keys(path).lstrip('/'))
  except ValueError as e:
    raise CheckpointError(f'{where}: {e}') from None
  return restored, path


def _plain_of(opt_def) -> Optional[Any]:
  try:
    return opt_def.plain_optax()
  except (NotImplementedError, ValueError):
    return None


def _default_target(opt_def):
  """``(tx, expression, not-exact note)`` to convert ``opt_def`` into when no ``tx`` is given.

  The plain optax expression of :meth:`plain_optax` where it continues the legacy numbers
  (bit-exact or to 1e-6), else the def's own ``optax_transform()``.
  """
  if getattr(opt_def.hyper_params, 'learning_rate', 0) is None:
    raise CheckpointError(
        f'{opt_def!r} has no learning rate (legacy took one per step), and the optax '
        'transformation needs it: give the rate your run used in --optimizer (any value: the '
        'state does not depend on it; e.g. learning_rate=0.1), or a --tx such as '
        'optax.inject_hyperparams(optax.X)(learning_rate=...) to set it per step.')
  plain = _plain_of(opt_def)
  if plain is not None and plain.exact != 'not exact':
    return opt_def.plain_optax_transform(), plain.expression, None
  what = (f'no plain optax continues {opt_def!r} exactly ({plain.difference})'
          if plain is not None else f'{opt_def!r} has no plain optax expression')
  return (opt_def.optax_transform(), f'optim.{opt_def!r}.optax_transform()',
          f'{what}: the state is that of optim.{opt_def!r}.optax_transform(), so loading it '
          'needs flax_optim_compat')


def targets(opt_def, tx, *, stacklevel: int = 3):
  """``(tx of the TrainState, tx argument of optax_state, load-with text, notes)``.

  A ``tx`` given for an optimizer that no plain optax continues exactly warns
  (:class:`ConversionWarning`, ``stacklevel`` as ``warnings.warn`` counts it from here).
  """
  notes = []
  multi = isinstance(opt_def, MultiOptimizer)
  if multi:
    defs = list(opt_def.sub_optimizers)
    given = None if tx is None else tx
    if given is not None and not isinstance(given, (list, tuple)):
      raise TypeError(f'a MultiOptimizer converts with one optax transformation per group: '
                      f'tx=[tx_0, ..., tx_{len(defs) - 1}], got {type(given).__name__}.')
  else:
    defs = [opt_def]
    given = None if tx is None else [tx]
  if given is not None and len(given) != len(defs):
    raise ValueError(f'MultiOptimizer with {len(defs)} groups: tx needs {len(defs)} '
                     f'transformations (one per group, in order), got {len(given)}.')
  txs, texts = [], []
  for i, sub in enumerate(defs):
    where = f'group {i} ({sub!r}): ' if multi else ''
    if given is None:
      sub_tx, text, note = _default_target(sub)
      if note:
        notes.append(where + note)
    else:
      sub_tx, text = given[i], None
      plain = _plain_of(sub)
      if plain is not None and plain.exact == 'not exact':
        warnings.warn(f'{where}{sub!r}: continuing in this transformation is not exact '
                      f'({plain.difference}).', ConversionWarning, stacklevel=stacklevel)
    txs.append(sub_tx)
    texts.append(text)
  if not multi:
    return txs[0], txs[0], texts[0], notes
  load_with = None
  if all(t is not None for t in texts):
    inner = ', '.join(f"'{i}': {t}" for i, t in enumerate(texts))
    load_with = (f"optax.multi_transform({{{inner}, 'unmatched': optax.set_to_zero()}}, "
                 'param_labels)')
  return opt_def.optax_transform(group_txs=txs), txs, load_with, notes


def default_targets(opt_def):
  """:func:`targets` of ``opt_def`` without a ``tx``: what ``convert`` converts into by default."""
  with warnings.catch_warnings():
    warnings.simplefilter('ignore', ConversionWarning)
    return targets(opt_def, None)


def _layout_notes(node, opt_def) -> List[str]:
  """A note when the file's fields fit several optimizers (Adam, AdaBelief, LAMB; Momentum, LARS)."""
  name = _layouts.name_param_states(node['target'], node['state'].get('param_states'))
  if name and ' or ' in name:
    return [f'the state fields fit {name} alike: converted as {opt_def!r}, as given (the file '
            'cannot tell them apart; check it is the optimizer that wrote it)']
  return []


def convert_tree(tree: dict, where: str, optimizer_def: OptimizerDef, *, tx, keep_layout: bool,
                 replica: Optional[int], apply_fn) -> Conversion:
  """The :class:`Conversion` of the legacy optimizer in ``tree`` (the state dict read from the
  source ``where`` names), as ``convert.convert_checkpoint`` describes it."""
  path = _state_dict.locate(tree, where)
  notes = []
  replicas = _replicas.count(_state_dict.at(tree, path))
  if replicas is not None:
    tree = _replicas.take(tree, replicas, replica, where)
    notes.append(f'the file holds {replicas} replicas (a leading device axis on every leaf): '
                 f'converted replica {0 if replica is None else replica}'
                 + (', all replicas being equal' if replica is None else ''))
  elif replica is not None:
    raise CheckpointError(f'{where} is not replicated (its step has no device axis); drop '
                          '--replica.')
  optimizer, path = restore(tree, where, optimizer_def)
  notes += _layout_notes(_state_dict.at(tree, path), optimizer_def)
  try:
    # The warning points at the caller of the public function (convert.py calls this one).
    full_tx, state_tx, load_with, target_notes = targets(optimizer_def, tx, stacklevel=4)
    notes += target_notes
    if tx is None and not isinstance(optimizer_def, MultiOptimizer):
      notes += optimizer_def.plain_optax_notes(optimizer.target)
    opt_state = optimizer_def.optax_state(optimizer.target, optimizer.state, tx=state_tx)
    if tx is not None:
      kept = _adapter_state.injected_differences(full_tx, optimizer.target, opt_state)
      if kept:
        notes.append(f'the injected hyper-parameters keep the file\'s values: {", ".join(kept)};'
                     ' training resumes with them (set opt_state.hyperparams to change them)')
  except NotImplementedError as e:
    raise CheckpointError(f'{type(optimizer_def).__name__} cannot be converted to optax: {e}') from None
  except ValueError as e:
    raise CheckpointError(f'{where}: {e}') from None
  parent = _state_dict.at(tree, path[:-1]) if path else None
  outer_step = parent.get('step') if parent is not None and not keep_layout else None
  step = jnp.asarray(optimizer.state.step if outer_step is None else outer_step)
  train_state = flax_train_state.TrainState(step=step, apply_fn=apply_fn, params=optimizer.target,
                                            tx=full_tx, opt_state=opt_state)
  core = {'step': step, 'params': optimizer.target, 'opt_state': opt_state}
  if not path:
    state_dict = core
  elif keep_layout:
    state_dict = _state_dict.replace_at(tree, path, dict(core, step=optimizer.state.step))
  else:
    clash = sorted({'params', 'opt_state'} & set(parent))
    if clash:
      raise CheckpointError(f'{where}: the optimizer sits beside a key {clash[0]!r}, which the '
                            'flat TrainState layout needs; use keep_layout (--keep-layout).')
    if (outer_step is not None and _tree.first_count(opt_state) is None
        and int(np.asarray(outer_step)) != int(optimizer.state.step)):
      notes.append(f'the optimizer\'s own step ({int(optimizer.state.step)}) differs from the '
                   f'train state\'s ({int(np.asarray(outer_step))}) and this optax state keeps no '
                   'count: converted back, the optimizer gets the train state\'s step '
                   '(keep_layout / --keep-layout keeps both)')
    siblings = {k: v for k, v in parent.items() if k not in (path[-1], 'step')}
    if siblings:
      notes.append(f'carried beside the train state: {", ".join(sorted(map(str, siblings)))}')
    else:
      notes.append(f'the optimizer sat at {_tree.join_keys(path)} with nothing but a step '
                   'beside it: the output is a plain TrainState, which converts back to a bare '
                   'optimizer (keep_layout / --keep-layout keeps the outer layout)')
    state_dict = _state_dict.replace_at(tree, path[:-1], dict(core, **siblings))
  return Conversion(train_state, state_dict, load_with, tuple(notes))


def check_def(optimizer_def) -> None:
  """TypeError unless ``optimizer_def`` is an ``OptimizerDef``."""
  if not isinstance(optimizer_def, OptimizerDef):
    raise TypeError(f'optimizer_def must be an OptimizerDef, not {type(optimizer_def).__name__}.')


def legacy_state_dict(params, opt_state, optimizer_def: OptimizerDef, *, step, tx) -> dict:
  """The legacy ``{'target', 'state'}`` state dict of params and a state of ``tx`` (default:
  the default target), as ``convert.to_legacy`` describes it (the caller checks ``optimizer_def``: :func:`check_def`)."""
  if step is not None:
    step = _state_dict.check_step(step, 'to_legacy')
  params = jax.tree_util.tree_map(jnp.asarray, params)
  if tx is None:
    tx = default_targets(optimizer_def)[1]
  try:
    state = optimizer_def.legacy_state(params, opt_state, step=step, tx=tx)
  except NotImplementedError as e:
    raise CheckpointError(f'{type(optimizer_def).__name__} has no optax state: {e}') from None
  except ValueError as e:
    raise CheckpointError(f'opt_state does not fit {optimizer_def!r}: {e}') from None
  return optimizer_def.state_dict(params, state)
