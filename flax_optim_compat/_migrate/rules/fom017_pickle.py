"""FOM017: an optimizer pickled whole -> its state dict pickled, loaded back into a template.

A TrainState cannot be pickled: its optax transform is made of local functions (``pickle.dumps``
of one raises ``Can't pickle local object 'chain.<locals>.init_fn'``), where a legacy Optimizer
pickled as a dataclass of its def, step and states. So ``pickle.dump(state, f)`` writes
``flax.serialization.to_state_dict(state)``: step, params and opt_state, a dict of arrays (the
functions, ``tx`` and ``apply_fn``, are no pytree fields and not in it). A load whose value is
assigned where that optimizer is held, ``state = pickle.load(f)``, becomes
``flax.serialization.from_state_dict(TEMPLATE, pickle.load(f))``: the fields from the file, the
functions from ``TEMPLATE``, a variable of the same scope that holds the same optimizer before
the load (a parameter, or a binding at the scope's top level before it: so it is bound when the
load runs). ``from_state_dict`` takes the template's tree and the file's leaves whatever their
shape, so a replicated template restores an unreplicated file as it was written. Where no such
variable exists the load is refused (FOM107) naming that limit. The file's contents change:
the report says so at each rewritten call, and that pickles the legacy program wrote (objects
of flax.optim's classes) are not what the migrated program loads.
"""
import dataclasses
import weakref
from typing import Optional

import libcst as cst

from .. import _calls
from .. import _edits
from .. import _flows
from .. import _refusals
from .. import _rule
from .. import _unit
from .._report import Record

DUMPS = frozenset({'pickle.dump', 'pickle.dumps'})
LOADS = frozenset({'pickle.load', 'pickle.loads'})
FLAX = _edits.Import('flax')
_OLD_FILES = ('pickles the legacy program wrote hold flax.optim objects, which the migrated '
              "program's load does not take; `flax-optim-compat convert` reads msgpack, not "
              'pickles: where flax.optim imports, write flax.serialization.to_bytes(pickle.load(f)'
              "), convert that with the report's command for this optimizer, and pickle.dump "
              'flax.serialization.msgpack_restore of its output')


@dataclasses.dataclass(frozen=True)
class Load:
  template: str   # the variable whose tree and functions the loaded fields go into


class Pickle(_rule.Rule):
  code = 'FOM017'
  title = ('pickle.dump(optimizer, f) -> pickle.dump(flax.serialization.to_state_dict(state), '
           'f); state = pickle.load(f) -> flax.serialization.from_state_dict(state, '
           'pickle.load(f)) (the file holds the state dict)')
  kind = 'pickle_dump'
  kinds = ('pickle_dump', 'pickle_load')

  def match(self, unit, node):
    arg = unit.parent(node)
    call = unit.parent(arg)
    if not (isinstance(arg, cst.Arg) and arg.value is node and isinstance(call, cst.Call)
            and unit.names(call.func) & DUMPS):
      return None
    if _unit.call_arg(call, 0, 'obj') is not node:
      return None
    return _rule.Match(self.kind, arg)

  def claims(self, site, plan):
    return site.kind in self.kinds

  def plan(self, site, plan):
    file_plan = plan.files[site.unit.path]
    file_plan.needs.add(FLAX)
    if site.kind == 'pickle_dump':
      file_plan.edits[id(site.node)] = _rule.Edit(self)
      call = site.unit.parent(site.node)
      what = site.unit.code(site.node.value)
      message = (f'{site.unit.code(call.func)}(...) pickles flax.serialization.to_state_dict'
                 f'({what}): the file holds a dict of the TrainState\'s fields (step, params, '
                 'opt_state), no longer a legacy Optimizer object (a TrainState\'s optax '
                 f'transform cannot be pickled); {_OLD_FILES}')
    else:
      template = template_of(plan.project, site.unit, site.node,
                             plan.project.groups.find(site.slot))
      file_plan.edits[id(site.node)] = _rule.Edit(self, Load(template))
      message = (f'{site.unit.code(site.node.func)}(...) -> flax.serialization.from_state_dict('
                 f'{template}, ...): the TrainState\'s fields from the file, its optax transform '
                 f'from {template} (a file the migrated program pickled); {_OLD_FILES}')
    plan.records.append(Record.of(site, 'rewritten', code=self.code, message=message))

  def rewrite(self, updated, data, context):
    if isinstance(data, Load):
      text = f'flax.serialization.from_state_dict({data.template}, {_rule.text_of(updated)})'
      return cst.parse_expression(text)
    value = _rule.text_of(updated.value)
    return updated.with_changes(
        value=cst.parse_expression(f'flax.serialization.to_state_dict({value})'))


