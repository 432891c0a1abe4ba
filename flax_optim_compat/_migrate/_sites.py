"""Every use of a legacy optimizer, classified: one *site* per use, for one rule or one refusal.

The project analysis (``_project``) says which values are optimizers; this module looks at what
the code around each one does with it: a ``create(...)`` or an annotation (found here), a use a
rule matches (``.target``, ``.apply_gradient(...)``, ...: each rule's ``match``), a read the
rewrite cannot keep (``.state.param_states``), or a place the analysis cannot follow (an
*escape*). A refused site refuses its whole object (``_plan``).
"""
import dataclasses
from typing import List, Optional, Set

import libcst as cst

from . import _flows
from . import _project
from . import _refusals
from . import _unit
from . import rules
from ._rule import Rule
from ._unit import SourceFile

# Calls that read an optimizer as a plain pytree (any pytree works, a TrainState too).
_SINKS = {
    'flax.serialization.to_bytes': (0, 'target'),
    'flax.serialization.to_state_dict': (0, 'target'),
    'flax.serialization.msgpack_serialize': (0, 'pytree'),
    'flax.training.checkpoints.save_checkpoint': (1, 'target'),
    'jax.tree_util.tree_leaves': (0, 'tree'),
    'jax.tree.leaves': (0, 'tree'),
    'jax.tree_util.tree_structure': (0, 'tree'),
    'jax.tree.structure': (0, 'tree'),
}


@dataclasses.dataclass
class Site:
  """One use of a legacy optimizer (or of a legacy name) in one file."""
  unit: SourceFile
  node: cst.CSTNode
  kind: str                 # create / def / target / step / apply / replace / annotation / flow
  slot: Optional[tuple] = None
  refusal: Optional[_refusals.Refusal] = None
  message: str = ''
  # A create whose def is chosen at run time: ``[(unit, def call, DefCall)]``, one per branch.
  branches: Optional[list] = None
  rule: Optional[Rule] = None   # the rule that matched the use, if one did

  @property
  def line(self) -> int:
    return self.unit.line(self.node)


def sites(project: _project.Project) -> List[Site]:
  """Every use of an optimizer value and every legacy name, classified."""
  found: List[Site] = []
  for unit in project.units:
    seen: Set[int] = set()
    for node in unit.nodes:
      if id(node) in seen:
        continue
      if isinstance(node, cst.ClassDef):
        for base in node.bases:
          if unit.legacy(base.value) and unit.legacy(base.value) != 'Optimizer':
            found.append(Site(unit, node, 'subclass', None, _refusals.SUBCLASS,
                              f'class {node.name.value}({unit.code(base.value)})'))
      if isinstance(node, cst.Annotation):
        head = _unit.annotation_head(node.annotation)
        if unit.legacy(head) in _unit.OPTIMIZER_CLASSES:
          found.append(Site(unit, node, 'annotation', _flows.annotated_slot(project, unit, node)))
        continue
      if not isinstance(node, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)):
        continue
      slot = project.slot_of(unit, node)
      if slot is None:
        continue
      for site in _classify(project, unit, node, slot):
        found.append(site)
        if site.rule is not None and site.rule.covers_its_node:
          seen.add(id(site.node))
  return found


def _classify(project, unit: SourceFile, node: cst.CSTNode, slot: tuple) -> List[Site]:
  """The sites of the optimizer value ``node``: its creation, and its use by its parent.

  A ``create(...)`` call is both: ``optim.Adam(0.1).create(p).replicate()`` creates the
  optimizer and calls a method on it, and each of the two is rewritten by its own rule. A use
  is the rule's that matches it (``rules.ALL``); a member no rule matches is a read the
  rewrite cannot keep or a use the analysis cannot follow.
  """
  parent = unit.parent(node)
  matched = [Site(unit, m.node, m.kind, slot, m.refusal, m.message, rule=rule)
             for rule, m in rules.matches(unit, node)]
  member = isinstance(parent, cst.Attribute) and parent.value is node
  extra = [] if member else matched   # a use of the value itself (``isinstance(opt, ...)``)
  if isinstance(node, cst.Call) and project.is_create(unit, node):
    if not _followed(project, unit, node, parent):
      return extra + [Site(unit, node, 'escape', slot, _refusals.ESCAPE,
                           f'{unit.code(node)} is used where the analysis cannot follow it')]
    create = Site(unit, node, 'create', slot)
    return extra + [create] + ([_member(project, unit, node, slot, matched)] if member else [])
  if member:
    return [_member(project, unit, node, slot, matched)]
  if isinstance(node, (cst.Call, cst.Name, cst.Attribute, cst.Subscript)):
    if isinstance(parent, cst.Attribute) and parent.attr is node:
      return extra
    if _followed(project, unit, node, parent):
      return extra
    return extra + [Site(unit, node, 'escape', slot, _refusals.ESCAPE,
                         f'{unit.code(node)} is used where the analysis cannot follow it')]
  return extra


_READS = ('state', 'optimizer_def', 'hyper_params', 'state_dict', 'restore_state')


