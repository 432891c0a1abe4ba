"""Decisions per optimizer object: rewrite all of its sites, or refuse and mark the blockers.

The plan maps each original node to the rule that rewrites it (and what that rule needs to
know), each statement to the markers above it (``_edits``), and lists one report record per
site. An object is refused as a whole when one of its sites is: a def the tool does not
rewrite, a hyper-parameter override, a replication without its pmap, a use the analysis cannot
follow. Otherwise what holds for the whole object (its defs, the learning-rate mode from
``_learning_rate``, the gradient average of a replicated optimizer) is decided here, as an
``ObjectPlan``, and each site is handed to its rule (``rules.claiming``), which plans its edits.
"""
import dataclasses
import os
from typing import Dict, List, Optional

import libcst as cst

from . import _learning_rate
from . import _leftovers
from . import _optax_text
from . import _project
from . import _refusals
from . import _shared_layout
from . import _sites
from . import _unit
from . import rules
from .rules import fom015_group_hyper_params as _group_hyper_params
from .rules.fom008_multi import ChosenDef, chosen_def
from ._edits import FilePlan, statement_of
from ._report import Record, Conversion
from ._rule import ObjectPlan


@dataclasses.dataclass
class Plan:
  files: Dict[str, FilePlan]
  records: List[Record]
  conversions: List[Conversion]
  refused: List[list]   # the sites of each refused object


class _Group:

  def __init__(self, root):
    self.root = root
    self.sites: List[_sites.Site] = []

  @property
  def refused(self):
    return [s for s in self.sites if s.refusal is not None]


def make_plan(project: _project.Project, plain_optax: bool = False) -> Plan:
  files = {u.path: FilePlan(u) for u in project.units}
  records: List[Record] = []
  conversions: List[Conversion] = []
  groups: Dict[tuple, _Group] = {}
  loose: List[_sites.Site] = []
  found = _sites.sites(project)
  for site in found:
    if site.slot is None:
      loose.append(site)
      continue
    root = project.groups.find(site.slot)
    groups.setdefault(root, _Group(root)).sites.append(site)
  for site in loose:   # subclasses: refused on their own
    files[site.unit.path].mark(site.node, _refusals.marker_text(site.refusal))
    records.append(Record.of(site, 'refused', message=site.message))
  # Objects created in sight first: an object whose create is out of sight may be one of
  # theirs that escaped the analysis, and is then refused too (never half-rewritten).
  ordered = sorted(groups.values(), key=lambda g: not _creates(g))
  escaped = _loose_defs(project, groups.values())
  decided = []
  for group in ordered:
    unseen = escaped if not _creates(group) else None
    decided.append((group, _decide(project, group, records, conversions, files, plain_optax,
                                   unseen)))
    if escaped is None and any(s.kind == 'escape' for s in group.sites):
      site = next(s for s in group.sites if s.kind == 'escape')
      escaped = f'an optimizer that escapes the analysis at {_unit.at(site.unit, site.node)}'
  # Objects saved or restored with more than one learning-rate mode: each injects its own.
  inject = _shared_layout.to_inject(project, found, decided)
  decided = [(g, _decide(project, g, records, conversions, files, plain_optax, None, inject[id(g)])
              if id(g) in inject else obj) for g, obj in decided]
  # A refusal decided here for the whole object (FOM108-FOM111, FOM102 ...) spreads to the
  # objects that meet it, as the refusals of single sites did in ``_sites``: all decided first.
  _sites.refuse_together(project, found)
  for group, obj in decided:
    if group.refused:
      _refuse(group, files, records)
    else:
      planned = len(conversions)
      for site in group.sites:
        rules.claiming(site, obj).plan(site, obj)
      for conversion in conversions[planned:]:   # ``{'actor': opt_a, ...}`` saved as one file
        conversion.notes.extend(project.dict_notes(group.root))
  refused_nodes, told = set(), set()
  for group in groups.values():
    if group.refused:
      site_files = {s.unit.path for s in group.sites}
      for site in group.sites:
        refused_nodes.update({id(site.node), id(statement_of(site.unit, site.node))})
        if site.kind == 'create' and project.opaque_def(   # its def: ``opt_def = optim.Adam()``
            site.unit, _unit.create_receiver(site.unit, site.node)) is None:
          values = _def_values(project, site)
          refused_nodes.update(id(statement_of(site.unit, v)) for v in values)
          for u, call in project.def_branches(
              site.unit, _unit.create_receiver(site.unit, site.node)) or ():
            refused_nodes.add(id(statement_of(u, call)))
            if u.path not in site_files and id(call) not in told:
              told.add(id(call))   # a def a helper's create takes, in a file of its own
              _tell_blocked(group, u, call, files, records)
          # the variables its def reads: ``t = optim.ModelParamTraversal(fn)`` of a group
          call = project.def_call(site.unit, _unit.create_receiver(site.unit, site.node))
          calls = [(site.unit, call)] if call is not None else list(project.def_branches(
              site.unit, _unit.create_receiver(site.unit, site.node)) or ())
          for unit, call in calls:
            for name in _unit.walk(call):
              if isinstance(name, cst.Name):
                refused_nodes.update(id(statement_of(unit, v))
                                     for v in project.assignment_values(unit, name) or ())
  for site in loose:
    refused_nodes.update({id(site.node), id(statement_of(site.unit, site.node))})
  for late in (False, True):   # then Rule.after_the_project's, once a flax.optim use is rewritten
    if late and not any(r.status == 'rewritten' and r.code.startswith('FOM0') for r in records):
      break
    if late:   # FOM014 reads a raw checkpoint by the fields now holding a TrainState
      fields = _optimizer_fields(project, files)
      for file_plan in files.values():
        file_plan.optimizer_fields = fields
    for unit in project.units:
      unit.module.visit(_leftovers.LeftoverVisitor(project, unit, files[unit.path],
                                                   refused_nodes, records, late))
  records.sort(key=lambda r: (r.path, r.line))
  return Plan(files, records, conversions,
              [g.sites for g in groups.values() if g.refused])