def site(project, unit, node) -> Optional[tuple]:
  """``(kind, slot, refusal, message)`` of a pickle call at ``node`` that is no optimizer
  value itself: a load (``load_site``), or a dump of a value that holds an optimizer in a
  field (refused: the TrainState inside cannot be pickled); else None."""
  if isinstance(node, cst.Call) and unit.names(node.func) & DUMPS:
    return _holder_dump(project, unit, node)
  return load_site(project, unit, node)


def shared_dump(project, unit, node, slot) -> Optional[tuple]:
  """A refusal for ``pickle.dump(value, f)`` where ``value``, the optimizer at ``slot``, is a
  parameter that a call binds to a value holding no optimizer (a ``save(path, value)`` the
  program uses for every pickle), or whose calls are not all in sight: the rewrite pickles
  ``to_state_dict(value)``, which changes what such a call writes (a list becomes a dict of
  its items); else None."""
  arg = unit.parent(node)
  call = unit.parent(arg)
  if not (isinstance(arg, cst.Arg) and isinstance(call, cst.Call) and (
      unit.names(call.func) & DUMPS) and _unit.call_arg(call, 0, 'obj') is node):
    return None
  param = _unit.parameter(unit, node)
  fdef = unit.enclosing(param, (cst.FunctionDef, cst.Lambda)) if param is not None else None
  if fdef is None:
    return None
  pickled = f'{node.value} is pickled by {unit.code(call.func)}(...) at {_unit.at(unit, call)}'
  callers = project.callers_of(unit, fdef) if isinstance(fdef, cst.FunctionDef) else None
  if callers is None:
    return 'escape', slot, _refusals.ESCAPE, (
        f'{pickled}, a parameter of a function whose calls are not all in sight: migrate '
        'pickles the optimizer\'s state dict, and cannot tell that every value this line '
        'pickles is an optimizer')
  for cunit, caller, args, shift in callers:
    value = _flows.bound_argument(unit, fdef, args, shift, param)
    if value is None or value is _flows.UNKNOWN or project.slot_of(cunit, value) is None:
      passed = 'a value it does not know' if value in (None, _flows.UNKNOWN) else (
          _unit.short(cunit.code(value), 40))
      return 'escape', slot, _refusals.ESCAPE, (
          f'{pickled}, and {fdef.name.value}() is also called at {_unit.at(cunit, caller)} '
          f'with {passed}, which holds no optimizer: migrate would pickle '
          f'flax.serialization.to_state_dict({node.value}), which changes what that call '
          f'writes; pickle the optimizer in its own call')
  return None


def _holder_dump(project, unit, call: cst.Call) -> Optional[tuple]:
  """A refusal for ``pickle.dump(state, f)`` where ``state`` is a variable read elsewhere as
  ``state.<field>`` holding the optimizer, or bound to an instance of the project's class
  built with it (``State(optimizer=opt)``); else None."""
  value = _unit.call_arg(call, 0, 'obj')
  if not isinstance(value, cst.Name) or project.slot_of(unit, value) is not None:
    return None
  held = None
  for read in _unit.accesses(unit, value) or ():
    member = unit.parent(read)
    if isinstance(member, cst.Attribute) and member.value is read:
      held = held or project.slot_of(unit, member)
  scope = unit.scopes.get(value)
  for binding in (_unit.bindings(unit, scope, value.value) if scope is not None else ()):
    assign = _unit.plain_assignment(unit, binding)
    built = assign.value if assign is not None else None
    if isinstance(built, cst.Call) and isinstance(
        (project.resolve_callable(unit, built.func) or (None, None))[1], cst.ClassDef):
      held = held or next((project.slot_of(unit, a.value) for a in built.args
                           if project.slot_of(unit, a.value) is not None), None)
  if held is None:
    return None
  return 'escape', held, _refusals.ESCAPE, (
      f'{value.value} is pickled by {unit.code(call.func)}(...) at {_unit.at(unit, call)} and '
      'holds the optimizer in a field: once migrated that field is a TrainState, which pickle '
      'cannot write (its optax transform is made of local functions), and migrate rewrites a '
      'pickle of the optimizer itself only (to its state dict)')


