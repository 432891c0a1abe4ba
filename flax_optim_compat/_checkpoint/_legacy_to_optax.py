"""A legacy optimizer's state in the state of an optax transformation (``convert``'s way there).

The optimizer is restored from its state dict by the def's strict restore; the transformation
it converts into (the *target*) is a given ``tx`` or the plain optax expression that continues
the legacy numbers (one per group of a MultiOptimizer); the state mapping itself is the def's
``optax_state`` / ``legacy_state``. The converted tree is the flat ``{'step', 'params',
'opt_state', ...}`` layout with the keys that sat beside the optimizer, or the file's own tree
with the optimizer node replaced (``keep_layout``). Every conversion's notes are one line each.
For ``convert.diff``, a legacy side is lined up with a converted one (:func:`aligned`); the
way back is ``_optax_to_legacy``.
"""
import dataclasses
import re
import warnings
from typing import Any, List, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import serialization
from flax.training import train_state as flax_train_state

from .. import _adapter_state
from .. import _expression_syntax
from .. import _groups
from .. import _hyper
from .. import _layouts
from .. import _restore
from . import _probe
from . import _replicas
from . import _sources
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
      replicas reduced, keys carried beside the train state, what legacy did differently.
    probe: what the probe measured before anything was written (``.summary()``: one line,
      e.g. ``'bit-exact over 4 updates'``): legacy and the target run side by side.
    accepted: the difference the caller accepted (``accept_difference=True``), one line, or
      None when the probe found the conversion within its class.
  """
  __module__ = 'flax_optim_compat.convert'
  train_state: Any
  state_dict: Any
  load_with: Optional[str]
  notes: Tuple[str, ...]
  probe: Any = None
  accepted: Optional[str] = None


class ProbeError(CheckpointError):
  """The probe found the target transformation beyond its class: nothing is written.

  Attributes:
    probe: the :class:`_probe.ProbeResult`.
  """
  __module__ = 'flax_optim_compat.convert'

  def __init__(self, message, probe):
    super().__init__(message)
    self.probe = probe


class OptaxCheckpoint(NamedTuple):
  """``(params, tx, opt_state)``: what :func:`to_optax` returns."""
  __module__ = 'flax_optim_compat.convert'
  params: Any
  tx: optax.GradientTransformation
  opt_state: optax.OptState


def check_def(optimizer_def) -> None:
  """TypeError unless ``optimizer_def`` is an ``OptimizerDef``."""
  if not isinstance(optimizer_def, OptimizerDef):
    raise TypeError(f'optimizer_def must be an OptimizerDef (e.g. optim.Adam(1e-3)), not '
                    f'{type(optimizer_def).__name__}.')


def restore(tree: dict, where: str, opt_def: OptimizerDef) -> Tuple[Optimizer, Tuple[str, ...]]:
  """``(optimizer, its key path)``: the one legacy optimizer of ``tree`` restored as ``opt_def``."""
  check_def(opt_def)
  path = _state_dict.locate(tree, where)
  node = _state_dict.at(tree, path)
  if _layouts.is_per_group_multi_state(node['state']):
    raise CheckpointError(f'{where}: the optimizer at {_tree.join_keys(path)} has the '
                          'MultiOptimizer layout of flax < 0.3.3, which later versions cannot '
                          'restore.')
  _check_family(node, where, opt_def)
  _state_dict.check_leaves(node, path, where)
  target = node['target']
  # An empty dict is a module without params (flax 0.5.3 writes `'Dropout_0': {}`).
  _state_dict.check_arrays(target, path + ('target',), where)
  template = _state_dict.abstract_optimizer(opt_def, target)
  _check_state_dtypes(node, path, where, opt_def, template)
  try:
    restored = serialization.from_state_dict(template, node, name=_tree.join_keys(path).lstrip('/'))
  except ValueError as e:
    raise CheckpointError(f'{where}: {e}') from None
  return restored, path


def _dtype_name(x) -> Optional[str]:
  dtype = getattr(x, 'dtype', None)
  return None if dtype is None else str(np.dtype(dtype))


def _check_state_dtypes(node, path, where: str, opt_def, template) -> None:
  """CheckpointError naming the first float state leaf whose dtype in the file is not the one
  ``opt_def`` keeps (Adafactor's momentum in bfloat16 against ``dtype_momentum=float32``): the
  restore would cast it without a word and the run would continue in another precision."""
  wanted = dict(_state_dict.leaves(serialization.to_state_dict(template)['state']))
  for key_path, leaf in _state_dict.leaves(node['state']):
    want = wanted.get(key_path)
    have_dtype, want_dtype = _dtype_name(leaf), _dtype_name(want)
    if have_dtype is None or want_dtype is None or have_dtype == want_dtype:
      continue
    if not (jnp.issubdtype(leaf.dtype, jnp.floating) and jnp.issubdtype(want.dtype, jnp.floating)):
      continue
    dtype_args = sorted(k for k, v in vars(opt_def).items()
                        if k.startswith('dtype') and _dtype_name(jnp.zeros((), v)) == want_dtype) \
        if hasattr(opt_def, '__dict__') else []
    hint = (f' (give --optimizer {dtype_args[0]}=jnp.{have_dtype})' if dtype_args else '')
    raise CheckpointError(
        f'{where}: the state leaf {_tree.join_keys(path + ("state",) + key_path)} is '
        f'{have_dtype} in the file; {opt_def!r} keeps it {want_dtype}{hint}: restoring would '
        'cast it and the run would not continue as written.')


def _check_family(node, where: str, opt_def) -> None:
  """CheckpointError first of all when ``opt_def`` cannot even hold the file's target and the
  file's fields are another optimizer's (``WeightNorm(Adam)`` for an Adam file): what the file
  holds comes before what the def says of the target. A def that holds the target is left to
  the strict restore, whose error names the first differing leaf and the same family."""
  try:
    _state_dict.abstract_optimizer(opt_def, node['target'])
    return
  except Exception:  # pylint: disable=broad-except  # the def refuses this target: say why
    pass
  try:
    name = _layouts.name_param_states(node['target'], node['state'].get('param_states'))
  except Exception:  # pylint: disable=broad-except  # an odd tree: the restore says what
    return
  classes = {c.__name__ for c in type(opt_def).__mro__}
  if not name or 'MultiOptimizer' in classes:
    return
  if name.startswith(('MultiOptimizer', 'WeightNorm')):
    holds = name.split(' ', 1)[0].split('(', 1)[0] in classes
  else:
    holds = 'WeightNorm' not in classes and bool(classes & set(re.split(r', | or ', name)))
  if not holds:
    raise CheckpointError(f'{where}: {_restore.written_by(name, opt_def)}')


def _plain_of(opt_def) -> Optional[Any]:
  try:
    return opt_def.plain_optax()
  except (NotImplementedError, ValueError):
    return None


def _default_target(opt_def):
  """``(tx, expression, not-exact note)`` to convert ``opt_def`` into when no ``tx`` is given.

  The plain optax expression of :meth:`plain_optax` where it continues the legacy numbers
  (bit-exact or to 1e-6), else the def's own ``optax_transform()``. A def without a learning
  rate is refused by the one rule (``_hyper.check_constant_rate``): no constant rate continues it.
  """
  try:
    plain = opt_def.plain_optax()
  except _hyper.PerStepRateError as e:
    raise CheckpointError(str(e)) from None
  except (NotImplementedError, ValueError):
    plain = None
  try:
    _hyper.check_constant_rate(opt_def)
  except _hyper.PerStepRateError as e:
    raise CheckpointError(str(e)) from None
  if plain is not None and plain.exact != 'not exact':
    return opt_def.plain_optax_transform(), plain.expression, None
  what = (f'no plain optax continues {opt_def!r} exactly ({plain.difference})'
          if plain is not None else f'{opt_def!r} has no plain optax expression')
  if dataclasses.is_dataclass(opt_def.hyper_params) and any(
      callable(getattr(opt_def.hyper_params, f.name))
      for f in dataclasses.fields(opt_def.hyper_params)):
    # A schedule is a Python function: its repr is no source text.
    return (opt_def.optax_transform(), None,
            f'{what}: the state is that of optim.{type(opt_def).__name__}(...).optax_transform() '
            'with its schedule, which cannot be written as Python here (load_with is None): '
            'build the same optimizer with the same schedule and call .optax_transform()')
  return (opt_def.optax_transform(), f'optim.{opt_def!r}.optax_transform()',
          f'{what}: the state is that of optim.{opt_def!r}.optax_transform(), so loading it '
          'needs flax_optim_compat')


def targets(opt_def, tx, *, stacklevel: int = 3, tx_source=None):
  """``(tx of the TrainState, tx argument of optax_state, load-with text, notes)``.

  A ``tx`` given for an optimizer that no plain optax continues exactly warns
  (:class:`ConversionWarning`, ``stacklevel`` as ``warnings.warn`` counts it from here).
  ``tx_source``: the Python source of ``tx`` (a list per group for a MultiOptimizer), for
  the load-with text.
  """
  notes = []
  multi = isinstance(opt_def, MultiOptimizer)
  if multi:
    defs = list(opt_def.sub_optimizers)
    given = tx
    if _groups.is_user_multi(given):
      # The user's own optax.multi_transform: its labels are mapped to the groups by the
      # params they cover when its state is built (MultiOptimizer.label_groups).
      return given, given, tx_source if isinstance(tx_source, str) else None, notes
    if given is not None and not isinstance(given, (list, tuple)):
      raise TypeError(f'a MultiOptimizer converts with one optax transformation per group '
                      f'(tx=[tx_0, ..., tx_{len(defs) - 1}]) or with one optax.multi_transform '
                      f'of your own, got {type(given).__name__}.')
    sources = tx_source
  else:
    defs = [opt_def]
    given = None if tx is None else [tx]
    sources = None if tx_source is None else [tx_source]
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
      sub_tx, text = given[i], (None if sources is None else sources[i])
      plain = _plain_of(sub)
      if plain is not None and plain.exact == 'not exact':
        warnings.warn(f'{where}{sub!r}: continuing in this transformation is not exact '
                      f'({plain.difference}).', ConversionWarning, stacklevel=stacklevel)
    txs.append(sub_tx)
    texts.append(text)
  if given is None and any(not _hyper.rate_set_per_step(d) and not callable(
      getattr(d.hyper_params, 'learning_rate', None)) for d in defs):
    notes.append(_per_step_note(texts[0] if not multi else None))
  if not multi:
    return txs[0], txs[0], texts[0], notes
  load_with = None
  if all(t is not None for t in texts):
    load_with = _groups.multi_transform_source(texts)
  return opt_def.optax_transform(group_txs=txs), txs, load_with, notes


def _per_step_note(expression: Optional[str]) -> str:
  """The one line of a default conversion whose def has a rate: the file cannot tell whether
  the run set it per step, and the forms that continue a run that did."""
  function = _expression_syntax.single_function(expression) or 'optax.X'
  return ('the file cannot tell whether the run set the learning rate per step '
          '(apply_gradient(grads, learning_rate=lr)): this continues at the constant rate of '
          'the optimizer given; a run that set it per step converts with the optimizer without '
          f'its learning_rate and --tx {function}(learning_rate=schedule, ...) (a schedule of '
          f'optax\'s count) or optax.inject_hyperparams({function})(learning_rate=..., ...)')


def default_targets(opt_def):
  """:func:`targets` of ``opt_def`` without a ``tx``: what ``convert`` converts into by default."""
  with warnings.catch_warnings():
    warnings.simplefilter('ignore', ConversionWarning)
    return targets(opt_def, None)


def _labels_note(opt_def, params, tx) -> str:
  """Which legacy group each label of the user's own multi_transform continues."""
  mapping = opt_def.label_groups(params, tx)
  named = [f'{label!r} continues ' + (f'group {g} ({opt_def.sub_optimizers[int(g)]!r})'
                                      if g != _groups.UNMATCHED else 'the params no group selects')
           for label, g in mapping.items()]
  free = [repr(label) for label in jax.eval_shape(tx.init, params).inner_states
          if label not in mapping]
  if free:
    named.append(f'{", ".join(free)} keep{"s" if len(free) == 1 else ""} no state (which params '
                 'they cover is not in the state; the probe checked what they do)')
  return 'your multi_transform\'s labels, by the params their states cover: ' + '; '.join(named)


def _layout_notes(node, opt_def) -> List[str]:
  """A note when the file's fields fit several optimizers (Adam, AdaBelief, LAMB; Momentum, LARS)."""
  name = _layouts.name_param_states(node['target'], node['state'].get('param_states'))
  if name and ' or ' in name:
    return [f'the state fields fit {name} alike (the file cannot tell them apart): the probe '
            f'checked the continuation of {opt_def!r} as given, not which of them wrote the file']
  return []


def _injected_rate(opt_state):
  """The first injected ``learning_rate`` of an ``inject_hyperparams`` state, or None."""
  for key_path, leaf in jax.tree_util.tree_flatten_with_path(opt_state)[0]:
    keys = [getattr(k, 'key', getattr(k, 'name', None)) for k in key_path]
    if len(keys) >= 2 and keys[-2:] == ['hyperparams', 'learning_rate']:
      return leaf
  return None


def _group_defs_and_sources(opt_def, tx_source):
  """``[(where, def, --tx text or None)]``: the def, or each group of a MultiOptimizer."""
  if isinstance(opt_def, MultiOptimizer):
    defs = list(opt_def.sub_optimizers)
    sources = list(tx_source) if isinstance(tx_source, (list, tuple)) else [None] * len(defs)
    return [(f'group {i} ({d!r}): ', d, s) for i, (d, s) in enumerate(zip(defs, sources))]
  return [('', opt_def, tx_source if isinstance(tx_source, str) else None)]


def _probe_rates(opt_def, opt_state, tx, tx_source):
  """``(rate_of, with_rate)`` of :func:`_probe.run` for a def (or groups) whose rate was set
  per step: the legacy side runs each update at the rate the target uses there (a schedule of
  the step read from ``--tx``, or the rate ``inject_hyperparams`` holds); ``(None, None)`` when
  every rate is the def's own. CheckpointError for a constant rate (no constant rate continues
  such a run) or a rate the probe cannot read."""
  groups = _group_defs_and_sources(opt_def, tx_source)
  if not any(_hyper.rate_set_per_step(d) for _, d, _ in groups):
    return None, None
  if tx is None:
    return None, None   # the default conversion refuses it (_default_target)
  readers = []
  for where, sub, source in groups:
    if not _hyper.rate_set_per_step(sub):
      readers.append(None)
      continue
    kind, value = _probe.learning_rate_of(source)
    if kind == 'unknown' and source is None and len(groups) == 1 and \
        _injected_rate(opt_state) is not None:
      kind = 'injected'
    if kind == 'schedule':
      readers.append(lambda count, o, f=value: f(count))
    elif kind == 'injected' and len(groups) == 1:
      readers.append(lambda count, o: _injected_rate(o))
    elif kind == 'constant':
      try:
        _hyper.check_constant_rate(sub, None)
      except _hyper.PerStepRateError as e:
        raise CheckpointError(f'{where}the tx given trains at a constant rate: {e}') from None
    else:
      raise CheckpointError(
          f'{where}{sub!r} had its rate set per step, and the learning rate of the tx given '
          + ('(an object: pass tx_source=, its Python text) ' if source is None else '')
          + 'cannot be read to check it: give it as a schedule of literal arguments (e.g. '
          'learning_rate=optax.exponential_decay(0.01, 1000, 0.9))'
          + ('' if len(groups) == 1 else ' in each such group')
          + ' or, for one optimizer, as optax.inject_hyperparams(optax.X)(learning_rate=...)')

  if len(groups) == 1:
    hp = opt_def.hyper_params
    return (lambda count, o: readers[0](count, o),
            lambda rate: hp.replace(learning_rate=rate))
  hps = list(opt_def.hyper_params)
  return (lambda count, o: tuple(None if r is None else r(count, o) for r in readers),
          lambda rates: [h if r is None else h.replace(learning_rate=r)
                         for h, r in zip(hps, rates)])


def _expected(sub):
  """The plain optax expression that continues ``sub`` (``learning_rate=schedule`` where its
  rate was set per step), or None."""
  try:
    if _hyper.rate_set_per_step(sub):
      return sub.plain_optax({'learning_rate': 'schedule'}).expression
    return sub.plain_optax().expression
  except (NotImplementedError, ValueError, TypeError):
    return None


def _keyword_differences(opt_def, tx, tx_source) -> List[str]:
  """Every hyper-parameter the ``--tx`` text sets otherwise than ``--optimizer`` (optax's
  defaults included), read before any number."""
  if tx is None:
    return []
  found = []
  for where, sub, source in _group_defs_and_sources(opt_def, tx_source):
    skip = ('learning_rate',) if _hyper.rate_set_per_step(sub) else ()
    found += [where + d for d in _probe.differences(_expected(sub), source, repr(sub), skip)]
  return found


def _probed(optimizer_def, optimizer, full_tx, state_tx, opt_state, *, tx, tx_source, where,
            accept_difference):
  """``(probe result, notes, accepted line)``: the probe run, refused beyond its class or where
  ``--tx`` names another hyper-parameter value than ``--optimizer``."""
  found = _keyword_differences(optimizer_def, tx, tx_source)
  rate_of, with_rate = _probe_rates(optimizer_def, opt_state, tx, tx_source)
  result = _probe.run(optimizer_def, optimizer.target, optimizer.state, full_tx, state_tx,
                      rate_of=rate_of, with_rate=with_rate,
                      known_zero_note=optimizer_def.zero_params_note())
  notes = _probe.describe_known(result) + _probe.describe_half(result)
  if result.within and not found:
    return result, notes, None
  if found:
    why = '; '.join(found)
    line = (f'the target does not continue {optimizer_def!r}: {why} (read from the tx before '
            f'any update; the probe measured {result.summary()})')
  else:
    expected = None
    if tx is not None and not isinstance(optimizer_def, MultiOptimizer):
      expected = _expected(optimizer_def)
    why = _probe.cause(expected, tx_source if isinstance(tx_source, str) else None,
                       repr(optimizer_def))
    line = (f'the target does not continue {optimizer_def!r}: {result.summary()}'
            + (f' ({why})' if why else ''))
  if not accept_difference:
    # What the probe could not check (a NaN or inf on one side) is never vouched for either:
    # only the user's explicit acceptance writes it, with the line saying what was not checked.
    raise ProbeError(f'{where}: {line}; nothing was written (accept_difference=True / '
                     '--accept-difference converts anyway)', result)
  return result._replace(accepted=True), notes, line


def convert_tree(tree: dict, where: str, optimizer_def: OptimizerDef, *, tx, keep_layout: bool,
                 replica: Optional[int], apply_fn, accept_difference: bool = False,
                 tx_source=None) -> Conversion:
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
  multi_given = isinstance(optimizer_def, MultiOptimizer) and _groups.is_user_multi(tx)
  notes += _layout_notes(_state_dict.at(tree, path), optimizer_def)
  try:
    # The warning points at the caller of the public function (convert.py calls this one).
    full_tx, state_tx, load_with, target_notes = targets(optimizer_def, tx, stacklevel=4,
                                                         tx_source=tx_source)
    notes += target_notes
    opt_state = optimizer_def.optax_state(optimizer.target, optimizer.state, tx=state_tx)
    if multi_given:
      notes.append(_labels_note(optimizer_def, optimizer.target, state_tx))
    if tx is not None:
      kept = _adapter_state.injected_differences(full_tx, optimizer.target, opt_state)
      if kept:
        notes.append(f'the injected hyper-parameters keep the file\'s values: {", ".join(kept)};'
                     ' training resumes with them (set opt_state.hyperparams to change them)')
    probe, probe_notes, accepted = _probed(
        optimizer_def, optimizer, full_tx, state_tx, opt_state, tx=tx, tx_source=tx_source,
        where=where, accept_difference=accept_difference)
    notes += probe_notes + optimizer_def.legacy_notes(optimizer.target)
  except NotImplementedError as e:
    raise CheckpointError(f'{type(optimizer_def).__name__} cannot be converted to optax: {e}') from None
  except CheckpointError:
    raise
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
  return Conversion(train_state, state_dict, load_with, tuple(notes), probe, accepted)


def aligned(trees, optimizer_def, *, tx=None) -> list:
  """Two state dicts as ``convert.diff`` compares them given ``optimizer_def``.

  A legacy side becomes its conversion into ``tx`` (default: the plain optax expression),
  ``{'step', 'params', 'opt_state', ...}`` (without ``step`` when the other side is a
  converted file without one, as ``--to optax`` wrote them before it kept the step).
  """
  legacy = [bool(_state_dict.find_optimizers(tree)) for tree in trees]
  trees = list(trees)
  for i, tree in enumerate(trees):
    if legacy[i]:
      converted = serialization.to_state_dict(convert_tree(
          *_sources.read(tree, mode='jax'), optimizer_def, tx=tx, keep_layout=False,
          replica=None, apply_fn=None).state_dict)
      other = trees[1 - i]
      if not legacy[1 - i] and isinstance(other, dict) and 'step' not in other:
        converted.pop('step', None)  # a to_optax output: {params, opt_state}
      trees[i] = converted
  return trees
