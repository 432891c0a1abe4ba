"""Decisions per optimizer object: rewrite all of its sites, or refuse and mark the blockers.

The plan maps each original node to the rule that rewrites it (and what that rule needs to
know), each statement to the markers above it, and lists one report record per site.
"""
import dataclasses
from typing import Dict, List, Optional, Set, Tuple

import libcst as cst
from libcst import metadata as meta

from .. import _expr
from .. import _expr_tx
from . import _optax
from . import _project
from . import _refusals
from ._report import Record, Conversion


@dataclasses.dataclass
class Edit:
  rule: str          # the Rule.code that rewrites the node
  data: dict


@dataclasses.dataclass
class FilePlan:
  unit: _project.Unit
  edits: Dict[int, Edit] = dataclasses.field(default_factory=dict)
  markers: Dict[int, List[str]] = dataclasses.field(default_factory=dict)
  needs: Set[str] = dataclasses.field(default_factory=set)   # imports: 'optax', 'jnp', ...

  def mark(self, node: cst.CSTNode, text: str):
    stmt = _statement_of(self.unit, node)
    texts = self.markers.setdefault(id(stmt), [])
    if text not in texts:
      texts.append(text)


@dataclasses.dataclass
class Plan:
  files: Dict[str, FilePlan]
  records: List[Record]
  conversions: List[Conversion]