def _optimizer_fields(project, files) -> frozenset:
  """The names of the project's class fields whose legacy ``Optimizer`` annotation FOM006
  rewrites to a TrainState (``optimizer: flax.optim.Optimizer`` in a dataclass), in any file:
  not one whose optimizer is refused, which keeps legacy's layout."""
  def rewritten(unit, annotation):
    edits = files[unit.path].edits
    return any(edit.rule.code == 'FOM006' and not isinstance(edit.data, str) for edit in (
        edits.get(id(n)) for n in _unit.walk(annotation)) if edit is not None)
  return frozenset(
      node.target.value for unit in project.units for node in unit.nodes
      if isinstance(node, cst.AnnAssign) and isinstance(node.target, cst.Name)
      and isinstance(unit.enclosing(node, (cst.ClassDef, cst.FunctionDef)), cst.ClassDef)
      and rewritten(unit, node.annotation))


def _creates(group) -> bool:
  return any(s.kind == 'create' for s in group.sites)


def _loose_defs(project, groups) -> Optional[str]:
  """A def call that is not the def of any create the analysis sees (a def passed to a
  function, returned by a helper), named for a message, or None: its optimizer may be one
  created out of sight."""
  seen = {id(call) for g in groups for s in g.sites if s.kind == 'create'
          for _, call in project.def_branches(s.unit, _unit.create_receiver(s.unit, s.node)) or ()}
  for unit in project.units:   # a MultiOptimizer's group defs, inline or through a variable
    for node in unit.nodes:
      if id(node) in seen and unit.legacy(node.func) == 'MultiOptimizer':
        for inner in _unit.walk(node):
          # a group's def variable: its one value, or its value in each branch
          found = (project.assignment_values(unit, inner) or [] if isinstance(inner, cst.Name)
                   else [inner])
          seen.update(id(v) for v in found if isinstance(v, cst.Call))
  loose = next(((unit, node) for unit in project.units for node in unit.nodes
                if isinstance(node, cst.Call) and unit.legacy(node.func) in _DEFS
                and id(node) not in seen), None)
  if loose is None:
    return None
  return (f'the def {_unit.short(loose[0].code(loose[1]), 40)} at {_unit.at(*loose)} goes '
          'where the analysis does not follow it (FOM112), and may create it')


_DEFS = _leftovers.DEFS


def _def_values(project, site):
  receiver = _unit.create_receiver(site.unit, site.node)
  if isinstance(receiver, cst.Name):
    return project.assignment_values(site.unit, receiver) or []
  return []


def _refused_pre_linen(project, site, unit) -> bool:
  """Refuses ``site`` (FOM105) where its file, or ``unit`` where its def is, is pre-Linen."""
  why = project.pre_linen(unit) or project.pre_linen(site.unit)
  if why:
    site.refusal, site.message = _refusals.PRE_LINEN, why
  return bool(why)


