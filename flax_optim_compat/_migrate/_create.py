"""The rewrite of one ``create`` site: ``<def>.create(params)`` -> ``TrainState.create``.

For a built-in def: its optax expression (plain optax, or the package's exact transform where
plain optax is not exact; with a schedule or an injected learning rate when the apply sites
set one), the edits of the create call and of the def's variable, the report record, and the
``flax-optim-compat convert`` command for the checkpoints the old code saved. For a
``MultiOptimizer`` or ``create(focus=...)``: one ``optax.multi_transform`` over the groups.
"""
import libcst as cst

from .._expr import _core as _expr
from .._expr import _tx as _expr_tx
from . import _optax
from . import _refusals
from . import _rules
from ._edits import Edit
from ._report import Record, Conversion


def plan_create(project, site, plan, call, mode, schedule, plain_optax, records, conversions,
                keep_layout):
  """Plans the create ``site`` of a built-in def: its edits in ``plan``, record, conversion.

  ``call``: the def call as ``_optax`` reads it; ``mode`` / ``schedule``: the object's
  learning-rate mode (``_learning_rate.lr_mode``); ``keep_layout``: the optimizer is a field of
  the user's own train state, saved with its siblings, so the command has ``--keep-layout``.
  """
  unit = site.unit
  sources = dict(call.sources)
  notes = []
  cmd_lr = None
  if mode == 'schedule':
    sources['learning_rate'] = schedule
    cmd_lr = _optax.SCHEDULE_STAND_IN
    notes.append(f'the learning rate is the schedule {schedule}; the command uses '
                 f'{_optax.SCHEDULE_STAND_IN} (same state layout)')
  elif mode == 'inject':
    initial = sources.get('learning_rate', 'None')
    if initial == 'None':
      initial = '0.0'
      notes.append('learning_rate=None: the injected learning rate starts at 0.0 and is set at '
                   'every apply site')
    sources['learning_rate'] = 'learning_rate'
  result = _optax.plain(call.name, sources)
  expression, exact = result.expression, result.exact
  flagged = _zero_params_marker(call.name) if exact != 'not exact' else None
  if flagged:
    exact = 'not exact'
  elif exact == 'not exact':
    if plain_optax or mode != 'none':
      flagged = (f'{_refusals.NOT_EXACT} the plain optax expression is not exact: '
                 f'{result.difference}')
    else:
      optim_alias = _optim_alias(unit, project.def_call(unit, site.node.func.value))
      expression = _optax.exact_transform(call, call.sources, optim_alias)
      exact = 'bit-exact'   # the very transform the legacy def runs on this package
      flagged = (f'{_refusals.NOT_EXACT} {call.name} has no exact plain optax expression '
                 f'({result.difference}); this is the package\'s exact transform')
  if mode == 'inject':
    expression = _optax.inject(expression, initial)
    plan.needs.add('jnp')
    if exact == 'bit-exact':
      # Measured: optax.inject_hyperparams(optax.rmsprop) rounds 1 ulp away from legacy from
      # step 5 on (legacy with the same per-step learning rate equals plain optax.rmsprop).
      exact = '1e-6'
      notes.append('the injected learning rate is a traced value: the last bit may differ')
  cmd_sources = _optax.command_sources(call, cmd_lr)
  if mode == 'inject':
    cmd_sources['learning_rate'] = 'learning_rate'
  cmd_tx = _optax.plain(call.name, cmd_sources).expression
  stand_ins = _optax.stand_ins(call)
  state_lr = None   # the learning rate the converted state holds, where it holds one
  if mode == 'inject':
    # The injected learning rate is in the state: the code's literal, else a placeholder.
    state_lr = initial if _optax.is_literal(initial) else _expr.placeholder('learning_rate')
    cmd_tx = _optax.inject(cmd_tx, state_lr)
    if not _optax.is_literal(initial):
      stand_ins.pop('learning_rate', None)
      notes.append(f'fill the placeholder learning_rate in the command: the value of '
                   f'{initial} when the checkpoint was saved')
  if stand_ins:
    notes.append('run-time values replaced in the command by same-layout stand-ins: '
                 + ', '.join(f'{k}={v}' for k, v in stand_ins.items()))
  receiver = site.node.func.value
  def_assign = None
  if isinstance(receiver, cst.Name):
    values = project.assignment_values(unit, receiver)
    def_assign = values[0] if values else None
  plan.edits[id(site.node)] = Edit(_rules.CREATE, _rules.CreateData(
      tx=None if def_assign is not None else expression))
  if def_assign is not None:
    plan.edits[id(def_assign)] = Edit(_rules.CREATE, _rules.CreateData(def_tx=expression))
  plan.needs.update({'optax', 'train_state'})
  if flagged:
    plan.mark(site.node, f'{_refusals.MARKER} {flagged}')
  status = 'flagged' if flagged else 'rewritten'
  message = f'{unit.code(project.def_call(unit, receiver))}.create -> TrainState.create'
  if notes:
    message += '; ' + '; '.join(notes)
  records.append(Record.of(site, status, code=_rules.CREATE.code, exact=exact,
                           message=message))
  keep = ' --keep-layout' if keep_layout else ''
  command = (f'flax-optim-compat convert <IN> '
             f'--optimizer "{_optax.command_optimizer(call, state_lr)}" '
             f'--tx "{cmd_tx}" --to train-state --out <OUT>{keep}')
  try:
    _expr_tx.parse_tx(cmd_tx.replace(_expr.placeholder('learning_rate'), '0.1'))
  except _expr.ExpressionError as e:
    command = ''
    notes.append(f'no convert command: its --tx cannot be written on the command line ({e})')
  conversions.append(Conversion(unit.path, site.line, expression, exact, command, notes))


