"""FOM001: ``optim.X(...).create(params)`` -> ``TrainState.create(apply_fn=None, params=params,
tx=<optax>)``.

For a built-in def: its optax expression (plain optax, or the package's exact transform where
plain optax is not exact; with a schedule or an injected learning rate when the apply sites
set one), the edits of the create call and of the def's variable, the report record, and the
``flax-optim-compat convert`` command for the checkpoints the old code saved. A def built in
``if``/``else`` branches or by a helper gets one expression per branch.
"""
import dataclasses
import os
from typing import NamedTuple, Optional

import libcst as cst

from ..._expr import _core as _expr
from ..._expr import _tx as _expr_tx
from .. import _edits
from .. import _optax_text
from .. import _refusals
from .. import _unit
from .._edits import Edit
from .._report import Conversion, Record
from .._rule import ObjectPlan, Rule, text_of, unshadowed


@dataclasses.dataclass(frozen=True)
class CreateData:
  """A create call, or the def (or traversal) variable's value; FOM008 writes it too.

  Exactly one is set: ``tx`` (the optax expression of the create's ``tx=``; None keeps the
  receiver's own text, a variable that now holds the transform), ``def_tx`` (the def
  variable's new value), ``filter`` (a traversal variable's new value: its filter function),
  ``drop`` (a group's def variable, whose def is now inside the ``multi_transform``: the
  statement goes).
  """
  tx: Optional[str] = None
  def_tx: Optional[str] = None
  filter: Optional[str] = None
  drop: bool = False


class Branch(NamedTuple):
  """One of the defs a create may use (built in ``if``/``else`` branches or by a helper)."""
  unit: object          # the def call's file
  node: cst.Call        # the def call, which becomes its optax expression
  plan: object          # that file's FilePlan
  index: int
  count: int


class Create(Rule):
  code = 'FOM001'
  title = ('optim.X(...).create(params) -> TrainState.create(apply_fn=None, params=params, '
           'tx=<optax>)')
  kind = 'create'

  def claims(self, site, plan):
    return site.kind == 'create' and id(site) not in plan.multis and not multi_branch(site)

  def refusal(self, site, plan):
    """A Python number as the whole target (jaxfg's ``Adam().create(target=0.05)``, a learned
    scalar): flax's ``TrainState.create`` fails on it (``'float' is not iterable``), and flax
    0.5.3 failed on it at the first ``apply_gradient``, so no rewrite is claimed for it. A
    single array made in place (``create(jnp.asarray(0.05))``, ``create(jnp.zeros(3))``):
    legacy stepped it, but today's ``TrainState.apply_gradients`` fails on it
    (``Array.__contains__: unsupported operand type str``, flax's check for an
    overwrite-with-gradient key), so it is refused too, with the same advice.

    A create called through a transform (``jax.jit(opt_def.create)(params)``) is rewritten
    where it is called with its params alone and no update sets a learning rate: the shapes
    its examples measured (a learning rate set per step is not)."""
    if _unit.transformed_create(site.unit, site.node):
      args = site.node.args
      if len(args) != 1 or args[0].keyword is not None or args[0].star or plan.mode != 'none':
        return _refusals.ESCAPE, (
            f'{_unit.short(site.unit.code(site.node))} creates the optimizer through '
            f'{site.unit.code(site.node.func.func)}' + (
                ' with a learning rate set per step' if plan.mode != 'none' else
                ' with other arguments than its params') + ', a shape no example measured: '
            'create it as it is called, then apply the transform to what it returns')
    target = _unit.call_arg(site.node, 0, 'target')
    number = target.expression if isinstance(target, cst.UnaryOperation) else target
    if isinstance(number, (cst.Integer, cst.Float)):
      what = 'a Python number'
    elif isinstance(target, cst.Call) and any(
        name.startswith(_ARRAY_MAKERS) for name in site.unit.names(target.func)):
      what = 'a single array'
    else:
      return None
    return _refusals.NUMBER_TARGET, (
        f'{site.unit.code(site.node)}: {what} as the whole target (today\'s TrainState fails on '
        'it); hold it in a dict, e.g. create({\'x\': ...}), and read it back as '
        'target[\'x\'], then migrate it')

  def plan(self, site, plan):
    if site.branches is not None:
      for i, (unit, node, call) in enumerate(site.branches):
        branch = Branch(unit, node, plan.files[unit.path], i, len(site.branches))
        plan_create(plan, site, call, branch)
    else:
      plan_create(plan, site, plan.calls[id(site)])

  def rewrite(self, updated, data, context):
    return create_call(updated, data, context)