def _def_site_check(project, group) -> dict:
  """Refusals that come from the defs of the group's create calls; ``{id(site): groups}``.

  ``groups`` (for a MultiOptimizer or ``create(focus=...)``) lists per (traversal, def) pair
  the filter's source, the traversal variable's value to rewrite (or None) and the def call.
  """
  multis = {}
  for site in list(group.sites):
    if site.kind != 'create' or _refused_pre_linen(project, site, site.unit):
      continue   # flax.nn first, whatever the def (flax_bert's ``optimizer_cls = optim.Adam``)
    unit = site.unit
    receiver = _unit.create_receiver(unit, site.node)
    beside = isinstance(receiver, cst.Name) and _project.def_read_beside(unit, receiver)
    if beside:   # ``save_hp(opt_def)`` beside ``opt_def.create(params)``
      site.refusal = _refusals.UNFOLLOWED
      site.message = (f'{_unit.short(unit.code(site.node))}: its def is {beside}, where the '
                      'analysis does not follow it (a def variable is followed only as the '
                      'receiver of .create(...))')
      continue
    call = project.def_call(unit, receiver)
    if call is None:
      _branch_check(project, site)
      continue
    name = unit.legacy(call.func)
    if name is None and project.is_user_def(unit, call.func):
      site.refusal, site.message = _refusals.SUBCLASS, f'{unit.code(call)}: a user subclass'
    elif name == 'WeightNorm':
      site.refusal, site.message = _refusals.WEIGHT_NORM, unit.code(call)
    elif name == 'MultiOptimizer':
      multis[id(site)], why = _multi_of(project, unit, call)
      if multis[id(site)] is None or len(site.node.args) != 1:
        site.refusal, site.message = _refusals.MULTI, f'{unit.code(call)}: {why}'
    elif name not in _unit.BUILTIN_DEFS:
      site.refusal, site.message = _refusals.UNKNOWN_DEF, unit.code(call)
    elif any(a.keyword and a.keyword.value == 'focus' for a in site.node.args) or len(
        site.node.args) > 1:
      focus = _unit.call_arg(site.node, 1, 'focus')
      multis[id(site)], why = _multi_groups(project, unit, [(focus, call)])
      if multis[id(site)] is None or len(site.node.args) != 2:
        site.refusal, site.message = _refusals.MULTI, f'create(..., focus=...): {why}'
    elif _optax_text.def_call(name, call, unit) is None:
      site.refusal = _refusals.UNKNOWN_DEF
      site.message = f'{unit.code(call)}: {_optax_text.unread_arguments(name, call, unit)}'
    else:
      _refused_pre_linen(project, site, unit)
    if site.refusal is None and id(site) in multis and _unit.transformed_create(unit, site.node):
      site.refusal = _refusals.ESCAPE
      site.message = (f'{_unit.short(unit.code(site.node))} creates a MultiOptimizer (or a focus) '
                      f'through {unit.code(site.node.func.func)}, a shape no example measured: '
                      'create it as it is called, then apply the transform to what it returns')
  return multis


def _multi_of(project, unit, call):
  """``_multi_groups`` of a ``MultiOptimizer((traversal, def), ...)`` call."""
  pairs = []
  if not call.args:
    return None, 'no (traversal, def) pair'
  for arg in call.args:
    value = arg.value
    if arg.keyword is None and not arg.star and isinstance(value, cst.Tuple) and len(
        value.elements) == 2:
      pairs.append((value.elements[0].value, value.elements[1].value))
    else:
      return None, 'an argument is not a (traversal, def) pair'
  return _multi_groups(project, unit, pairs)


