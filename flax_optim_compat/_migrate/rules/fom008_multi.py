"""FOM008: ``optim.MultiOptimizer((traversal, def), ...)`` / ``create(focus=traversal)`` ->
``optax.multi_transform`` with labels from the traversals.

Legacy's traversal calls ``filter_fn('/' + '/'.join(keys), value)``; each leaf gets the label
of the first pair whose filter selects it (legacy refuses overlaps), and a leaf no traversal
selects stays untouched: ``optax.set_to_zero()``, never the masked chain, which moves it.
The labels are the package's own (``'0'``, ``'1'``, ..., ``'unmatched'``), and so is the text
of the ``multi_transform`` (``_groups.multi_transform_source``).
"""
import dataclasses

import libcst as cst

from ... import _groups
from .. import _edits
from .. import _optax_text
from .. import _refusals
from .. import _unit
from .._edits import Edit
from .._report import Conversion, Record
from .._rule import Rule
from .fom015_group_hyper_params import key as group_key
from .fom001_create import Branch, CreateData, create_call, multi_branch, plan_create


class Multi(Rule):
  code = 'FOM008'
  title = ('optim.MultiOptimizer((traversal, def), ...) / create(focus=traversal) -> '
           'optax.multi_transform with labels from the traversals, unselected params '
           'optax.set_to_zero()')
  kind = 'create'

  def claims(self, site, plan):
    return site.kind == 'create' and (id(site) in plan.multis or multi_branch(site))

  def plan(self, site, plan):
    if site.branches is None:
      _plan_multi(plan, site, plan.multis[id(site)])
      return
    for i, (unit, node, call) in enumerate(site.branches):
      branch = Branch(unit, node, plan.files[unit.path], i, len(site.branches))
      if isinstance(call, list):   # a MultiOptimizer: its groups
        _plan_multi(plan, site, call, branch)
      else:
        plan_create(plan, site, call, branch)

  def rewrite(self, updated, data, context):
    if data.drop:
      return cst.RemoveFromParent()
    if data.filter is not None:   # a traversal variable's value: ``t = ModelParamTraversal(f)``
      return cst.parse_expression(data.filter)
    return create_call(updated, data, context)


RULE = Multi()


@dataclasses.dataclass(frozen=True)
class ChosenDef:
  """A group's def variable assigned in branches (``p_opt = optim.Adam(...)`` under ``if``,
  ``optim.Momentum(...)`` under ``elif``): its name, each def call and its DefCall. Each
  branch's value becomes the group's transform (where the object injects its learning rate,
  a function of it), and the ``multi_transform`` reads the variable, so each run gets the
  transform of the def its branch chose, as legacy got the def."""
  name: str
  nodes: tuple
  calls: tuple


def chosen_def(unit, name, values):
  """``(ChosenDef, None)`` for a group's def variable assigned a built-in def call in each of
  several branches (``p_opt = optim.Adam(...)`` under ``if``, ``optim.Momentum(...)`` under
  ``elif``), every one with the same learning rate; else ``(None, why not)``."""
  lines = ', '.join(str(unit.line(v)) for v in values)
  calls = []
  for value in values:
    assign = unit.parent(value)
    legacy = unit.legacy(value.func) if isinstance(value, cst.Call) else None
    if not isinstance(_unit.sole_target(assign), cst.Name) or (
                legacy not in _unit.BUILTIN_DEFS):
      return None, (f'the def {unit.code(name)} is chosen at run time (assigned at lines '
                    f'{lines}), and {unit.code(value)} is not a built-in def')
    call = _optax_text.def_call(legacy, value, unit)
    if call is None or call.arguments:
      return None, f'the arguments of {unit.code(value)}' + (
          f': {_optax_text.UNPACKED_GROUP}' if call else '')
    calls.append(call)
  rates = sorted({c.sources.get('learning_rate', 'None') for c in calls})
  if len(rates) > 1:
    return None, (f'the def {unit.code(name)} is chosen at run time (assigned at lines {lines}) '
                  f'with different learning rates ({", ".join(rates)})')
  return ChosenDef(name.value, tuple(values), tuple(calls)), None


_RANK = {'bit-exact': 0, '1e-6': 1, 'not exact': 2}


def _group_tx(obj, def_unit, def_node, call, sources):
  """(expression, exact, marker text or None) of one built-in def call, given its argument
  ``sources`` (its learning rate the injected one's name, where the object injects it)."""
  result = _optax_text.plain(call.name, sources)
  if result.exact != 'not exact':
    marker = _optax_text.zero_params_marker(call.name)
    return result.expression, 'not exact' if marker else result.exact, marker
  if obj.plain_optax or obj.mode != 'none':
    return (result.expression, result.exact,
            f'{_refusals.NOT_EXACT} the plain optax expression is not exact: '
            f'{result.difference}')
  optim_alias = _optax_text.optim_alias(def_unit, def_node)
  return (_optax_text.exact_transform(call, call.sources, optim_alias), 'bit-exact',
          f'{_refusals.NOT_EXACT} {call.name} has no exact plain optax expression '
          f'({result.difference}); '
          'this is the package\'s exact transform')


def _injected(expression, groups):
  """The ``multi_transform`` ``expression`` as a factory of one learning rate per group, each
  injected (``opt_state.hyperparams['learning_rate_<i>']``), starting at the group's own (0.0
  for none: every apply site sets it then)."""
  keys = [group_key(i) for i in range(len(groups))]
  initial = []
  for key, (*_, call) in zip(keys, groups):
    lr = call.sources.get('learning_rate', 'None')
    initial.append(f'{key}={"0.0" if lr == "None" else lr}')
  return (f'optax.inject_hyperparams(lambda {", ".join(keys)}: {expression}, '
          f'hyperparam_dtype=jnp.float32)({", ".join(initial)})')