def load_site(project, unit, node) -> Optional[tuple]:
  """``(kind, slot, refusal, message)`` of a ``pickle.load(...)`` / ``pickle.loads(...)`` whose
  value is used as an optimizer: assigned, directly or through pass-through calls
  (``jax_utils.replicate``), where one is held (``state = pickle.load(f)``), or held in a
  variable that only such assignments read: rewritten with a template, or refused where no
  variable holds that optimizer before it; held where no optimizer is and read as one
  (``restored.target``), refused with the object it joins, else with the object the project
  pickles. Else None."""
  if not (isinstance(node, cst.Call) and (unit.names(node.func) & LOADS or (
      _runs_loader(project, unit, node)))):
    return None
  loaded = f'{unit.code(node.func)}(...) at {_unit.at(unit, node)}'
  value, assign = _passed_on(project, unit, node)
  target = _unit.sole_target(assign)
  slot = project.slot_of(unit, target) if target is not None else None
  if slot is None and value is node and isinstance(target, cst.Name):
    uses = [_use(project, unit, read) for read in _unit.accesses(unit, target) or ()]
    slots = {project.groups.find(u[0]) for u in uses if u[0] is not None}
    if uses and len(slots) == 1 and all(u[0] is not None for u in uses):
      slot = next(u[0] for u in uses)   # ``restored``, only handed on to where it is held
  if slot is not None:
    if template_of(project, unit, node, project.groups.find(slot)) is not None:
      return 'pickle_load', slot, None, ''
    scope = unit.enclosing(node, (cst.FunctionDef,))
    where = f'function {scope.name.value}' if scope is not None else 'the module'
    return 'escape', slot, _refusals.ESCAPE, (
        f'{loaded} loads the optimizer, and once migrated the file holds its state dict, which '
        'flax.serialization.from_state_dict puts back into a TrainState given as a template (the '
        'file holds no optax transform): no variable of the same optimizer is bound in '
        f'{where} before this line (a parameter, an assignment at its top level, or in a method '
        "a field of self that __init__ assigns at its top level) to be that template")
  reads = [node] if target is None or value is not node else (
      _unit.accesses(unit, target) or [] if isinstance(target, cst.Name) else [])
  used = next(((read, u) for read in reads for u in [_use(project, unit, read)]
               if u[0] is not None or u[1]), None)
  if used is None:
    return None
  read, (joined, how) = used
  slot = joined or _pickled_slot(project, unit)
  if slot is None:
    return None   # no optimizer of the project is pickled: the file is none the rewrite writes
  held = f'{unit.code(target)}, which' if target is not None else 'its value'
  return 'escape', slot, _refusals.ESCAPE, (
      f'{loaded} loads an optimizer that is used as one ({how} at {_unit.at(unit, read)}), '
      f'but {held} holds no optimizer in the analysis (only the load gives it one), so its '
      'uses would stay legacy while the file holds a state dict once migrated: assign the load '
      'to the variable that holds the optimizer (state = pickle.load(f))')


_LOADERS = weakref.WeakKeyDictionary()   # project -> {name: ids of its loader functions}


def _runs_loader(project, unit, call: cst.Call) -> bool:
  """Whether ``call`` runs a function of the project whose every ``return`` hands back a
  pickle load (``def load(path): with open(path, 'rb') as f: return pickle.load(f)``): its
  value is then what the file holds, a load like ``pickle.load(f)`` itself."""
  loaders = _LOADERS.get(project)
  if loaders is None:
    loaders = _LOADERS[project] = {}
    for u in project.units:
      for fdef in u.nodes:
        rets = [r for r in _unit.returns_of(u, fdef) if isinstance(r, cst.Return)] if (
            isinstance(fdef, cst.FunctionDef)) else []
        if rets and all(isinstance(r.value, cst.Call) and u.names(r.value.func) & LOADS
                        for r in rets):
          loaders.setdefault(fdef.name.value, set()).add(id(fdef))
  func = call.func
  name = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, 'value', None)
  if name not in loaders:
    return False
  callee = project.resolve_callable(unit, func)
  return callee is not None and id(callee[1]) in loaders[name]