def _zero_params_marker(name):
  """FOM009 for a plain form that moves all-zero params (kept: the package's transform has
  another state layout, which no convert command could target), or None."""
  difference = _optax.zero_params_difference(name)
  if difference is None:
    return None
  return (f'{_refusals.NOT_EXACT} the plain optax expression is not exact for a param that '
          f'is all zeros (a bias initialised to zeros): {difference}')


def _group_tx(project, site, call, plain_optax):
  """(expression, exact, marker text or None) of one built-in def call."""
  result = _optax.plain(call.name, call.sources)
  if result.exact != 'not exact':
    marker = _zero_params_marker(call.name)
    return result.expression, 'not exact' if marker else result.exact, marker
  if plain_optax:
    return (result.expression, result.exact,
            f'{_refusals.NOT_EXACT} the plain optax expression is not exact: '
            f'{result.difference}')
  optim_alias = _optim_alias(site.unit, project.def_call(site.unit, site.node.func.value))
  return (_optax.exact_transform(call, call.sources, optim_alias), 'bit-exact',
          f'{_refusals.NOT_EXACT} {call.name} has no exact plain optax expression '
          f'({result.difference}); '
          'this is the package\'s exact transform')


_RANK = {'bit-exact': 0, '1e-6': 1, 'not exact': 2}


def plan_multi(project, site, plan, groups, plain_optax, records, conversions):
  """``MultiOptimizer`` / ``create(focus=...)`` -> ``optax.multi_transform``.

  Legacy's traversal calls ``filter_fn('/' + '/'.join(keys), value)``; each leaf gets the label
  of the first pair whose filter selects it (legacy refuses overlaps), and a leaf no traversal
  selects stays untouched: ``optax.set_to_zero()``, never the masked chain, which moves it.
  The labels are the package's own (``'0'``, ``'1'``, ..., ``'unmatched'``).
  """
  unit = site.unit
  transforms, exact, markers = [], 'bit-exact', []
  label = "'unmatched'"
  for i, (filter_source, rewrite, fn, call) in reversed(list(enumerate(groups))):
    label = f"'{i}' if {filter_source}('/' + '/'.join(path), value) else {label}"
    if rewrite is not None:
      plan.edits[id(rewrite)] = Edit(_rules.MULTI, _rules.CreateData(filter=unit.code(fn)))
  for i, (_, _, _, call) in enumerate(groups):
    expression, group_exact, marker = _group_tx(project, site, call, plain_optax)
    transforms.append(f"'{i}': {expression}")
    exact = max(exact, group_exact, key=_RANK.get)
    if marker:
      markers.append(marker)
  transforms.append("'unmatched': optax.set_to_zero()")
  expression = (f"optax.multi_transform({{{', '.join(transforms)}}}, lambda params: "
                f"traverse_util.path_aware_map(lambda path, value: {label}, params))")
  receiver = site.node.func.value
  values = project.assignment_values(unit, receiver) if isinstance(receiver, cst.Name) else None
  if values:   # ``opt_def = optim.MultiOptimizer(...)``: the variable holds the transform
    plan.edits[id(values[0])] = Edit(_rules.MULTI, _rules.CreateData(def_tx=expression))
    plan.edits[id(site.node)] = Edit(_rules.MULTI, _rules.CreateData(tx=unit.code(receiver)))
  else:
    plan.edits[id(site.node)] = Edit(_rules.MULTI, _rules.CreateData(tx=expression))
  plan.needs.update({'optax', 'train_state', 'traverse_util'})
  for marker in markers:
    plan.mark(site.node, f'{_refusals.MARKER} {marker}')
  message = (f'{unit.code(project.def_call(unit, site.node.func.value))} -> '
             'optax.multi_transform with labels from the traversals')
  notes = ['the labels come from a function of the params, which --tx cannot write: convert '
           'this checkpoint per group (see docs/convert.md) or with the package\'s '
           'MultiOptimizer transform']
  records.append(Record.of(site, 'flagged' if markers else 'rewritten', code=_rules.MULTI.code,
                           exact=exact, message=message))
  conversions.append(Conversion(unit.path, site.line, expression, exact, '', notes))


def _optim_alias(unit, call) -> str:
  func = call.func
  if isinstance(func, cst.Attribute):
    return unit.code(func.value)
  return 'optim'