def _branch_check(project, site):
  """A create whose def is built in branches or by a helper: each branch a built-in def whose
  arguments ``_optax_text`` reads (``site.branches``), or the object is refused."""
  site.branches = []
  receiver = _unit.create_receiver(site.unit, site.node)
  branches = project.def_branches(site.unit, receiver)
  if branches is None:   # ``opaque_def``: ``(partial(MyOpt, ...) if mine else optim.Adam)(...)``
    site.refusal, site.message = _leftovers.opaque_create(project, site.unit, site.node)
    return
  for unit, call in branches:
    if id(call) in project.not_a_def:   # a call site passes its helper something else
      site.refusal, site.message = _refusals.UNKNOWN_DEF, project.not_a_def[id(call)]
      return
    name = unit.legacy(call.func)
    parsed = _optax_text.def_call(name, call, unit) if name in _unit.BUILTIN_DEFS else None
    why, refusal = (_optax_text.unread_arguments(name, call, unit) if name in
                    _unit.BUILTIN_DEFS else 'not a built-in def'), _refusals.UNKNOWN_DEF
    if name is None and project.is_user_def(unit, call.func):   # as for a create's one def
      why, refusal = 'a user subclass of OptimizerDef', _refusals.SUBCLASS
    elif name == 'MultiOptimizer' and len(site.node.args) == 1:   # a list: its groups
      parsed, multi_why = _multi_of(project, unit, call)
      if multi_why:   # a group migrate does not read: the MultiOptimizer's own limit
        why, refusal = multi_why, _refusals.MULTI
    if parsed is None or len(site.node.args) != 1:
      site.refusal = refusal
      where = '' if unit is site.unit else f'{os.path.basename(unit.path)}:'
      site.message = (f'{unit.code(call)} (one of the defs this create may use, line '
                      f'{where}{unit.line(call)}): {why}')
      return
    if _refused_pre_linen(project, site, unit):
      return
    site.branches.append((unit, call, parsed))


def _multi_groups(project, unit, pairs):
  """``(groups, None)``, per ``(traversal, def)`` pair (filter source, traversal value to
  rewrite, filter function, def variable's value to drop, DefCall); else ``(None, why not)``."""
  groups = []
  for i, (traversal, def_node) in enumerate(pairs):
    rewrite = None
    if isinstance(traversal, cst.Name):
      values = project.assignment_values(unit, traversal)
      uses = _unit.accesses(unit, traversal)
      if not values or len(values) != 1 or uses is None or not all(
          isinstance(unit.parent(u), (cst.Element, cst.Arg)) for u in uses):
        return None, (f'group {i}: the traversal {unit.code(traversal)} is not assigned once '
                      'and used only here')
      rewrite, filter_source = values[0], unit.code(traversal)
      traversal = values[0]
    else:
      filter_source = None
    if not (isinstance(traversal, cst.Call) and 'ModelParamTraversal' in {
        n.rsplit('.', 1)[-1] for n in unit.names(traversal.func)} and len(traversal.args) == 1):
      return None, f'group {i}: {unit.code(traversal)} is not ModelParamTraversal(filter_fn)'
    fn = traversal.args[0].value
    if filter_source is None:
      filter_source = unit.code(fn)
      if not isinstance(fn, (cst.Name, cst.Attribute)):
        filter_source = f'({filter_source})'
    def_value = None   # ``p_opt = optim.Adam(...)`` used only in this pair: the line goes
    if isinstance(def_node, cst.Name):
      values = project.assignment_values(unit, def_node)
      uses = _unit.accesses(unit, def_node)
      if not values or uses is None or not all(
          isinstance(unit.parent(u), cst.Element) for u in uses):
        return None, (f'group {i}: the def {unit.code(def_node)} is not assigned once and '
                      'used only here')
      if len(values) > 1:   # chosen in branches: ``p_opt = optim.Adam(...)`` in each
        chosen, why = chosen_def(unit, def_node, values)
        if chosen is None:
          return None, f'group {i}: {why}'
        groups.append((filter_source, rewrite, fn, chosen, chosen.calls[0]))
        continue
      def_value = def_node = values[0]
    name = unit.legacy(def_node.func) if isinstance(def_node, cst.Call) else None
    if name not in _unit.BUILTIN_DEFS:
      return None, f'group {i}: {unit.code(def_node)} is not a built-in def'
    call = _optax_text.def_call(name, def_node, unit)
    if call is None or call.arguments:
      return None, f'group {i}: the arguments of {unit.code(def_node)}' + (
          f': {_optax_text.UNPACKED_GROUP}' if call else '')
    groups.append((filter_source, rewrite, fn, def_value, call))
  return groups, None


# A learning_rate=None optimizer with no update in sight (tmpdjax's checkpoint-restore template).
_NEVER_APPLIED = (': it is never applied (a template to restore a checkpoint into?), and optax '
                  'builds no transform without a learning rate; give the def the one training used')