def _passed_on(project, unit, node):
  """``(value, parent)``: ``node`` through the pass-through calls it is handed to
  (``jax_utils.replicate(pickle.load(f))``), and where that value goes."""
  value, parent = node, unit.parent(node)
  while isinstance(parent, cst.Arg) and isinstance(unit.parent(parent), cst.Call) and (
      _calls.pass_through_arg(project, unit, unit.parent(parent)) is value):
    value = unit.parent(parent)
    parent = unit.parent(value)
  return value, parent


# What a legacy Optimizer is read for (and a state dict has not).
_READS = frozenset({'target', 'apply_gradient', 'optimizer_def', 'state', 'replicate',
                    'unreplicate', 'hyper_params', 'state_dict', 'restore_state',
                    'compute_gradient', 'optimize'})


def _use(project, unit, read) -> tuple:
  """``(slot, '')`` where ``read`` is handed on, through pass-through calls, to an assignment
  where an optimizer is held (that slot); ``(None, how)`` where it is read as an optimizer
  (``.target``, ...); else ``(None, '')``."""
  value, parent = _passed_on(project, unit, read)
  if isinstance(parent, cst.Attribute) and parent.value is value and (
      parent.attr.value in _READS):
    return None, f'read as {_rule.text_of(parent)}'
  target = _unit.sole_target(parent, value=value)
  if target is not None:
    slot = project.slot_of(unit, target)
    if slot is not None:
      return slot, f'assigned to {unit.code(target)}'
  return None, ''


def _pickled_slot(project, unit) -> Optional[tuple]:
  """The slot of an optimizer the project pickles (this file's first), else None."""
  for other in [unit] + [u for u in project.units if u is not unit]:
    for call in other.nodes:
      if isinstance(call, cst.Call) and other.names(call.func) & DUMPS:
        value = _unit.call_arg(call, 0, 'obj')
        slot = project.slot_of(other, value) if value is not None else None
        if slot is not None:
          return slot
  return None


def template_of(project, unit, load: cst.Call, root: tuple) -> Optional[str]:
  """What holds the loaded optimizer's object in ``load``'s scope before it: the last variable
  (or field of the method's ``self``) bound at the scope's top level before the load's
  statement, else a parameter, else, in a method, a field of ``self`` that ``__init__`` binds
  at its top level (bound before any other method runs)."""
  scope = unit.enclosing(load, (cst.FunctionDef,))
  body = list(scope.body.body if scope is not None else unit.module.body)
  statement = load
  while statement is not None and not any(statement is s for s in body):
    statement = unit.parent(statement)

  def same(node):
    slot = project.slot_of(unit, node)
    return slot is not None and project.groups.find(slot) == root
  me = _self_name(unit, scope)
  found = _last_bound(unit, body[:[id(s) for s in body].index(id(statement))] if statement
                      else [], same, me)
  if found is None and scope is not None:
    found = next((p.name.value for p in scope.params.params if same(p.name)), None)
  owner = unit.enclosing(unit.parent(scope), (cst.ClassDef, cst.FunctionDef)) if (
      scope is not None) else None
  if found is None and me is not None and isinstance(owner, cst.ClassDef):
    init = next((f for f in owner.body.body if isinstance(f, cst.FunctionDef)
                 and f.name.value == '__init__' and f is not scope), None)
    field = _last_bound(unit, init.body.body, same, _self_name(unit, init)) if init else None
    found = f'{me}.{field.split(".", 1)[1]}' if field and '.' in field else None
  return found


def _self_name(unit, fdef) -> Optional[str]:
  """The name of a method's first parameter (its ``self``), else None."""
  owner = unit.enclosing(unit.parent(fdef), (cst.ClassDef, cst.FunctionDef)) if (
      fdef is not None) else None
  if isinstance(owner, cst.ClassDef) and fdef.params.params:
    return fdef.params.params[0].name.value
  return None


def _last_bound(unit, statements, same, me) -> Optional[str]:
  """The text of the last target ``name`` or ``me.field`` that one of ``statements`` (simple
  statements only: bound whenever the next statement runs) assigns and ``same`` accepts."""
  found = None
  for statement in statements:
    for small in statement.body if isinstance(statement, cst.SimpleStatementLine) else ():
      target = _unit.sole_target(small)
      if target is None:
        continue
      plain = isinstance(target, cst.Name) or (
          isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name)
          and target.value.value == me)
      if plain and same(target):
        found = unit.code(target)
  return found


RULE = Pickle()