def _member(project, unit: SourceFile, node: cst.CSTNode, group: tuple, matched) -> Site:
  """The site of ``node.<attribute>``, where ``node`` (any expression) is an optimizer."""
  parent = unit.parent(node)
  if matched:
    site = matched[0]
    if site.rule.returns_optimizer and not _followed(project, unit, site.node,
                                                     unit.parent(site.node)):
      return Site(unit, site.node, 'escape', group, _refusals.ESCAPE,
                  f'the result of {parent.attr.value}() is used where the analysis cannot '
                  'follow it')
    return site
  if parent.attr.value in _READS:
    return Site(unit, parent, 'read', group, _refusals.READ, f'reads {unit.code(parent)}')
  return Site(unit, parent, 'escape', group, _refusals.ESCAPE,
              f'uses {unit.code(parent)}, which a TrainState does not have')


def _followed(project, unit: SourceFile, node: cst.CSTNode, parent: cst.CSTNode) -> bool:
  """Whether the optimizer value ``node`` goes somewhere the analysis follows."""
  if isinstance(parent, (cst.AssignTarget, cst.Param)):
    return True
  if isinstance(parent, cst.Assign) and parent.value is node:
    return all(_target_ok(project, unit, t.target) for t in parent.targets)
  if isinstance(parent, cst.AnnAssign):
    return True
  if isinstance(parent, cst.Return):
    return True
  if isinstance(parent, (cst.Element,)):
    container = unit.parent(parent)
    outer = unit.parent(container)
    if isinstance(container, cst.Tuple) and isinstance(outer, cst.Del):
      return True   # ``del optimizer, variables``
    if isinstance(container, (cst.Tuple, cst.List)) and isinstance(outer, cst.Arg):
      call = unit.parent(outer)   # ``save_checkpoint(d, (optimizer, ema), step)``
      if isinstance(call, cst.Call) and (_flows.pass_through_arg(unit, call) is container
                                         or _sink_arg(unit, call) is container):
        return _tuple_destination_ok(unit, call, container)
    if isinstance(container, cst.Tuple) and isinstance(outer, cst.Return):
      return True
    if isinstance(container, cst.Tuple) and isinstance(outer, cst.Assign):
      return True
    return isinstance(container, cst.Tuple) and isinstance(outer, cst.AssignTarget)
  if isinstance(parent, cst.Attribute):
    return True   # its own attribute uses are classified on their own
  if isinstance(parent, cst.Del):
    return True   # ``del optimizer``: the name goes, whatever it holds
  if isinstance(parent, cst.Arg):
    call = unit.parent(parent)
    if not isinstance(call, cst.Call):
      return False
    names = unit.names(call.func)
    if rules.matches(unit, node):
      return True   # a rule rewrites this use (``isinstance(opt, optim.Optimizer)``)
    if _flows.pass_through_arg(unit, call) is node or _sink_arg(unit, call) is node:
      return True
    if names & _flows.TREE_MAPS and parent.keyword is None and call.args[0] is not parent:
      return True
    if names & {'print', 'builtins.print'}:
      return True
    callee = project.resolve_callable(unit, call.func)
    if callee is not None:
      return True
    if project.partial_callee(unit, call) is not None and call.args[0] is not parent:
      return True   # ``functools.partial(loss_fn, opt)``: a parameter of loss_fn
    if isinstance(call.func, cst.Attribute) and call.func.attr.value == 'replace' and (
        parent.keyword is not None):
      return True
    return False
  if isinstance(parent, cst.Expr):
    return True
  if isinstance(parent, cst.FormattedStringExpression):
    return True   # ``f'... {config.optim.optimizer}'``: formatted as text, as print does
  if isinstance(parent, cst.Subscript):
    return True
  return False


def _tuple_destination_ok(unit: SourceFile, call: cst.Call, container) -> bool:
  """Whether a tuple handed to a pass-through call comes back where it is followed: unpacked
  into as many targets, or returned (a sink reads it and is done)."""
  if _flows.pass_through_arg(unit, call) is not container:
    return True
  node, parent = call, unit.parent(call)
  while isinstance(parent, cst.Arg) and isinstance(unit.parent(parent), cst.Call) and (
      _flows.pass_through_arg(unit, unit.parent(parent)) is node):
    node = unit.parent(parent)
    parent = unit.parent(node)
  if isinstance(parent, cst.Return):
    return True
  if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
    target = parent.targets[0].target
    return isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == len(
        container.elements)
  return False


def _target_ok(project, unit: SourceFile, target) -> bool:
  if isinstance(target, (cst.Tuple, cst.List)):
    return all(_target_ok(project, unit, e.value) for e in target.elements)
  return _flows.target_slot(project, unit, target) is not None


def _sink_arg(unit: SourceFile, call: cst.Call) -> Optional[cst.BaseExpression]:
  for name in unit.names(call.func):
    if name in _SINKS:
      return _unit.call_arg(call, *_SINKS[name])
  return None

