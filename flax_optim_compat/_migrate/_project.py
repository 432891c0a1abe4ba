"""Whole-project analysis: which values are legacy optimizers, across the project's files.

A value is a legacy optimizer when it comes from ``<def>.create(...)`` of a ``flax.optim`` def,
or flows from one (``_flows``: assignments, returns, arguments, fields, pass-through calls).
Slots joined by a flow are one *object*, rewritten entirely or not at all: the joins run to a
fixed point here, over the parsed program (``_program``). What the code does with each
optimizer value (its *sites*) is classified in ``_sites``.
"""
from typing import Dict, List, Optional, Set, Tuple

import libcst as cst

from . import _calls
from . import _flows
from . import _import_paths
from . import _unit
from ._callees import Callees
from ._family import UnionFind
from ._program import COMPILERS
from ._unit import SourceFile
from ._unit import parameter


class Project(Callees):
  """The parsed program, and the optimizer objects found in it."""

  def __init__(self, sources: Dict[str, str]):
    """``sources``: absolute path -> text."""
    super().__init__(sources)
    self.groups = UnionFind()
    self.known = _flows.Known()
    self.optimizer_slots: Set[tuple] = self.known.slots
    self.def_slots: Set[tuple] = set()
    # A def passed into a parameter of the project's own function: the parameter's branches,
    # one per call site, and why a call site's argument is no def (FunctionDef id -> ...).
    self._param_branches: Dict[int, Optional[List[Tuple[SourceFile, cst.CSTNode]]]] = {}
    self.not_a_def: Dict[int, str] = {}
    self._analyse()

  # -------------------------------------------------------------------- what is a legacy def

  def def_call(self, unit: SourceFile, node: cst.CSTNode) -> Optional[cst.Call]:
    """The ``optim.X(...)`` call that ``node`` evaluates to (directly or through a variable)."""
    if isinstance(node, cst.Call) and (unit.legacy(node.func) or self.is_user_def(unit, node.func)):
      return node
    if isinstance(node, cst.Name) and _flows.var_slot(unit, node) in self.def_slots:
      values = self.assignment_values(unit, node)
      if values and len(values) == 1:
        return self.def_call(unit, values[0])
    return None

  def def_branches(self, unit: SourceFile, node: cst.CSTNode,
                   depth: int = 0) -> Optional[List[Tuple[SourceFile, cst.Call]]]:
    """Every def call ``node`` may evaluate to, one per branch, else None.

    A variable bound in ``if``/``else`` branches (``opt_def = optim.Adam(...)`` in one,
    ``optim.Momentum(...)`` in another) and a call of the project's own function whose every
    ``return`` is a def (``get_optimizer_def(config)``) have one def per branch. Each variable
    on the way must be read only there (once), or only as the receiver of ``.create(...)``
    calls (a shared def created more than once), or the def goes elsewhere too.
    """
    if depth > 8:
      return None
    if isinstance(node, cst.Call) and (unit.legacy(node.func) or self.is_user_def(unit, node.func)):
      return [(unit, node)]
    branches: List[Tuple[SourceFile, cst.Call]] = []
    if isinstance(node, cst.Name) and parameter(unit, node) is not None:
      return self._passed_defs(unit, node, depth)
    if isinstance(node, cst.Name):
      values = self.assignment_values(unit, node)
      if not values or not only_created(unit, node):
        return None
      for value in values:
        found = self.def_branches(unit, value, depth + 1)
        if found is None:
          return None
        branches.extend(found)
      return branches
    called = _flows.returned_values(self, unit, node)
    if called is not None:
      cunit, fdef, values = called
      if not values or any(v is None for v in values):
        return None
      for value in values:
        found = self.def_branches(cunit, value, depth + 1)
        if found is None:
          return None
        branches.extend(found)
      why = self.def_used_elsewhere(cunit, fdef)
      for _, call in branches if why else ():
        self.not_a_def.setdefault(id(call), why)
      return branches
    return None

  def def_used_elsewhere(self, unit: SourceFile, fdef: cst.FunctionDef,
                          depth: int = 0) -> Optional[str]:
    """Why the def that ``fdef`` returns cannot be rewritten with the optimizers created from
    it: a call of ``fdef`` whose def is read other than as the receiver of ``.create(...)``
    (balloon-learning-environment's test reads ``create_optimizer().hyper_params``, and checks
    its class with ``isinstance``), else None. A call whose result is returned is its caller's
    function's call, in turn; calls out of sight (``callers_of`` None) are not asked."""
    for u, call, _, _ in self.callers_of(unit, fdef) or () if depth < 4 else ():
      parent = u.parent(call)
      if isinstance(parent, cst.Return):   # the caller's function hands it on: its calls
        outer = u.enclosing(parent, (cst.FunctionDef,))
        why = self.def_used_elsewhere(u, outer, depth + 1) if outer is not None else None
        if why:
          return why
        continue
      target = _unit.sole_target(parent)
      reads = ([call] if not isinstance(target, cst.Name) else
               _unit.binding_reads(u, target) or _unit.accesses(u, target) or [])
      for read in reads:
        used = u.parent(read)
        checked = isinstance(used, cst.Arg) and isinstance(u.parent(used), cst.Call) and (
            'builtins.isinstance' in u.names(u.parent(used).func))
        member = isinstance(used, cst.Attribute) and used.value is read and (
            used.attr.value != 'create')
        if checked or member:
          how = (f'checked with {_unit.short(u.code(u.parent(used)), 50)}, a legacy class an '
                 'optax transformation is not' if checked else
                 f'read as {_unit.short(u.code(used), 50)}, which an optax transformation '
                 'does not have')
          return (f'{fdef.name.value}() returns this def, and the def its call at '
                  f'{_unit.at(u, call)} returns is {how} (at {_unit.at(u, read)}): the def '
                  'is used other than to create optimizers, so it stays legacy with them')
      beside = def_read_beside(u, target) if isinstance(target, cst.Name) else None
      if beside:   # StatefulOdeNets: save_optimizer_hyper_params(optimizer_def, ...)
        return (f'{fdef.name.value}() returns this def, and its call at {_unit.at(u, call)} '
                f'binds it to {beside}: the analysis follows a def variable read only as the '
                'receiver of .create(...), so the def stays legacy with its optimizers')
    return None

  def _passed_defs(self, unit: SourceFile, name: cst.Name, depth: int):
    """The defs of a parameter read only as ``name.create(...)`` (or once): what every call
    site of its function binds to it (``model.with_optimizer(optim.Adam(...))``), each one's
    branches. A call site that binds something else (another value, a ``**kwargs``, the
    default) is a branch of its own, which is no def: the object is refused there
    (``not_a_def`` says why). None where no call site passes a def, or where the function is
    used other than called (its call sites are not all in sight)."""
    param = parameter(unit, name)
    if param is None or id(param) in self._param_branches:
      return self._param_branches.get(id(param))
    self._param_branches[id(param)] = None   # while it is being decided: none
    fdef = unit.enclosing(param, (cst.FunctionDef, cst.Lambda))
    if not isinstance(fdef, cst.FunctionDef) or not only_created(unit, name):
      return None
    callers = self.callers_of(unit, fdef)
    if not callers:
      return None
    branches: List[Tuple[SourceFile, cst.CSTNode]] = []
    passed, others = [], []
    for cunit, call, args, shift in callers:
      arg = _flows.bound_argument(unit, fdef, args, shift, param)
      found = None
      if arg is not None and arg is not _flows.UNKNOWN:
        found = self.def_branches(unit if arg is param.default else cunit, arg, depth + 1)
      if found is None:
        others.append((cunit, call, arg))
      else:
        passed.append((cunit, call))
        branches.extend(found)
    if not passed:
      return None
    defs = ', '.join(_unit.at(u, c) for u, c in passed)
    for cunit, call, arg in others:
      node = arg if isinstance(arg, cst.CSTNode) and arg is not param.default else call
      what = ('a **kwargs or *args that may bind it' if arg is _flows.UNKNOWN
              else 'no argument for it' if arg is None or arg is param.default
              else f'{cunit.code(arg)}, not a flax.optim def the analysis follows')
      self.not_a_def[id(node)] = (
          f'{fdef.name.value}() creates its parameter {param.name.value}, and the call at '
          f'{_unit.at(cunit, call)} passes {what}, while '
          + (f'the call at {defs} passes a def' if len(passed) == 1 else
             f'the calls at {defs} pass defs'))
      branches.append((cunit, node))
    self._param_branches[id(param)] = branches
    return branches

  def unresolved_method_calls(self, unit: SourceFile, fdef: cst.FunctionDef):
    """``[(unit, call)]``: the calls ``x.<name>(...)`` of the project that name the method
    ``fdef`` and that the analysis does not resolve to a function (their receiver is a value
    whose class it cannot name), any of which may run ``fdef``: what such a call returns is not
    followed. For a module's function, the calls of its name through a path of the project's
    own modules that does not resolve to it (``pkg.make_optimizer(...)``, ``make_optimizer``
    imported from ``pkg``, where ``pkg`` re-exports it by a form the analysis does not read).
    For a nested function its factory hands back, the calls of what a call of the factory
    returns that do not resolve to one function (``_handed_back_calls``)."""
    owner = unit.enclosing(unit.parent(fdef), (cst.ClassDef, cst.FunctionDef))
    known = self.__dict__.setdefault('_unresolved_calls', {})
    if id(fdef) not in known:
      known[id(fdef)] = (self._handed_back_calls(unit, fdef, owner)
                         if isinstance(owner, cst.FunctionDef) else
                         self._unresolved_method_calls(fdef, isinstance(owner, cst.ClassDef)))
    return known[id(fdef)]

  def _handed_back_calls(self, unit: SourceFile, fdef: cst.FunctionDef,
                         factory: cst.FunctionDef):
    """Where a ``return`` of ``factory`` names its nested function ``fdef`` (itself, compiled
    or partly applied): the calls of the project whose callee is what a call of ``factory``
    returns (``step(state)`` of ``step = make_step(joint=flag)``, or ``make_step(...)(state)``)
    and that ``resolve_callable`` does not resolve (``make_step`` returns ``step`` or
    ``joint_step`` by an ``if`` that call does not decide): either may run there. ``[]`` where
    no ``return`` names it: its calls are those in sight, by its name."""
    names = [n for r in _unit.returns_of(unit, factory) if isinstance(r, cst.Return)
             for n in _unit.walk(r.value or cst.Name('None')) if isinstance(n, cst.Name)
             and n.value == fdef.name.value and unit.scopes.get(n) is not None]
    if not any((self.resolve_callable(unit, n) or (None, None))[1] is fdef for n in names):
      return []
    found = []
    for u in self.units:
      for node in u.nodes:
        made = node.func if isinstance(node, cst.Call) else None
        made = _unit.value_of(u, made) if isinstance(made, cst.Name) else made
        if isinstance(made, cst.Call) and made.args and u.names(made.func) & COMPILERS:
          made = made.args[0].value   # ``jax.jit(make_step(...))``
        if isinstance(made, cst.Call) and u.code(made.func).endswith(factory.name.value) and (
            self.resolve_callable(u, made.func) or (None, None))[1] is factory and (
                self.resolve_callable(u, node.func) is None):
          found.append((u, node))
    calls = [(u, c) for u, c, _, _ in self.callers_of(unit, factory) or ()] or [
        (u, n) for u in self.units for n in u.nodes if isinstance(n, cst.Call) and (
            factory.name.value in u.code(n.func)) and (
                self.resolve_callable(u, n.func) or (None, None))[1] is factory]
    for u, call in calls:   # (by name, or where it is referred to otherwise: a partial of it)
      found += self._result_escapes(u, call)
    return found

  def _result_escapes(self, unit: SourceFile, call: cst.Call):
    """``[(unit, node)]``: where what the factory call ``call`` returns goes other than to a
    call of it (``_handed_back_calls`` asks those) or to a parameter of the project's function
    (score_sde's ``get_step_fn(..., optimize_fn=optimize_fn)``, ``_bound_to_a_parameter``): put
    in a container, subscripted (``fns['joint'](state)``),
    returned, stored. Such a use may call the nested function where its result is not
    followed."""
    value, parent = call, unit.parent(call)
    if isinstance(parent, cst.Arg) and isinstance(unit.parent(parent), cst.Call) and (
        unit.names(unit.parent(parent).func) & COMPILERS):   # ``jax.jit(make_step(...))``
      value = unit.parent(parent)
      parent = unit.parent(value)
    if isinstance(parent, cst.Call) and parent.func is value or self._bound_to_a_parameter(
        unit, value):
      return []
    target = _unit.sole_target(parent)
    reads = _unit.accesses(unit, target) if isinstance(target, cst.Name) else None
    if reads is None:
      return [(unit, value)]
    return [(unit, read) for read in reads if not (
        isinstance(unit.parent(read), cst.Call) and unit.parent(read).func is read) and (
            not self._bound_to_a_parameter(unit, read))]

  def _bound_to_a_parameter(self, unit: SourceFile, node: cst.CSTNode) -> bool:
    """Whether ``node`` is an argument that binds a parameter of the project's function: its
    calls there run what every call site binds to it (``_passed_function``), or are not
    resolved, and then what they return is refused where it is used (``unresolved_why``)."""
    arg, call = unit.parent(node), unit.parent(unit.parent(node))
    callee = self.resolve_callable(unit, call.func) if isinstance(arg, cst.Arg) and (
        isinstance(call, cst.Call)) else None
    if callee is None or not isinstance(callee[1], cst.FunctionDef):
      return False
    params = [*callee[1].params.posonly_params, *callee[1].params.params,
              *callee[1].params.kwonly_params]
    param = next((p for p in params if _flows.bound_argument(
        callee[0], callee[1], call.args, callee[2], p) is node), None)
    return param is not None

  def _unresolved_method_calls(self, fdef: cst.FunctionDef, method: bool):
    tops = {name.split('.')[0] for name in (*self._functions, *self._classes)}
    found = []
    for u in self.units:
      for node in u.nodes:
        if not isinstance(node, cst.Call):
          continue
        if isinstance(node.func, cst.Attribute):
          names = u.names(node.func.value)
          # A method's receiver is a value (a local one too); a module function's, a path of
          # the project's modules (``util.create(...)``, never ``opt_def.create(...)``).
          named = node.func.attr.value == fdef.name.value and all(   # not a library module's
              ('<locals>' in n and method) or (
                  n.split('.')[0] in tops and '<locals>' not in n) for n in names) and (
                      method or names)
        else:
          named = not method and isinstance(node.func, cst.Name) and any(
              n.split('.')[0] in tops and n.endswith('.' + fdef.name.value)
              for n in u.names(node.func))
        if named and self.resolve_callable(u, node.func) is None:
          found.append((u, node))
    return found

  def is_create(self, unit: SourceFile, node: cst.CSTNode) -> bool:
    """Whether ``node`` is ``<def>.create(...)``: its receiver evaluates to a def in every
    branch (``def_branches``), or is a variable that would, read elsewhere too
    (``def_read_beside``: the create is an optimizer, which the plan refuses for it), or is
    called as it is on a def that names flax.optim but is traced to no call (``opaque_def``:
    refused too)."""
    if not (isinstance(node, cst.Call) and _unit.create_method(unit, node) is not None):
      return False
    receiver = _unit.create_receiver(unit, node)
    if self.def_branches(unit, receiver) is not None:
      return True
    values = (self.assignment_values(unit, receiver) if isinstance(receiver, cst.Name)
              and parameter(unit, receiver) is None and def_read_beside(unit, receiver) else None)
    if bool(values) and all(self.def_branches(unit, v) is not None for v in values):
      return True
    return _unit.create_method(unit, node) is node.func and (
        self.opaque_def(unit, receiver) is not None)

  def opaque_def(self, unit: SourceFile, receiver: cst.CSTNode
                 ) -> Optional[Tuple[SourceFile, cst.CSTNode]]:
    """The value, with its file, that names flax.optim where the def ``receiver`` (of a create)
    is traced to no def call (``def_branches``), else None: a variable bound to
    ``(partial(MyOpt, ...) if mine else optim.Adam)(...)`` (eve's pixelcnn), ``Optimizer(1e-3)``
    of ``Optimizer = dict(Eve=Eve, Adam=optim.Adam)[name]`` (eve's cifar10),
    ``getattr(flax.optim, name)(...)`` (jft), or such a value returned by the project's own
    function the receiver calls (qbdiv's ``get_optim_spec(...)``). Such a create still makes an
    optimizer, which the plan refuses, so its uses are followed."""
    if isinstance(receiver, cst.Name) and parameter(unit, receiver) is not None or (
        self.def_branches(unit, receiver) is not None):
      return None
    return self._naming_legacy(unit, receiver, 0)

  def _naming_legacy(self, unit: SourceFile, node: cst.CSTNode,
                     depth: int) -> Optional[Tuple[SourceFile, cst.CSTNode]]:
    """``opaque_def``'s search: ``node`` or a value of a variable it reads (one step) that names
    flax.optim, else the same in the ``return`` values of the project's function it calls."""
    values = [node] + [
        v for n in _unit.walk(node) if isinstance(n, cst.Name)
        for v in self.assignment_values(unit, n) or []]
    for value in values:
      if any(_unit.refers_to_legacy(unit, n) for n in _unit.walk(value)):
        return unit, value
    for value in values if depth < 4 else ():
      called = _flows.returned_values(self, unit, value)
      for ret in called[2] if called is not None else ():
        found = self._naming_legacy(called[0], ret, depth + 1) if ret is not None else None
        if found is not None:
          return found
    return None

  # -------------------------------------------------------------------- what is an optimizer

  def reads_its_def(self, unit: SourceFile, node: cst.CSTNode) -> bool:
    """Whether ``node`` reads a variable while it holds a def, before the same variable holds
    the optimizer made from it (``optimizer = optim.Adam(lr)``, then ``optimizer =
    optimizer.create(params)``: straight-line code, ``_unit.reaching``)."""
    binding = _unit.reaching(unit, node) if isinstance(node, cst.Name) else None
    value = _unit.bound_value(unit, binding) if binding is not None else None
    return value is not None and self.def_call(unit, value) is not None

  def slot_of(self, unit: SourceFile, node: cst.CSTNode) -> Optional[tuple]:
    """The slot whose optimizer ``node`` evaluates to, or None if it is not one."""
    got = _unit.literal_getattr(unit, node)
    if got is not None:   # ``getattr(agent, 'optimizer')``: ``agent.optimizer``
      return self._field_of(unit, node, *got)
    if isinstance(node, cst.Call):
      if self.is_create(unit, node):
        return _flows.create_slot(unit, node)
      func = node.func
      # Before the methods: ``jax_utils.replicate(x)`` is a library call, not ``x.replicate()``.
      arg = _calls.pass_through_arg(self, unit, node)
      if arg is not None:
        return self.slot_of(unit, arg)
      if isinstance(func, cst.Attribute) and func.attr.value in (
          'apply_gradient', 'replace', 'replicate', 'unreplicate'):
        return self.slot_of(unit, func.value)
      slot = _flows.base_of(self, unit, node)
      return slot if slot in self.optimizer_slots else None
    if isinstance(node, cst.Name):
      slot = _flows.var_slot(unit, node)
      if slot not in self.optimizer_slots:
        return None
      return None if self.reads_its_def(unit, node) else slot
    if isinstance(node, cst.Attribute):
      return self._field_of(unit, node, node.value, node.attr.value)
    if isinstance(node, cst.Subscript):
      slot = _flows.base_of(self, unit, node)   # ``make()[0]``, ``carry[0]``
      return slot if slot in self.optimizer_slots else None
    return None

  def _field_of(self, unit: SourceFile, node: cst.CSTNode, receiver: cst.CSTNode,
                name: str) -> Optional[tuple]:
    """``slot_of`` the attribute ``node``, ``receiver.<name>``."""
    if _compared_with_a_string(unit, node):
      return None   # ``config.optim.optimizer == 'Adam'``: a config field, not an optimizer
    slot = _flows.field_slot(self, unit, receiver, name)
    if slot[1] is None and not unit.sees_field(name):
      return None   # an attribute of an unknown class, in a file that cannot see one there
    if slot in self.optimizer_slots and not _unit.is_module_like(unit, receiver) and (
        not _import_paths.library_global(self, unit, receiver)):
      return slot
    return None

  def dict_notes(self, root: tuple) -> List[str]:
    """What the report says of an object held at a string key of a dict (``{'actor': opt_a,
    'critic': opt_c}``): a checkpoint of the dict holds several optimizers, and ``convert``
    takes a file with one."""
    keys = sorted({repr(k) for s in self.optimizer_slots if s[0] == 'part'
                   and self.groups.find(s) == root for k in s[2] if isinstance(k, str)})
    if not keys:
      return []
    return [f'held in a dict at key {" / ".join(keys)}: where a checkpoint saved the dict of '
            'optimizers, convert takes a file with one optimizer, so convert this one from '
            f'the state dict at that key (flax_optim_compat.convert.convert_checkpoint('
            f'state_dict[{keys[0]}], ...)) and put the result back at its key']

  def unseen_def_create(self, root: tuple):
    """``(unit, call)``: a ``d.create(...)`` whose value the object ``root`` is (returned, or
    assigned to a variable of it) and which is no create site, its def ``d`` out of sight (a
    parameter no call in sight binds, typed only by an annotation); else None."""
    slots = {s for s in self.optimizer_slots if self.groups.find(s) == root}
    for unit in self.units:
      for n in unit.nodes:
        if not (isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and
                n.func.attr.value == 'create'):
          continue
        parent = unit.parent(n)
        if isinstance(parent, cst.Return):
          fdef = unit.enclosing(parent, (cst.FunctionDef, cst.Lambda))
          into = [_flows.return_slot(unit, fdef)] if fdef is not None else []
        elif isinstance(parent, (cst.Assign, cst.AnnAssign)) and parent.value is n:
          targets = [t.target for t in parent.targets] if isinstance(
              parent, cst.Assign) else [parent.target]
          into = [_flows.var_slot(unit, t) for t in targets if isinstance(t, cst.Name)]
        else:
          into = []
        if any(slot in slots for slot in into):
          return unit, n
    return None

  def _mark(self, slot: tuple, other: Optional[tuple] = None) -> bool:
    changed = self.known.add(slot)
    if other is not None:
      changed |= self.known.add(other)
      changed |= self.groups.union(slot, other)
    else:
      self.groups.find(slot)
    return changed

  # -------------------------------------------------------------------- the fixed point

  def _analyse(self):
    # Variables bound to a legacy def: ``opt_def = optim.Adam(...)``.
    for unit in self.units:
      for node in unit.nodes:
        target = _unit.sole_target(node)
        if isinstance(target, cst.Name) and isinstance(node.value, cst.Call) and (
            unit.legacy(node.value.func) not in (None, 'Optimizer')
            or self.is_user_def(unit, node.value.func)):
          slot = _flows.var_slot(unit, target)
          if slot:
            self.def_slots.add(slot)
    # Annotations name optimizer slots directly.
    for unit in self.units:
      for node in unit.nodes:
        if isinstance(node, cst.Annotation) and unit.legacy(
            _unit.annotation_head(node.annotation)) in _unit.OPTIMIZER_CLASSES:
          slot = _flows.annotated_slot(self, unit, node)
          if slot:
            self._mark(slot)
    for _ in range(50):
      changed = False
      for unit in self.units:
        for node in unit.nodes:
          for slot, other in _flows.joins(self, unit, node, self.slot_of, self.known):
            changed |= self._mark(slot, other)
      if not changed:
        break
    # Creates that share a def (a helper called in two places) are one object: the def's
    # expression is written once, in one learning-rate mode.
    by_def: Dict[int, tuple] = {}
    for unit in self.units:
      for node in unit.nodes:
        if self.is_create(unit, node):
          slot = _flows.create_slot(unit, node)
          for _, call in self.def_branches(unit, _unit.create_receiver(unit, node)) or ():
            if id(call) in by_def:
              self._mark(slot, by_def[id(call)])
            by_def.setdefault(id(call), slot)