def _decide(project, group, records, conversions, files, plain_optax, unseen,
            shared_layout='') -> ObjectPlan:
  """What holds for the whole object (its defs, learning-rate mode, gradient average); refuses
  the sites that block it.

  ``unseen``: the object is created out of sight while a def or another object escaped the
  analysis (which, for the message; it may be that one, through an import not resolved), else
  None; ``shared_layout``: why it injects its learning rate whatever its sites do
  (``_shared_layout``).
  """
  multis = _def_site_check(project, group)
  creates = [s for s in group.sites if s.kind == 'create']
  # ``optimize(loss_fn, **overrides)`` applies the gradient as ``apply_gradient`` does: the same
  # overrides, learning-rate mode and gradient average (one whose shape is refused is left out).
  applies = [s for s in group.sites
             if s.kind == 'apply' or (s.kind == 'optimize' and s.refusal is None)]
  overrides, group_lrs = _overrides(applies)
  calls = {}
  for site in creates:
    if site.refusal is None and id(site) not in multis and site.branches is None:
      call = project.def_call(site.unit, _unit.create_receiver(site.unit, site.node))
      calls[id(site)] = _optax_text.def_call(site.unit.legacy(call.func), call, site.unit)
  pmeans, averaged_here = _replication(project, group, applies)
  if group_lrs:   # one learning rate injected per group
    mode, schedule = _multi_mode(project, creates, multis, applies, overrides,
                                  group_lrs), None
  else:
    mode, schedule = _learning_rate.lr_mode(project, applies, overrides, creates)
    if mode == 'schedule' and any(multis.get(id(c)) or any(
        isinstance(b[2], list) for b in c.branches or ()) for c in creates):
      mode, schedule = 'inject', None   # one learning rate injected for every group
  if shared_layout:
    mode, schedule = 'inject', None
  keep_layout = any(s.slot and s.slot[0] == 'field' for s in group.sites) or any(
      k[0] == 'field' for k in _members(project, group.root))
  obj = ObjectPlan(project, files, records, conversions, plain_optax, creates, multis, calls,
                   overrides, pmeans, mode, schedule, keep_layout, group_lrs, averaged_here,
                   shared_layout)
  if mode == 'inject' and group_lrs:
    for site in applies:
      if not _unit.plain_reference(site.node.func.value):
        site.refusal = _refusals.ESCAPE
        site.message = 'the learning rates are set on a computed value'
  elif mode == 'inject':
    for site in applies:   # sets the create's rate (a restored state holds the file's)
      if overrides[id(site)] is None:
        if not (obj.create_lr_texts() == {None} or obj.literal_rate()):
          site.refusal = _refusals.LR_NONE
          site.message = 'applied without learning_rate= while other sites set it'
      if not _unit.plain_reference(site.node.func.value):
        site.refusal = _refusals.ESCAPE
        site.message = 'the learning rate is set on a computed value'
  elif mode == 'none':
    for c in creates:
      branch_groups = [g for b in c.branches or () if isinstance(b[2], list) for g in b[2]]
      for i, (*_, call) in enumerate((multis.get(id(c)) or []) + branch_groups):
        if call.sources.get('learning_rate', 'None') == 'None':
          c.refusal = _refusals.LR_NONE
          c.message = (f'group {i}: {call.name}(...) has no learning rate and no apply site '
                       'sets one')
      if c.refusal is None and 'None' in obj.lr_sources(c, 'None'):
        c.refusal = _refusals.LR_NONE
        c.message = ('learning_rate=None, and no apply site the analysis follows sets a '
                     'learning_rate=' + (' (an update it does not follow may: see its FOM107)'
                                         if any(s.kind == 'escape' for s in group.sites) else
                                         '' if applies else _NEVER_APPLIED))
  if mode == 'inject':
    for c in creates:
      clash = _injected_name_read(c, calls, multis)
      if clash and c.refusal is None:
        c.refusal = _refusals.UNKNOWN_DEF
        c.message = (f'{clash[0]}(...) reads a variable named {clash[1]}, the name the rewrite '
                     'gives the injected learning rate inside the transform: rename the variable')
  made = project.unseen_def_create(group.root) if not creates else None
  if not creates and group.sites and group.refused == [] and (mode != 'none' or unseen or made):
    # Its create (and so its optax form) is decided where the analysis cannot see it.
    site = next((s for s in applies if overrides[id(s)] is not None), group.sites[0])
    site.refusal = _refusals.ESCAPE
    where = unseen or ('an import the analysis cannot resolve, or code outside the given '
                       'files')
    why = (f'its create, {_unit.short(made[0].code(made[1]))} at {_unit.at(*made)}, uses a def '
           'from out of sight (no create the analysis follows)') if made else (
               f'its create is out of sight ({where})')
    site.message = f'{why}, so its optax form cannot be decided here'
  for site in group.sites:
    if site.refusal is not None:
      continue
    rule = rules.claiming(site, obj)
    refused = (_refusals.ESCAPE, f'no rule rewrites {site.unit.code(site.node)}') if (
        rule is None) else rule.refusal(site, obj)
    if refused is not None:
      site.refusal, site.message = refused
  return obj