def _statement_of(unit, node):
  while node is not None and not isinstance(
      node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
    node = unit.parent(node)
  return node


class _Group:

  def __init__(self, root):
    self.root = root
    self.sites: List[_project.Site] = []

  @property
  def refused(self):
    return [s for s in self.sites if s.refusal is not None]


def make_plan(project: _project.Project, plain_optax: bool = False) -> Plan:
  files = {u.path: FilePlan(u) for u in project.units}
  records: List[Record] = []
  conversions: List[Conversion] = []
  groups: Dict[tuple, _Group] = {}
  loose: List[_project.Site] = []
  for site in project.sites():
    if site.slot is None:
      loose.append(site)
      continue
    root = project.groups.find(site.slot)
    groups.setdefault(root, _Group(root)).sites.append(site)
  for site in loose:   # subclasses: refused on their own
    files[site.unit.path].mark(site.node, _refusals.marker_text(site.refusal))
    records.append(Record.of(site, 'refused', message=site.message))
  for group in groups.values():
    _plan_group(project, group, files, records, conversions, plain_optax)
  refused_nodes = set()
  for group in groups.values():
    for site in group.sites:
      if group.refused:
        refused_nodes.update({id(site.node), id(_statement_of(site.unit, site.node))})
  for site in loose:
    refused_nodes.update({id(site.node), id(_statement_of(site.unit, site.node))})
  for unit in project.units:
    _leftovers(unit, files[unit.path], refused_nodes, records)
  records.sort(key=lambda r: (r.path, r.line))
  return Plan(files, records, conversions)


def _leftovers(unit, plan, handled, records):
  """Refuses (FOM112) every legacy name that no rule rewrites and no refusal covers.

  E.g. a def passed to a function (``make(optim.Adam(0.1))``): the analysis does not follow
  defs through calls, and a silent leftover would pass ``--check``.
  """
  unit.module.visit(_LeftoverVisitor(unit, plan, handled, records))


_STATEMENT_RULES = ('FOM011', 'FOM012')


class _LeftoverVisitor(cst.CSTVisitor):

  def __init__(self, unit, plan, handled, records):
    super().__init__()
    self.unit, self.plan, self.handled, self.records = unit, plan, handled, records

  def on_visit(self, node) -> bool:
    unit, plan = self.unit, self.plan
    edit = plan.edits.get(id(node))
    # A gradient statement (FOM011, FOM012) is rebuilt from its rewritten parts: look inside.
    if id(node) in self.handled or (edit and edit.rule not in _STATEMENT_RULES) or isinstance(
        node, (cst.Import, cst.ImportFrom)):
      return False
    if isinstance(node, (cst.Name, cst.Attribute)) and unit.legacy(node) == 'DynamicScale':
      plan.edits[id(node)] = Edit('FOM010', {})
      plan.needs.add('dynamic_scale')
      self.records.append(Record(unit.path, unit.line(node), 'FOM010', 'rewritten', 'bit-exact',
                                 f'{unit.code(node)} -> dynamic_scale_lib.DynamicScale'))
      return False
    if isinstance(node, (cst.Name, cst.Attribute)) and unit.legacy(node):
      plan.mark(node, _refusals.marker_text(_refusals.UNFOLLOWED))
      self.records.append(Record(unit.path, unit.line(node), _refusals.UNFOLLOWED.code,
                                 'refused', '',
                                 f'{unit.code(node)}: {_refusals.UNFOLLOWED.reason}'))
      return False
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and (
        node.func.attr.value == 'optax_transform'):
      return False   # the package's exact transform, kept on purpose (flagged FOM009)
    return True


def _def_site_check(project, group, files) -> dict:
  """Refusals that come from the defs of the group's create calls; ``{id(site): groups}``.

  ``groups`` (for a MultiOptimizer or ``create(focus=...)``) lists per (traversal, def) pair
  the filter's source, the traversal variable's value to rewrite (or None) and the def call.
  """
  multis = {}
  for site in list(group.sites):
    if site.kind != 'create':
      continue
    unit = site.unit
    call = project.def_call(unit, site.node.func.value)
    name = unit.legacy(call.func)
    if name == 'WeightNorm':
      site.refusal, site.message = _refusals.WEIGHT_NORM, unit.code(call)
    elif name == 'MultiOptimizer':
      pairs = []
      for arg in call.args:
        value = arg.value
        if arg.keyword is None and not arg.star and isinstance(value, cst.Tuple) and len(
            value.elements) == 2:
          pairs.append((value.elements[0].value, value.elements[1].value))
        else:
          pairs = None
          break
      multis[id(site)] = _multi_groups(project, unit, pairs) if pairs else None
      if multis[id(site)] is None or len(site.node.args) != 1:
        site.refusal, site.message = _refusals.MULTI, unit.code(call)
    elif name not in _project.BUILTIN_DEFS:
      site.refusal, site.message = _refusals.UNKNOWN_DEF, unit.code(call)
    elif any(a.keyword and a.keyword.value == 'focus' for a in site.node.args) or len(
        site.node.args) > 1:
      focus = _project.call_arg(site.node, 1, 'focus')
      multis[id(site)] = _multi_groups(project, unit, [(focus, call)])
      if multis[id(site)] is None or len(site.node.args) != 2:
        site.refusal, site.message = _refusals.MULTI, 'create(..., focus=...)'
    elif _optax.def_call(name, call, unit.module) is None:
      site.refusal, site.message = _refusals.UNKNOWN_DEF, f'{unit.code(call)}: arguments'
    elif any(n.startswith('flax.nn.') for node in unit.nodes
             if isinstance(node, (cst.Name, cst.Attribute)) for n in unit.names(node)):
      site.refusal, site.message = _refusals.PRE_LINEN, 'this file uses flax.nn'
    # A def variable must be used only as this create's receiver.
    receiver = site.node.func.value
    if site.refusal is None and isinstance(receiver, cst.Name):
      uses = _accesses(unit, receiver)
      if uses is None or len(uses) != 1:
        site.refusal = _refusals.ESCAPE
        site.message = f'the def {receiver.value} is used elsewhere too'
  return multis


def _multi_groups(project, unit, pairs):
  """Per ``(traversal, def)`` pair: (filter source, traversal value to rewrite, DefCall)."""
  groups = []
  for traversal, def_node in pairs:
    rewrite = None
    if isinstance(traversal, cst.Name):
      values = project.assignment_values(unit, traversal)
      uses = _accesses(unit, traversal)
      if not values or len(values) != 1 or uses is None or not all(
          isinstance(unit.parent(u), (cst.Element, cst.Arg)) for u in uses):
        return None
      rewrite, filter_source = values[0], unit.code(traversal)
      traversal = values[0]
    else:
      filter_source = None
    if not (isinstance(traversal, cst.Call) and 'ModelParamTraversal' in {
        n.rsplit('.', 1)[-1] for n in unit.names(traversal.func)} and len(traversal.args) == 1):
      return None
    fn = traversal.args[0].value
    if filter_source is None:
      filter_source = unit.code(fn)
      if not isinstance(fn, (cst.Name, cst.Attribute)):
        filter_source = f'({filter_source})'
    name = unit.legacy(def_node.func) if isinstance(def_node, cst.Call) else None
    if name not in _project.BUILTIN_DEFS:
      return None
    call = _optax.def_call(name, def_node, unit.module)
    if call is None or call.sources.get('learning_rate', 'None') == 'None':
      return None
    groups.append((filter_source, rewrite, fn, call))
  return groups


def _accesses(unit, name: cst.Name):
  scope = unit.scopes.get(name)
  if scope is None:
    return None
  nodes = []
  for a in scope[name.value]:
    if not isinstance(a, meta.Assignment):
      return None
    nodes.extend(access.node for access in a.references)
  return nodes


def _plan_group(project, group, files, records, conversions, plain_optax):
  multis = _def_site_check(project, group, files)
  creates = [s for s in group.sites if s.kind == 'create']
  # ``optimize(loss_fn, **overrides)`` applies the gradient as ``apply_gradient`` does: the same
  # overrides, learning-rate mode and gradient average (one whose shape is refused is left out).
  applies = [s for s in group.sites
             if s.kind == 'apply' or (s.kind == 'optimize' and s.refusal is None)]
  # Learning-rate overrides and other hyper-parameter overrides.
  overrides = {}
  for site in applies:
    lr = None
    for arg in site.node.args[1:]:
      if arg.keyword is None or arg.keyword.value != 'learning_rate':
        if site.kind == 'apply' and arg.keyword is not None and arg.keyword.value == 'grads':
          continue
        site.refusal, site.message = _refusals.OVERRIDE, site.unit.code(arg)
        if arg.keyword is not None and arg.keyword.value == 'hyper_params':
          site.refusal = _refusals.GROUP_HYPER_PARAMS
      else:
        lr = arg.value
    overrides[id(site)] = lr
  calls = {}
  for site in creates:
    if site.refusal is None and id(site) in multis:
      calls[id(site)] = multis[id(site)]
      if any(overrides.values()):
        site.refusal = _refusals.OVERRIDE
        site.message = 'a learning_rate= override of a MultiOptimizer (every group)'
    elif site.refusal is None:
      call = project.def_call(site.unit, site.node.func.value)
      calls[id(site)] = _optax.def_call(site.unit.legacy(call.func), call, site.unit.module)
  pmeans = _replication(project, group, applies)
  mode, schedule = _lr_mode(project, group, applies, overrides, creates)
  if mode == 'inject':
    for site in applies:
      if overrides[id(site)] is None:
        lrs = {calls[id(c)].sources.get('learning_rate') for c in creates if id(c) in calls}
        if len(lrs) != 1 or not (lrs <= {None} or _optax.is_literal(next(iter(lrs)))):
          site.refusal = _refusals.LR_NONE
          site.message = 'applied without learning_rate= while other sites set it'
      if not _project.plain_reference(site.node.func.value):
        site.refusal = _refusals.ESCAPE
        site.message = 'the learning rate is set on a computed value'
  elif mode == 'none':
    for c in creates:
      if id(c) in calls and id(c) not in multis and calls[id(c)].sources.get(
          'learning_rate', 'None') == 'None':
        c.refusal, c.message = _refusals.LR_NONE, 'learning_rate=None and no override'
  if group.refused:
    for site in group.refused:
      files[site.unit.path].mark(site.node, _refusals.marker_text(site.refusal))
      records.append(Record.of(site, 'refused', message=site.message))
    blocked = [s for s in group.sites if s.refusal is None]
    for site in blocked:
      records.append(Record.of(site, 'refused', code=group.refused[0].refusal.code,
                               message=f'not rewritten: this optimizer is refused '
                                       f'({group.refused[0].refusal.code} at '
                                       f'{group.refused[0].unit.path}:{group.refused[0].line})'))
    return
  keep_layout = any(s.slot and s.slot[0] == 'field' for s in group.sites) or any(
      k[0] == 'field' for k in _members(project, group.root))
  for site in group.sites:
    plan = files[site.unit.path]
    if site.kind == 'create' and id(site) in multis:
      _plan_multi(project, site, plan, multis[id(site)], plain_optax, records, conversions)
    elif site.kind == 'create':
      _plan_create(project, site, plan, calls[id(site)], mode, schedule, plain_optax,
                   records, conversions, keep_layout)
    elif site.kind == 'compute_gradient':
      assign = site.unit.parent(site.node)
      plan.edits[id(assign)] = Edit('FOM011', {})
      plan.needs.add('jax')
      records.append(Record.of(site, 'rewritten', code='FOM011',
                               message='compute_gradient -> jax.value_and_grad'))
    elif site.kind in ('replicate', 'unreplicate'):
      plan.edits[id(site.node)] = Edit('FOM007', {'kind': site.kind})
      plan.needs.add('jax_utils')
      records.append(Record.of(site, 'rewritten', code='FOM007',
                               message=f'{site.unit.code(site.node)} -> '
                                       f'jax_utils.{site.kind}(...)'))
    elif site.kind in ('apply', 'optimize'):
      data = {'lr': overrides[id(site)] if mode == 'inject' else None, 'mode': mode,
              'pmean': pmeans.get(id(site))}
      if pmeans.get(id(site)):
        plan.needs.add('jax')
      if mode == 'inject':
        lr = overrides[id(site)]
        if lr is None:
          lr_text = next(iter({calls[id(c)].sources.get('learning_rate') for c in creates}))
          data['lr_text'] = lr_text
      how = {'schedule': ' (learning rate from the schedule in tx)',
             'inject': ' (learning rate set in opt_state.hyperparams)'}.get(mode, '')
      if site.kind == 'apply':
        plan.edits[id(site.node)] = Edit('FOM004', data)
        records.append(Record.of(site, 'rewritten', code='FOM004',
                                 message='apply_gradient -> apply_gradients' + how))
      else:   # the statement ``new, loss[, aux] = opt.optimize(...)`` becomes two
        data['grads'] = _fresh_name(site.unit, site.node, 'grads')
        plan.edits[id(_statement_of(site.unit, site.node))] = Edit('FOM012', data)
        plan.needs.add('jax')
        records.append(Record.of(site, 'rewritten', code='FOM012',
                                 message='optimize -> jax.value_and_grad, then apply_gradients'
                                 + how))
      if mode != 'none':
        plan.needs.add('jnp' if mode == 'inject' else 'optax')
    elif site.kind in ('target', 'step', 'replace', 'annotation'):
      code = {'target': 'FOM002', 'step': 'FOM003', 'replace': 'FOM005',
              'annotation': 'FOM006'}[site.kind]
      plan.edits[id(site.node)] = Edit(code, {})
      if site.kind == 'annotation':
        plan.needs.add('train_state')
      shown = site.node.annotation if site.kind == 'annotation' else site.node
      records.append(Record.of(site, 'rewritten', code=code, message=site.unit.code(shown)))


def _replication(project, group, applies):
  """``{id(apply site): axis name}`` where a ``replicate()`` d optimizer averaged the grads.

  Legacy ``optimizer.replicate(axis_name=A)`` makes ``apply_gradient`` average the gradients
  over ``A`` inside ``pmap``; a TrainState does not, so an apply site in a function that is
  pmapped over ``A`` gets ``jax.lax.pmean(grads, axis_name=A)``, unless that function already
  averages those grads itself (a replicated plain optimizer needs it; averaging averaged grads
  again changes nothing). Without such a pmap the replication is refused.
  """
  replicates = [s for s in group.sites if s.kind == 'replicate']
  if not replicates:
    return {}
  axes = set()
  for site in replicates:
    axis = _project.call_arg(site.node, 1, 'axis_name')
    if axis is None:
      axes.add('batch')
    elif isinstance(axis, cst.SimpleString):
      axes.add(axis.evaluated_value)
    else:
      site.refusal, site.message = _refusals.REPLICATE, f'axis_name={site.unit.code(axis)}'
      return {}
  if len(axes) != 1:
    for site in replicates:
      site.refusal, site.message = _refusals.REPLICATE, 'replicated over several axes'
    return {}
  axis = axes.pop()
  pmeans = {}
  for site in applies:
    fdef = site.unit.enclosing(site.node, (cst.FunctionDef,))
    if fdef is not None and axis in project.pmap_axes.get(id(fdef), ()):
      grads = next((a.value for a in site.node.args if a.keyword is None), None) if (
          site.kind == 'apply') else None   # optimize's gradient is the rewrite's own
      if not _averaged(project, site.unit, fdef, grads, axis):
        pmeans[id(site)] = axis
  if not any(axis in project.pmap_axes.get(id(site.unit.enclosing(site.node, (cst.FunctionDef,))),
                                           ()) for site in applies):
    for site in replicates:
      site.refusal = _refusals.REPLICATE
      site.message = (f'{site.unit.code(site.node)}: no apply_gradient under '
                      f'pmap(axis_name={axis!r})')
  return pmeans


def _averaged(project, unit, fdef, grads, axis) -> bool:
  """Whether ``grads`` (a name) is assigned ``jax.lax.pmean(..., axis_name=axis)`` in ``fdef``."""
  if not isinstance(grads, cst.Name):
    return False
  for node in _project.walk(fdef):
    if isinstance(node, cst.Assign) and isinstance(node.value, cst.Call) and any(
        isinstance(t.target, cst.Name) and t.target.value == grads.value for t in node.targets):
      call = node.value
      if 'jax.lax.pmean' in unit.names(call.func) or 'jax.lax.pmean' in unit.names(call):
        name = _project.call_arg(call, 1, 'axis_name')
        if isinstance(name, cst.SimpleString) and name.evaluated_value == axis:
          return True
  return False


def _fresh_name(unit, node, base) -> str:
  """``base``, or ``base_1``, ...: a variable name that nothing in ``node``'s scope mentions.

  The scope is the enclosing function (nested functions and comprehensions included, so no
  closure sees the new variable), or the whole module at module level.
  """
  scope = unit.enclosing(node, (cst.FunctionDef,)) or unit.module
  used = _project.mentioned_names(unit, scope)
  name, i = base, 0
  while name in used:
    i += 1
    name = f'{base}_{i}'
  return name


def _members(project, root):
  return [s for s in project.optimizer_slots if project.groups.find(s) == root]


def _plan_create(project, site, plan, call, mode, schedule, plain_optax, records, conversions,
                 keep_layout):
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
  flagged = None
  if exact == 'not exact':
    if plain_optax or mode != 'none':
      flagged = f'FOM009 the plain optax expression is not exact: {result.difference}'
    else:
      optim_alias = _optim_alias(unit, project.def_call(unit, site.node.func.value))
      expression = _optax.exact_transform(call, call.sources, optim_alias)
      flagged = (f'FOM009 {call.name} has no exact plain optax expression '
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
  if mode == 'inject':
    cmd_tx = _optax.inject(cmd_tx, _optax.LR_STAND_IN)
  stand_ins = _optax.stand_ins(call)
  if stand_ins:
    notes.append('run-time values replaced in the command by same-layout stand-ins: '
                 + ', '.join(f'{k}={v}' for k, v in stand_ins.items()))
  receiver = site.node.func.value
  def_assign = None
  if isinstance(receiver, cst.Name):
    values = project.assignment_values(unit, receiver)
    def_assign = values[0] if values else None
  plan.edits[id(site.node)] = Edit('FOM001', {'tx': None if def_assign is not None else expression})
  if def_assign is not None:
    plan.edits[id(def_assign)] = Edit('FOM001', {'def_tx': expression})
  plan.needs.update({'optax', 'train_state'})
  if flagged:
    plan.mark(site.node, f'{_refusals.MARKER} {flagged}')
  status = 'flagged' if flagged else 'rewritten'
  message = f'{unit.code(project.def_call(unit, receiver))}.create -> TrainState.create'
  if notes:
    message += '; ' + '; '.join(notes)
  records.append(Record.of(site, status, code='FOM001', exact=exact, message=message))
  keep = ' --keep-layout' if keep_layout else ''
  command = (f'flax-optim-compat convert <IN> --optimizer "{_optax.command_optimizer(call)}" '
             f'--tx "{cmd_tx}" --to train-state --out <OUT>{keep}')
  try:
    _expr_tx.parse_tx(cmd_tx)
  except _expr.ExpressionError as e:
    command = ''
    notes.append(f'no convert command: its --tx cannot be written on the command line ({e})')
  conversions.append(Conversion(unit.path, site.line, expression, exact, command, notes))


def _group_tx(project, site, call, plain_optax):
  """(expression, exact, marker text or None) of one built-in def call."""
  result = _optax.plain(call.name, call.sources)
  if result.exact != 'not exact':
    return result.expression, result.exact, None
  if plain_optax:
    return (result.expression, result.exact,
            f'FOM009 the plain optax expression is not exact: {result.difference}')
  optim_alias = _optim_alias(site.unit, project.def_call(site.unit, site.node.func.value))
  return (_optax.exact_transform(call, call.sources, optim_alias), result.exact,
          f'FOM009 {call.name} has no exact plain optax expression ({result.difference}); '
          'this is the package\'s exact transform')


_RANK = {'bit-exact': 0, '1e-6': 1, 'not exact': 2}


def _plan_multi(project, site, plan, groups, plain_optax, records, conversions):
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
      plan.edits[id(rewrite)] = Edit('FOM008', {'filter': unit.code(fn)})
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
    plan.edits[id(values[0])] = Edit('FOM008', {'def_tx': expression})
    plan.edits[id(site.node)] = Edit('FOM008', {'tx': unit.code(receiver)})
  else:
    plan.edits[id(site.node)] = Edit('FOM008', {'tx': expression})
  plan.needs.update({'optax', 'train_state', 'traverse_util'})
  for marker in markers:
    plan.mark(site.node, f'{_refusals.MARKER} {marker}')
  message = (f'{unit.code(project.def_call(unit, site.node.func.value))} -> '
             'optax.multi_transform with labels from the traversals')
  notes = ['the labels come from a function of the params, which --tx cannot write: convert '
           'this checkpoint per group (see the migration guide) or with the package\'s '
           'MultiOptimizer transform']
  records.append(Record.of(site, 'flagged' if markers else 'rewritten', code='FOM008',
                           exact=exact, message=message))
  conversions.append(Conversion(unit.path, site.line, expression, exact, '', notes))


def _optim_alias(unit, call) -> str:
  func = call.func
  if isinstance(func, cst.Attribute):
    return unit.code(func.value)
  return 'optim'


def _lr_mode(project, group, applies, overrides, creates) -> Tuple[str, Optional[str]]:
  """('none' | 'schedule' | 'inject', the schedule's source)."""
  if not applies or all(overrides[id(s)] is None for s in applies):
    return 'none', None
  if any(overrides[id(s)] is None for s in applies):
    return 'inject', None
  schedules = set()
  for site in applies:
    text = _schedule(project, site.unit, overrides[id(site)], site.node.func.value, creates)
    if text is None:
      return 'inject', None
    schedules.add(text)
  if len(schedules) != 1:
    return 'inject', None
  return 'schedule', schedules.pop()


def _schedule(project, unit, lr, receiver, creates) -> Optional[str]:
  """``lr`` as a function of the receiver's step, or None when it is not provably one."""
  globals_used: List[cst.CSTNode] = []
  body = _step_function(project, unit, lr, receiver, globals_used, 0)
  if body is None:
    return None
  for c in creates:
    if c.unit is not unit:
      return None
    if not _all_defined_before(unit, globals_used, c.node):
      return None
  code = cst.Module([]).code_for_node(body)
  if (isinstance(body, cst.Call) and len(body.args) == 1
      and isinstance(body.args[0].value, cst.Name)
      and body.args[0].value.value == _COUNT and body.args[0].keyword is None
      and not _mentions_count(body.func)):
    return cst.Module([]).code_for_node(body.func)
  return f'lambda {_COUNT}: {code}'


_COUNT = 'count'


def _mentions_count(node) -> bool:
  if isinstance(node, cst.Name) and node.value == _COUNT:
    return True
  return any(_mentions_count(c) for c in node.children)


def _all_defined_before(unit, names, create) -> bool:
  in_function = unit.enclosing(create, (cst.FunctionDef,)) is not None
  if in_function:
    return True
  line = unit.line(create)
  for name in names:
    scope = unit.scopes.get(name)
    for a in scope[name.value]:
      if isinstance(a, meta.Assignment) and unit.line(a.node) >= line:
        return False
  return True


def _is_step_of(node, receiver) -> bool:
  return (isinstance(node, cst.Attribute) and node.attr.value == 'step'
          and isinstance(node.value, cst.Attribute) and node.value.attr.value == 'state'
          and node.value.value.deep_equals(receiver))


def _step_function(project, unit, expr, receiver, globals_used, depth):
  """``expr`` with the receiver's ``state.step`` as ``count``; None if anything else varies."""
  if depth > 6:
    return None
  if _is_step_of(expr, receiver):
    return cst.Name(_COUNT)
  if isinstance(expr, cst.Name):
    if expr.value == _COUNT:
      return None
    scope = unit.scopes.get(expr)
    if scope is None:
      return None
    assignments = list(scope[expr.value])
    if all(isinstance(a, meta.BuiltinAssignment) for a in assignments) and assignments:
      return expr
    if assignments and all(isinstance(a.scope, meta.GlobalScope) for a in assignments):
      globals_used.append(expr)
      return expr
    values = project.assignment_values(unit, expr)
    if values is None or len(values) != 1:
      return None
    inner = _step_function(project, unit, values[0], receiver, globals_used, depth + 1)
    if inner is None:
      return None
    if isinstance(inner, (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer,
                          cst.Float)) or inner.lpar:
      return inner
    return inner.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
  if isinstance(expr, cst.Attribute):
    base = _step_function(project, unit, expr.value, receiver, globals_used, depth)
    return None if base is None else expr.with_changes(value=base)
  if isinstance(expr, (cst.Lambda, cst.NamedExpr, cst.Await, cst.Yield, cst.GeneratorExp,
                       cst.ListComp, cst.DictComp, cst.SetComp)):
    return None
  if isinstance(expr, (cst.Integer, cst.Float, cst.SimpleString)):
    return expr
  replaced = {}
  for child in _expressions_in(expr):
    new = _step_function(project, unit, child, receiver, globals_used, depth)
    if new is None:
      return None
    replaced[id(child)] = new
  return expr.visit(_Replace(replaced))


def _expressions_in(node):
  """The direct sub-expressions of ``node`` that are evaluated (not keyword names)."""
  found = []
  for child in node.children:
    if isinstance(child, cst.Arg):
      found.append(child.value)
    elif isinstance(child, cst.BaseExpression):
      found.append(child)
    elif isinstance(child, (cst.Arg, cst.Element, cst.SubscriptElement, cst.Index,
                            cst.ComparisonTarget, cst.BaseSlice)):
      found.extend(_expressions_in(child))
    elif isinstance(child, (cst.LeftParen, cst.RightParen, cst.BaseParenthesizableWhitespace,
                            cst.BaseBinaryOp, cst.BaseUnaryOp, cst.BaseCompOp,
                            cst.BaseBooleanOp, cst.Comma, cst.Colon, cst.LeftSquareBracket,
                            cst.RightSquareBracket, cst.AssignEqual, cst.Dot)):
      continue
    elif isinstance(child, cst.Name):
      continue
    else:
      found.extend(_expressions_in(child))
  return found


class _Replace(cst.CSTTransformer):

  def __init__(self, replaced):
    super().__init__()
    self.replaced = replaced

  def on_visit(self, node):
    return id(node) not in self.replaced

  def on_leave(self, original_node, updated_node):
    return self.replaced.get(id(original_node), updated_node)