def _def_reads(unit: SourceFile, name: cst.Name) -> List[cst.CSTNode]:
  """The reads of the variable ``name``: of the binding that reaches ``name`` where
  straight-line code decides it (``_unit.binding_reads``), else all of them."""
  uses = _unit.binding_reads(unit, name)
  return (_unit.accesses(unit, name) if uses is None else uses) or []


def reads_beside_create(unit: SourceFile, name: cst.Name) -> List[cst.CSTNode]:
  """The reads of the def variable ``name`` other than as ``name.create(...)`` (called
  directly or through a transform, ``jax.jit(name.create)(...)``)."""
  found = []
  for use in _def_reads(unit, name):
    attribute = unit.parent(use)
    if not (isinstance(attribute, cst.Attribute) and attribute.value is use
            and _unit.create_call_of(unit, attribute) is not None):
      found.append(use)
  return found


def legacy_call_around(unit: SourceFile, node: cst.CSTNode) -> Optional[cst.Call]:
  """The flax.optim call that ``node`` is an argument of (``optim.WeightNorm(opt_def)``, a
  group of ``MultiOptimizer``), whose own record names it; else None."""
  while isinstance(unit.parent(node), (cst.Arg, cst.Element, cst.Tuple)):
    node = unit.parent(node)
    if isinstance(node, cst.Arg):
      call = unit.parent(node)
      return call if isinstance(call, cst.Call) and unit.legacy(call.func) is not None else None
  return None