def _injected_name_read(create, calls, multis):
  """``(def name, variable)`` when an argument of a def this create may use reads a plain
  variable named as an injected learning rate (``learning_rate``, ``learning_rate_<i>``): the
  rewrite's ``inject_hyperparams(lambda learning_rate: ...)`` would shadow it. None if none does
  (an attribute such as ``config.learning_rate`` is not shadowed)."""
  defs = [calls.get(id(create))] + _group_calls(multis.get(id(create)) or ())
  for branch in create.branches or ():
    defs += _group_calls(branch[2]) if isinstance(branch[2], list) else [branch[2]]
  for call in defs:
    for keyword, text in getattr(call, 'sources', {}).items():
      if keyword == 'learning_rate':
        continue
      try:
        node = cst.parse_expression(text)
      except cst.ParserSyntaxError:
        continue
      nodes = _unit.walk(node)
      attributes = {id(a.attr) for a in nodes if isinstance(a, cst.Attribute)}
      for name in nodes:
        if (isinstance(name, cst.Name) and id(name) not in attributes and (
            name.value == 'learning_rate' or (
                name.value.startswith('learning_rate_') and name.value[14:].isdigit()))):
          return call.name, name.value
  return None


def _group_calls(groups) -> list:
  """The DefCalls of a MultiOptimizer's groups: a group's def chosen in branches, each."""
  return [c for g in groups for c in (g[3].calls if isinstance(g[3], ChosenDef) else (g[-1],))]


def _overrides(applies):
  """``({id(apply site): its learning_rate= expression or None}, {id(apply site): per group,
  the learning_rate its hyper_params=[...] sets, or None})``; any other argument refuses it."""
  overrides, group_lrs = {}, {}
  for site in applies:
    lr = None
    for arg in site.node.args[1:]:
      keyword = arg.keyword.value if arg.keyword is not None else None
      if keyword == 'learning_rate':
        lr = arg.value
      elif keyword == 'grads' and site.kind == 'apply':
        continue
      elif keyword == 'hyper_params':
        found = _group_hyper_params.group_overrides(site.unit, site.node.func.value, arg.value)
        if isinstance(found, str):
          site.refusal, site.message = _refusals.GROUP_HYPER_PARAMS, found
        else:
          group_lrs[id(site)] = found
      else:   # another hyper-parameter, or a positional argument (TypeError in legacy)
        site.refusal = _refusals.OVERRIDE
        site.message = site.unit.code(arg) + (
            _refusals.UNPACKED if arg.star == '**' else
            '' if keyword or arg.star else _refusals.POSITIONAL)
    if lr is not None and id(site) in group_lrs:
      site.refusal = _refusals.OVERRIDE
      site.message = 'learning_rate= and hyper_params=[...] at one apply site'
    overrides[id(site)] = lr
  return overrides, group_lrs


