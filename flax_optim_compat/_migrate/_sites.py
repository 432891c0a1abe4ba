"""Every use of a legacy optimizer, classified: one *site* per use, for one rule or one refusal.

The project analysis (``_project``) says which values are optimizers; this module looks at what
the code around each one does with it: ``create(...)``, ``.target``, ``.state.step``,
``.apply_gradient(...)``, ``.optimize(...)``, an annotation, a read the rewrite cannot keep
(``.state.param_states``), or a place the analysis cannot follow (an *escape*). A refused site
refuses its whole object (``_plan``).
"""
import dataclasses
from typing import List, Optional, Set

import libcst as cst

from . import _project
from . import _refusals
from . import _unit
from ._unit import Unit

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
  unit: Unit
  node: cst.CSTNode
  kind: str                 # create / def / target / step / apply / replace / annotation / flow
  slot: Optional[tuple] = None
  refusal: Optional[_refusals.Refusal] = None
  message: str = ''

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
          found.append(Site(unit, node, 'annotation', project.annotated_slot(unit, node)))
        continue
      if not isinstance(node, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)):
        continue
      slot = project.slot_of(unit, node)
      if slot is None:
        continue
      for site in _classify(project, unit, node, slot):
        found.append(site)
        if site.kind in ('step',):
          seen.add(id(site.node))
  return found


def _classify(project, unit: Unit, node: cst.CSTNode, slot: tuple) -> List[Site]:
  """The sites of the optimizer value ``node``: its creation, and its use by its parent.

  A ``create(...)`` call is both: ``optim.Adam(0.1).create(p).replicate()`` creates the
  optimizer and calls a method on it, and each of the two is rewritten by its own rule.
  """
  parent = unit.parent(node)
  if isinstance(parent, cst.Arg) and isinstance(unit.parent(parent), cst.Call) and (
      isinstance_of_optimizer(unit, unit.parent(parent))) and unit.parent(parent).args[0] is parent:
    extra = [Site(unit, unit.parent(parent).args[1].value, 'isinstance', slot)]
  else:
    extra = []
  return extra + _classify_use(project, unit, node, slot, parent)


def _classify_use(project, unit, node, slot, parent) -> List[Site]:
  if isinstance(node, cst.Call) and project.is_create(unit, node):
    if not _flows_ok(project, unit, node, parent):
      return [Site(unit, node, 'escape', slot, _refusals.ESCAPE,
                   f'{unit.code(node)} is used where the analysis cannot follow it')]
    create = Site(unit, node, 'create', slot)
    if isinstance(parent, cst.Attribute) and parent.value is node:
      return [create, _member(project, unit, node, slot)]
    return [create]
  if isinstance(parent, cst.Attribute) and parent.value is node:
    return [_member(project, unit, node, slot)]
  if isinstance(node, (cst.Call, cst.Name, cst.Attribute, cst.Subscript)):
    if isinstance(parent, cst.Attribute) and parent.attr is node:
      return []
    if _flows_ok(project, unit, node, parent):
      return []
    return [Site(unit, node, 'escape', slot, _refusals.ESCAPE,
                 f'{unit.code(node)} is used where the analysis cannot follow it')]
  return []


def _member(project, unit: Unit, node: cst.CSTNode, group: tuple) -> Site:
  """The site of ``node.<attribute>``, where ``node`` (any expression) is an optimizer."""
  parent = unit.parent(node)
  attr = parent.attr.value
  grand = unit.parent(parent)
  if attr == 'target':
    return Site(unit, parent, 'target', group)
  if attr == 'state':
    if (isinstance(grand, cst.Attribute) and grand.value is parent
        and grand.attr.value == 'step'):
      return Site(unit, grand, 'step', group)
    return Site(unit, parent, 'read', group, _refusals.READ, f'reads {unit.code(parent)}')
  if attr in ('apply_gradient', 'replace', 'replicate', 'unreplicate') and isinstance(
      grand, cst.Call) and grand.func is parent:
    kind = {'apply_gradient': 'apply'}.get(attr, attr)
    if not _flows_ok(project, unit, grand, unit.parent(grand)):
      return Site(unit, grand, 'escape', group, _refusals.ESCAPE,
                  f'the result of {attr}() is used where the analysis cannot follow it')
    return Site(unit, grand, kind, group)
  if attr == 'compute_gradient' and isinstance(grand, cst.Call) and grand.func is parent:
    assign = unit.parent(grand)
    if (isinstance(assign, cst.Assign) and len(assign.targets) == 1
        and isinstance(assign.targets[0].target, (cst.Tuple, cst.List))
        and len(assign.targets[0].target.elements) in (2, 3) and len(grand.args) == 1
        and grand.args[0].keyword is None):
      return Site(unit, grand, 'compute_gradient', group)
  if attr == 'optimize':
    call = grand if isinstance(grand, cst.Call) and grand.func is parent else parent
    why = optimize_shape(unit, call)
    if why:
      return Site(unit, call, 'optimize', group, _refusals.OPTIMIZE, why)
    return Site(unit, call, 'optimize', group)
  if attr in ('optimizer_def', 'hyper_params', 'state_dict', 'restore_state'):
    return Site(unit, parent, 'read', group, _refusals.READ, f'reads {unit.code(parent)}')
  return Site(unit, parent, 'escape', group, _refusals.ESCAPE,
              f'uses {unit.code(parent)}, which a TrainState does not have')