# Modules whose functions return an array: a call of one as the whole target is a single array.
_ARRAY_MAKERS = ('jax.numpy.', 'numpy.', 'jax.random.')


def multi_branch(site) -> bool:
  """Whether one of the defs a create may use is a MultiOptimizer (FOM008 plans it)."""
  return any(isinstance(call, list) for _, _, call in site.branches or ())


def create_call(updated, data, context):
  """The new value of a create call (or of its def variable: ``opt_def = optim.Adam(...)``).

  A create called through a transform, ``jax.vmap(opt_def.create)(batched)``, keeps the
  transform and its arguments and calls through it a function of the params that creates the
  ``TrainState``: ``jax.vmap(lambda params: TrainState.create(...))(batched)`` (measured equal
  to legacy's state and updates, ``_unit.CREATE_TRANSFORMS``)."""
  if data.def_tx is not None:
    return cst.parse_expression(data.def_tx)
  if isinstance(updated.func, cst.Call):   # ``T(opt_def.create)(...)``
    transform = updated.func
    tx = data.tx if data.tx is not None else text_of(transform.args[0].value.value)
    name = unshadowed('params', tx)
    made = cst.parse_expression(f'lambda {name}: {context.train_state}.TrainState.create('
                                f'apply_fn=None, params={name}, tx={tx})')
    return updated.with_changes(func=transform.with_changes(
        args=[transform.args[0].with_changes(value=made), *transform.args[1:]]))
  positional = [a for a in updated.args if a.keyword is None]
  params = positional[0].value if positional else next(
      a.value for a in updated.args if a.keyword.value == 'target')
  tx = data.tx if data.tx is not None else text_of(updated.func.value)
  return cst.parse_expression(
      f'{context.train_state}.TrainState.create(apply_fn=None, params={text_of(params)}, tx={tx})')


RULE = Create()