def _multi_mode(project, creates, multis, applies, overrides, group_lrs) -> str:
  """``'inject'``, one learning rate per group, for a MultiOptimizer some of whose apply sites
  override its groups (``hyper_params=[...]``). Every def the object may be created from (its
  creates, their branches) must be a MultiOptimizer with as many groups, in sight; else the
  override site is refused naming the def that differs. Refuses the sites that block it."""
  defs = _group_defs(project, creates, multis)
  site = next(s for s in applies if id(s) in group_lrs)
  # A built-in def without groups among them (``optim.Adam(...)`` in one branch): where the
  # optimizer is created from it, legacy raises at the override (``hp[0]`` of its
  # hyper-parameters, not a list: TypeError), and so does the rewrite: the override sets
  # learning rates its injected transform does not take (TypeError).
  plains = [d for d in defs if d[2] is None]
  defs = [d for d in defs if d[2] is not None]
  plain = next((d for d in plains if d[1] is None or d[0].legacy(d[1].func) not in
                _unit.BUILTIN_DEFS), None)
  if plains and defs and plain is None:
    for other in applies:
      if overrides[id(other)] is None and id(other) not in group_lrs:
        other.refusal = _refusals.LR_NONE
        other.message = (f'applied without learning_rate= or hyper_params=, while the optimizer '
                         f'may be created from {_unit.short(plains[0][0].code(plains[0][1]))} '
                         f'({_unit.at(*plains[0][:2])}), a def without groups')
  elif plains and plain is None:
    plain = plains[0]
  if plain is not None or not defs:
    site.refusal = _refusals.GROUP_HYPER_PARAMS
    site.message = ('overrides the groups of an optimizer that is not one MultiOptimizer '
                    'created in sight' if plain is None or plain[1] is None else
                    f'overrides the groups of a MultiOptimizer, but the optimizer may also be '
                    f'created from {_unit.short(plain[0].code(plain[1]))} ({_unit.at(*plain[:2])}), '
                    'a def without groups')
    return 'inject'
  other = next((d for d in defs if len(d[2]) != len(defs[0][2])), None)
  if other is not None:
    site.refusal = _refusals.GROUP_HYPER_PARAMS
    site.message = ('the MultiOptimizers the optimizer may be created from have different '
                    'groups: ' + ' and '.join(
                        f'{len(d[2])} at {_unit.at(*d[:2])}' for d in (defs[0], other)))
    return 'inject'
  count = len(defs[0][2])
  if any(g is None for *_, groups in defs for g in groups):
    return 'inject'   # a group migrate does not read: its create is refused for it
  own = [sorted({groups[i][-1].sources.get('learning_rate', 'None') for *_, groups in defs})
         for i in range(count)]
  for site in applies:
    if overrides[id(site)] is not None or site.refusal is not None:
      continue   # set for every group, or refused with its reason
    lrs = group_lrs.get(id(site), [None] * count)
    if len(lrs) != count:
      site.refusal = _refusals.GROUP_HYPER_PARAMS
      site.message = f'hyper_params=[...] has {len(lrs)} elements for {count} groups'
      continue
    for i, lr in enumerate(lrs):
      if lr is not None:
        continue
      if len(own[i]) > 1:
        site.refusal = _refusals.LR_NONE
        site.message = (f'group {i} keeps its own learning rate here, which differs between the '
                        f'defs the optimizer may be created from ({", ".join(own[i])})')
        break
      if own[i][0] == 'None' or not _optax_text.is_literal(own[i][0]):
        site.refusal = _refusals.LR_NONE
        site.message = (f'group {i} keeps its own learning rate ({own[i][0]}) here, which the '
                        'rewrite sets only from a literal')
        break
  return 'inject'


def _group_defs(project, creates, multis):
  """``[(unit, def call, groups or None)]``: each def the object may be created from (once),
  with its MultiOptimizer groups, None for a def without groups."""
  found, seen = [], set()
  for create in creates:
    receiver = _unit.create_receiver(create.unit, create.node)
    if multis.get(id(create)):
      entries = [(create.unit, project.def_call(create.unit, receiver), multis[id(create)])]
    elif create.branches is not None:
      # Every branch, also past one that refused the create (``branches`` stops there): a
      # MultiOptimizer whose groups migrate does not read counts its pairs.
      parsed = {id(node): call for _, node, call in create.branches}
      entries = []
      for unit, node in project.def_branches(create.unit, receiver) or ():
        groups = parsed.get(id(node))
        if groups is None and unit.legacy(node.func) == 'MultiOptimizer':
          groups = [None] * len(node.args)
        entries.append((unit, node, groups if isinstance(groups, list) else None))
    else:
      entries = [(create.unit, project.def_call(create.unit, receiver), None)]
    for entry in entries:
      if id(entry[1]) not in seen:
        seen.add(id(entry[1]))
        found.append(entry)
  return found


def _refuse(group, files, records):
  """Marks and records every refused site, and every other site as blocked by the first one
  in its file, else the first (a step two scripts share joins their objects: sabertooth's
  run_pretraining.py is told of its own create, not run_classifier.py's)."""
  for site in group.refused:
    files[site.unit.path].mark(site.node, _refusals.marker_text(site.refusal))
    records.append(Record.of(site, 'refused', message=site.message))
  for site in [s for s in group.sites if s.refusal is None]:
    _tell_blocked(group, site.unit, site.node, files, records)