def _flows_ok(project, unit: Unit, node: cst.CSTNode, parent: cst.CSTNode) -> bool:
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
      if isinstance(call, cst.Call) and (_project.pass_through_arg(unit, call) is container
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
    if isinstance_of_optimizer(unit, call) and call.args[0] is parent:
      return True   # its class argument is a site of its own (FOM013)
    if _project.pass_through_arg(unit, call) is node or _sink_arg(unit, call) is node:
      return True
    if names & _project.TREE_MAPS and parent.keyword is None and call.args[0] is not parent:
      return True
    if names & {'print', 'builtins.print'}:
      return True
    callee = project.resolve_callable(unit, call.func)
    if callee is not None:
      return True
    if isinstance(call.func, cst.Attribute) and call.func.attr.value == 'replace' and (
        parent.keyword is not None):
      return True
    return False
  if isinstance(parent, cst.Expr):
    return True
  if isinstance(parent, cst.Subscript):
    return True
  return False


def _tuple_destination_ok(unit: Unit, call: cst.Call, container) -> bool:
  """Whether a tuple handed to a pass-through call comes back where it is followed: unpacked
  into as many targets, or returned (a sink reads it and is done)."""
  if _project.pass_through_arg(unit, call) is not container:
    return True
  node, parent = call, unit.parent(call)
  while isinstance(parent, cst.Arg) and isinstance(unit.parent(parent), cst.Call) and (
      _project.pass_through_arg(unit, unit.parent(parent)) is node):
    node = unit.parent(parent)
    parent = unit.parent(node)
  if isinstance(parent, cst.Return):
    return True
  if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
    target = parent.targets[0].target
    return isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == len(
        container.elements)
  return False


def _target_ok(project, unit: Unit, target) -> bool:
  if isinstance(target, (cst.Tuple, cst.List)):
    return all(_target_ok(project, unit, e.value) for e in target.elements)
  return project.target_slot(unit, target) is not None


def optimize_shape(unit: Unit, call: cst.CSTNode) -> Optional[str]:
  """Why ``call`` (an ``opt.optimize`` use) cannot be rewritten; None when it can.

  The rewrite splits ``new, loss[, aux] = opt.optimize(loss_fn, **overrides)`` into a
  ``jax.value_and_grad`` statement and an ``apply_gradients`` statement, so the call must be the
  whole value of a statement of its own, its first target a place for the new optimizer, and
  the second statement must not read what the first one assigns.
  """
  code = unit.code(call)
  if not isinstance(call, cst.Call):
    return f'{code} is not called'
  receiver = call.func.value
  args = call.args
  if not args or args[0].keyword is not None or any(a.star for a in args) or any(
      a.keyword is None for a in args[1:]):
    return f'{code}: not optimize(loss_fn[, name=value...])'
  if not _unit.plain_reference(receiver):
    return f'{code}: the optimizer is not a name or attribute'
  assign = unit.parent(call)
  line = unit.parent(assign)
  if not (isinstance(assign, cst.Assign) and len(assign.targets) == 1
          and isinstance(assign.targets[0].target, (cst.Tuple, cst.List))
          and isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1):
    return f'{code}: not the value of a statement new, loss[, aux] = ... of its own'
  elements = assign.targets[0].target.elements
  if any(isinstance(e, cst.StarredElement) for e in elements):
    return f'{code}: assigned to starred targets, not new, loss[, aux]'
  if len(elements) not in (2, 3):
    return f'{code}: assigned to {len(elements)} targets, not new, loss[, aux]'
  if not isinstance(elements[0].value, (cst.Name, cst.Attribute)) or _unit.is_module_like(
      unit, elements[0].value):
    return f'{code}: the new optimizer goes to {unit.code(elements[0].value)}'
  assigned = set().union(*(_unit.mentioned_names(unit, e.value) for e in elements[1:]))
  read = _unit.mentioned_names(unit, receiver).union(
      *(_unit.mentioned_names(unit, a.value) for a in args[1:]))
  if assigned & read:
    return (f'{code}: the optimizer or an override reads {", ".join(sorted(assigned & read))}, '
            'which the gradient statement would assign first')
  return None


def isinstance_of_optimizer(unit: Unit, call: cst.Call) -> bool:
  """Whether ``call`` is ``isinstance(x, optim.Optimizer)`` (any spelling of the class)."""
  return (unit.names(call.func) & {'isinstance', 'builtins.isinstance'} and len(call.args) == 2
          and unit.legacy(call.args[1].value) in _unit.OPTIMIZER_CLASSES)


def _sink_arg(unit: Unit, call: cst.Call) -> Optional[cst.BaseExpression]:
  for name in unit.names(call.func):
    if name in _SINKS:
      return _unit.call_arg(call, *_SINKS[name])
  return None