def _plan_multi(obj, site, groups, branch=None):
  """``groups``: per (traversal, def) pair, (filter source, traversal value to rewrite or
  None, filter function node, def variable's value to drop or None, DefCall). ``branch``: the
  MultiOptimizer is this one of the defs the create may use (``fom001_create.Branch``)."""
  project = obj.project
  create_plan = obj.files[site.unit.path]
  unit = branch.unit if branch else site.unit
  plan = branch.plan if branch else create_plan
  receiver = _unit.create_receiver(unit, site.node)
  def_node = branch.node if branch else project.def_call(unit, receiver)
  transforms, exact, markers = [], 'bit-exact', []
  label = "'unmatched'"
  for i, (filter_source, rewrite, fn, def_value, call) in reversed(list(enumerate(groups))):
    label = f"'{i}' if {filter_source}('/' + '/'.join(path), value) else {label}"
    if rewrite is not None:
      plan.edits[id(rewrite)] = Edit(RULE, CreateData(filter=unit.code(fn)))
    if def_value is not None and not isinstance(def_value, ChosenDef):
      # ``p_opt = optim.Adam(...)``: now inside the multi_transform
      plan.edits[id(_edits.statement_of(unit, def_value))] = Edit(RULE, CreateData(drop=True))
  inject = obj.mode == 'inject'
  per_group = inject and bool(obj.group_lrs)
  for i, (*_, def_value, call) in enumerate(groups):
    rate = group_key(i) if per_group else 'learning_rate'
    if isinstance(def_value, ChosenDef):   # each branch's value: the transform, or its factory
      for node, branch_call in zip(def_value.nodes, def_value.calls):
        sources = dict(branch_call.sources)
        if inject:
          sources['learning_rate'] = 'learning_rate'
        expression, group_exact, marker = _group_tx(obj, unit, node, branch_call, sources)
        if inject:
          expression = f'lambda learning_rate: {expression}'
        plan.edits[id(node)] = Edit(RULE, CreateData(def_tx=expression))
        exact = max(exact, group_exact, key=_RANK.get)
        if marker:
          plan.mark(node, f'{_refusals.MARKER} {marker}')
      transforms.append(f'{def_value.name}({rate})' if inject else def_value.name)
      continue
    sources = dict(call.sources)
    if inject:
      sources['learning_rate'] = rate
    expression, group_exact, marker = _group_tx(obj, unit, def_node, call, sources)
    transforms.append(expression)
    exact = max(exact, group_exact, key=_RANK.get)
    if marker:
      markers.append(marker)
  expression = _groups.multi_transform_source(
      transforms, labels=(f'lambda params: traverse_util.path_aware_map(lambda path, value: '
                          f'{label}, params)'))
  notes = ['the labels come from a function of the params, which --tx cannot write: convert '
           'this checkpoint per group (see docs/convert.md) or with the package\'s '
           'MultiOptimizer transform']
  if inject:
    if per_group:
      expression = _injected(expression, groups)
    else:   # a learning_rate= override sets every group's: one injected learning rate
      own = {call.sources.get('learning_rate', 'None') for *_, call in groups}
      initial = own.pop() if len(own) == 1 else 'None'
      expression = _optax_text.inject(expression, '0.0' if initial == 'None' else initial)
    plan.needs.add(_edits.JNP)
    if exact == 'bit-exact':
      # As FOM001's injected learning rate: a traced value, the last bit may differ.
      exact = '1e-6'
    which = ('the learning rates learning_rate_0, ... (one per group)' if per_group else
             'the learning rate (every group\'s)')
    notes = [f'{which} injected and set at every apply site; the state is '
             'InjectHyperparamsState around the multi_transform state, which no convert '
             'command writes']
  receiver = _unit.create_receiver(unit, site.node)
  values = None
  if branch is None and isinstance(receiver, cst.Name):
    values = project.assignment_values(unit, receiver)
  if branch is not None:   # the def call becomes the transform; the create passes it on
    plan.edits[id(def_node)] = Edit(RULE, CreateData(def_tx=expression))
    create_plan.edits[id(site.node)] = Edit(RULE, CreateData(tx=None))
  elif values:   # ``opt_def = optim.MultiOptimizer(...)``: the variable holds the transform
    plan.edits[id(values[0])] = Edit(RULE, CreateData(def_tx=expression))
    plan.edits[id(site.node)] = Edit(RULE, CreateData(tx=unit.code(receiver)))
  else:
    plan.edits[id(site.node)] = Edit(RULE, CreateData(tx=expression))
  plan.needs.update({_edits.OPTAX, _edits.TRAVERSE_UTIL})
  create_plan.needs.update({_edits.OPTAX, _edits.TRAIN_STATE})
  for marker in markers:
    plan.mark(def_node if branch else site.node, f'{_refusals.MARKER} {marker}')
  message = f'{unit.code(def_node)} -> optax.multi_transform with labels from the traversals'
  if branch:
    message = f'branch {branch.index + 1} of {branch.count} (line {unit.line(def_node)}): ' + (
        message)
  if inject:
    message += (', each group\'s learning rate injected' if per_group else
                ', the learning rate injected')
  obj.records.append(Record.of(site, 'flagged' if markers else 'rewritten', code=RULE.code,
                               exact=exact, message=message))
  obj.conversions.append(Conversion(unit.path, site.line, expression, exact, '', notes))