def _tell_blocked(group, unit, node, files, records):
  """Records and marks ``node`` (a site of the refused ``group``, or a def its create takes
  from another file) as blocked by the group's first refusal in its file, else the first."""
  first = next((r for r in group.refused if r.unit is unit), group.refused[0])
  code = first.refusal.code
  where = os.path.relpath(first.unit.path, os.path.dirname(unit.path))
  message = f'not rewritten: this optimizer is refused ({code} in {where})'
  records.append(Record(unit.path, unit.line(node), code, 'refused', '',
                        f'{message[:-1]}:{first.line})'))
  files[unit.path].mark(node, f'{_refusals.MARKER} {code} {message}',
                        unless=f'{_refusals.MARKER} {code} ')


def _replication(project, group, applies):
  """``{id(apply site): axis name}`` where a ``replicate()`` d optimizer averaged the grads.

  Legacy ``optimizer.replicate(axis_name=A)`` makes ``apply_gradient`` average the gradients
  over ``A`` inside ``pmap``; a TrainState does not, so an apply site in a function that is
  pmapped over ``A`` gets ``jax.lax.pmean(grads, axis_name=A)``, unless that function already
  averages those grads itself: such a step is usually the one a plain optimizer (replicated by
  ``jax_utils.replicate``) takes, which legacy averaged once. Which optimizer value reaches
  which step is not followed, so where the replicated one reaches it legacy averaged a second
  time, which in float32 is not the identity (1.9e-6 off over 20 Adam steps of losses near 30,
  the rule's example ``replicate_step_averages``): those sites are returned apart, claimed
  within 1e-6, never bit-exact. Without such a pmap the replication is refused.

  Returns ``(pmeans, averaged_here)``: ``{id(apply site): axis}`` and the ids of the sites
  whose step averages its grads itself.
  """
  replicates = [s for s in group.sites if s.kind == 'replicate']
  if not replicates:
    return {}, set()
  axes = set()
  for site in replicates:
    axis = _unit.call_arg(site.node, 1, 'axis_name')
    if axis is None:
      axes.add('batch')
    elif isinstance(axis, cst.SimpleString):
      axes.add(axis.evaluated_value)
    else:
      site.refusal, site.message = _refusals.REPLICATE, f'axis_name={site.unit.code(axis)}'
      return {}, set()
  if len(axes) != 1:
    for site in replicates:
      site.refusal, site.message = _refusals.REPLICATE, 'replicated over several axes'
    return {}, set()
  axis = axes.pop()
  pmeans, averaged_here = {}, set()
  for site in applies:
    fdef = site.unit.enclosing(site.node, (cst.FunctionDef,))
    if fdef is not None and axis in project.pmap_axes.get(id(fdef), ()):
      grads = next((a.value for a in site.node.args if a.keyword is None), None) if (
          site.kind == 'apply') else None   # optimize's gradient is the rewrite's own
      if _averaged(site.unit, fdef, grads, axis):
        averaged_here.add(id(site))
      else:
        pmeans[id(site)] = axis
  if not any(axis in project.pmap_axes.get(id(site.unit.enclosing(site.node, (cst.FunctionDef,))),
                                           ()) for site in applies):
    for site in replicates:
      site.refusal = _refusals.REPLICATE
      site.message = (f'{site.unit.code(site.node)}: no apply_gradient the analysis follows '
                      f'under pmap(axis_name={axis!r})')
  return pmeans, averaged_here


def _members(project, root):
  return [s for s in project.optimizer_slots if project.groups.find(s) == root]


def _averaged(unit, fdef, grads, axis) -> bool:
  """Whether ``grads`` (a name) is assigned ``jax.lax.pmean(..., axis_name=axis)`` in ``fdef``."""
  if not isinstance(grads, cst.Name):
    return False
  for node in _unit.walk(fdef):
    if isinstance(node, cst.Assign) and isinstance(node.value, cst.Call) and any(
        isinstance(t.target, cst.Name) and t.target.value == grads.value for t in node.targets):
      call = node.value
      if 'jax.lax.pmean' in unit.names(call.func) or 'jax.lax.pmean' in unit.names(call):
        name = _unit.call_arg(call, 1, 'axis_name')
        if isinstance(name, cst.SimpleString) and name.evaluated_value == axis:
          return True
  return False