def plan_create(obj: ObjectPlan, site, call, branch=None):
  """Plans the create ``site`` of a built-in def: its edits, record and conversion.

  ``call``: the def call as ``_optax_text`` reads it; the object's learning-rate mode decides
  its form; ``obj.keep_layout`` gives the command ``--keep-layout``. ``branch``: the create's
  def is this one of several (each branch gets its own expression, in place of its def call;
  the create passes on what the branches return).
  """
  project, mode, schedule = obj.project, obj.mode, obj.schedule
  unit = site.unit
  plan = obj.files[unit.path]
  receiver = _unit.create_receiver(unit, site.node)
  def_node = branch.node if branch else project.def_call(unit, receiver)
  def_unit = branch.unit if branch else unit
  def_plan = branch.plan if branch else plan
  sources = dict(call.sources)
  notes = []
  cmd_lr = None
  if mode == 'schedule':
    sources['learning_rate'] = _optax_text.SCHEDULE if call.arguments else schedule
    cmd_lr = _optax_text.SCHEDULE_STAND_IN
    notes.append(f'the learning rate is the schedule {schedule}; the command uses '
                 f'{_optax_text.SCHEDULE_STAND_IN} (same state layout)')
  elif mode == 'inject':
    initial = sources.get('learning_rate', 'None')
    if initial == 'None':
      initial = '0.0'
      notes.append('learning_rate=None: the injected learning rate starts at 0.0 and is set at '
                   'every apply site')
    sources['learning_rate'] = 'learning_rate'
    if obj.shared_layout:
      notes.append(obj.shared_layout)
  result = _optax_text.plain(call.name, sources)
  expression, exact = result.expression, result.exact
  flagged = _optax_text.zero_params_marker(call.name) if exact != 'not exact' else None
  if flagged:
    exact = 'not exact'
  elif exact == 'not exact':
    if obj.plain_optax or mode != 'none':
      flagged = (f'{_refusals.NOT_EXACT} the plain optax expression is not exact: '
                 f'{result.difference}')
    else:
      optim_alias = _optax_text.optim_alias(def_unit, def_node)
      expression = _optax_text.exact_transform(call, call.sources, optim_alias)
      exact = 'bit-exact'   # the very transform the legacy def runs on this package
      flagged = (f'{_refusals.NOT_EXACT} {call.name} has no exact plain optax expression '
                 f'({result.difference}); this is the package\'s exact transform')
  if mode == 'inject':
    if call.arguments:   # every apply site sets it (a run-time initial one): None starts at 0.0
      initial = '0.0 if learning_rate is None else learning_rate'
    expression = _optax_text.inject(expression, initial)
    def_plan.needs.add(_edits.JNP)
    if exact == 'bit-exact':
      # Measured: optax.inject_hyperparams(optax.rmsprop) rounds 1 ulp away from legacy from
      # step 5 on (legacy with the same per-step learning rate equals plain optax.rmsprop).
      exact = '1e-6'
      notes.append('the injected learning rate is a traced value: the last bit may differ')
  if call.arguments:
    # No apply site sets a learning rate: legacy's None failed at the first update (and
    # FOM108 refuses a literal one even where no update is seen, as here where none may be).
    required = mode == 'none'
    expression = _optax_text.unpacked(call, expression, rate_required=required,
                                      schedule=schedule if mode == 'schedule' else None)
    notes.append(f'the def\'s arguments {call.arguments} are bound at run time by a lambda '
                 f'with the signature and defaults of {call.name}' + (
                     ', learning_rate required (legacy\'s None failed at the first update; '
                     'optax would not scale by it)' if required else ''))
  cmd_sources = _optax_text.command_sources(call, cmd_lr)
  if mode == 'inject':
    cmd_sources['learning_rate'] = 'learning_rate'
  cmd_tx = _optax_text.plain(call.name, cmd_sources).expression
  stand_ins = _optax_text.stand_ins(call)
  state_lr = None   # the learning rate the converted state holds, where it holds one
  if mode == 'inject':
    # The injected learning rate is in the state: the code's literal, else a placeholder.
    state_lr = initial if _optax_text.is_literal(initial) else _expr.placeholder('learning_rate')
    cmd_tx = _optax_text.inject(cmd_tx, state_lr)
    if not _optax_text.is_literal(initial):
      stand_ins.pop('learning_rate', None)
      notes.append(f'fill the placeholder learning_rate in the command: the value of '
                   f'{"learning_rate" if call.arguments else initial} when the checkpoint was '
                   'saved')
  if stand_ins:
    notes.append('run-time values replaced in the command by same-layout stand-ins: '
                 + ', '.join(f'{k}={v}' for k, v in stand_ins.items()))
  def_assign = def_node if branch else None
  if isinstance(receiver, cst.Name) and not branch:
    values = project.assignment_values(unit, receiver)
    def_assign = values[0] if values else None
  plan.edits[id(site.node)] = Edit(RULE, CreateData(
      tx=None if def_assign is not None else expression))
  if def_assign is not None:
    def_plan.edits[id(def_assign)] = Edit(RULE, CreateData(def_tx=expression))
    def_plan.needs.add(_edits.OPTAX)
  plan.needs.update({_edits.OPTAX, _edits.TRAIN_STATE})
  if flagged:
    def_plan.mark(def_node if branch else site.node, f'{_refusals.MARKER} {flagged}')
  status = 'flagged' if flagged else 'rewritten'
  message = f'{def_unit.code(def_node)}.create -> TrainState.create'
  if branch:
    where = os.path.relpath(def_unit.path, os.path.dirname(unit.path))
    where = f'{where}:{def_unit.line(def_node)}'
    notes.insert(0, f'branch {branch.index + 1} of {branch.count}: the def at {where}, '
                    f'{def_unit.code(def_node)}')
  if notes:
    message += '; ' + '; '.join(notes)
  obj.records.append(Record.of(site, status, code=RULE.code, exact=exact,
                           message=message))
  keep = ' --keep-layout' if obj.keep_layout else ''
  command = (f'flax-optim-compat convert <IN> '
             f'--optimizer "{_optax_text.command_optimizer(call, state_lr)}" '
             f'--tx "{cmd_tx}" --to train-state --out <OUT>{keep}')
  try:
    _expr_tx.parse_tx(cmd_tx.replace(_expr.placeholder('learning_rate'), '0.1'))
  except _expr.ExpressionError as e:
    command = ''
    notes.append(f'no convert command: its --tx cannot be written on the command line ({e})')
  obj.conversions.append(Conversion(unit.path, site.line, expression, exact, command, notes))