def only_created(unit: SourceFile, name: cst.Name) -> bool:
  """Whether the variable ``name`` is read once, or only as ``name.create(...)``
  (``reads_beside_create``)."""
  uses = _def_reads(unit, name)
  return len(uses) == 1 or bool(uses) and not reads_beside_create(unit, name)


def def_read_beside(unit: SourceFile, name: cst.Name) -> Optional[str]:
  """Where the def variable ``name``, read more than once, is read other than as the receiver
  of ``.create(...)`` or an argument of a flax.optim call (``save_hp(opt_def)`` beside
  ``opt_def.create(params)``), as a clause; else None."""
  if len(_def_reads(unit, name)) < 2:
    return None
  beside = [r for r in reads_beside_create(unit, name) if legacy_call_around(unit, r) is None]
  if not beside:
    return None
  return (f'{name.value}, which is also read at {_unit.at(unit, beside[0])} '
          f'({_unit.short(unit.code(_unit.statement_of(unit, beside[0])))})')


def _compared_with_a_string(unit: SourceFile, node: cst.CSTNode) -> bool:
  """Whether ``node`` is one side of a comparison whose other side is a string literal."""
  parent = unit.parent(node)
  if isinstance(parent, cst.ComparisonTarget):
    parent = unit.parent(parent)
  if not isinstance(parent, cst.Comparison):
    return False
  sides = [parent.left] + [t.comparator for t in parent.comparisons]
  return any(s is not node and isinstance(s, (cst.SimpleString, cst.ConcatenatedString,
                                               cst.FormattedString)) for s in sides)
