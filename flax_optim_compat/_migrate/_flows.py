"""How a value moves through the program, one node at a time: the slots each node joins.

Every storage place of a value is a *slot*: a variable (``('var', qualified name)``), a field
of a class family (``('field', family, name)``; family None: a class the analysis does not
know), a function's return (``('return', path, name, id)``), the result of a call that builds
its value from a function's (``('call', path, id)``: ``jax.grad(f, has_aux=True)(...)``, a
``lax.scan``) and a ``create(...)`` call (``('create', path, line, id)``); a *part* of a value
that is a tuple, at an index path, is a slot too (``('part', slot, (1, 0))``), and so is the
value at a string key of a dict built whole (``('part', slot, ('actor',))``: ``{'actor': opt}``
or ``dict(actor=opt)``, read and written as ``d['actor']``). A node *joins* two slots when the
value in one reaches the other: an assignment (tuples, nested, included), a return, an argument
of the project's own function or class (also through ``jax.jit`` / ``jax.pmap`` /
``functools.partial``, positional fields of a dataclass or NamedTuple), the aux of ``jax.grad``
/ ``value_and_grad``, the carry of ``lax.scan`` / ``fori_loop`` / ``while_loop``,
``.replace(field=...)``, a tree map over several trees, and the calls that hand back what they
are given (``_calls``). ``_project`` runs these joins to a fixed point.
"""
import ast
from typing import Callable, Dict, Iterable, List, Optional, Set, Tuple

import libcst as cst

from . import _calls
from . import _import_paths
from . import _unit
from ._program import Program
from ._unit import SourceFile

Join = Tuple[tuple, tuple]
SlotOf = Callable[[cst.CSTNode], Optional[tuple]]
SlotIn = Callable[[SourceFile, cst.CSTNode], Optional[tuple]]


# ---------------------------------------------------------------------- slots

def var_slot(unit: SourceFile, name: cst.CSTNode) -> Optional[tuple]:
  """The slot of the variable ``name``; None for a builtin (``None``, ``True``, ``print``):
  no value is stored there, so the ``None`` of ``temp=None`` and the ``None`` default of an
  ``optimizer`` field are two values, not one slot."""
  names = unit.names(name)
  if len(names) != 1 or next(iter(names)).startswith('builtins.'):
    return None
  param = _unit.parameter(unit, name) if '<locals>.<locals>' in next(iter(names)) else None
  lam = unit.enclosing(param, (cst.FunctionDef, cst.Lambda)) if param is not None else None
  if isinstance(lam, cst.Lambda):   # LibCST names every lambda's ``opt`` alike: one per lambda
    return ('var', next(iter(names)), id(lam))
  return ('var', next(iter(names)))


def field_slot(program: Program, unit: SourceFile, receiver: cst.CSTNode, name: str) -> tuple:
  """The slot of the attribute ``name`` of ``receiver``: the field (``Program.field_key``) of
  its class where the receiver is a method's ``self``, a variable bound once to an instance of
  the project's class (``instance_of``) or an expression that makes one, else the field of an
  unknown class (None)."""
  cls = program.receiver_class(unit, receiver)
  if cls is None:
    cls = (instance_of(program, unit, receiver) if isinstance(receiver, cst.Name) else
           _instance_made(program, unit, receiver, 0))   # ``ck.make(p).optimizer``
  return ('field', program.field_key(cls, name), name)


def instance_of(program: Program, unit: SourceFile, node: cst.CSTNode,
                depth: int = 0) -> Optional[str]:
  """The project's class of the variable ``node`` where it is bound once (``x = v`` or
  ``x: T = v``, the annotation unread) to an instance of the project's class: ``v`` calls the
  class, or hands back through pass-through calls a variable so bound (jaxfg's ``checkpoint:
  CheckpointContents = checkpoints.restore_checkpoint(..., target=checkpoint_template)``,
  ``checkpoint_template = CheckpointContents(optimizer=...)``); else None. The value is
  followed as an object: a same-named field of another class is not this one's."""
  if depth > 4 or not isinstance(node, cst.Name):
    return None
  value = _unit.assigned_value(unit, node, annotated=True)
  if value is None:
    return None
  return _instance_made(program, unit, value, depth)


def _instance_made(program: Program, unit: SourceFile, value: cst.CSTNode,
                   depth: int) -> Optional[str]:
  """The project's class of the instance ``value`` evaluates to: a call of the class, a
  variable bound once to one (``instance_of``), or a call of the project's function whose every
  ``return`` is one of the same class (uncertainty-baselines' ``checkpoint_data =
  checkpoint_utils.maybe_load_checkpoint(...)``, which returns ``CheckpointData(...)``); else
  None; so is a field ``x.<name>`` (``x`` a method's ``self`` or such an instance) every
  assignment of which (a ``None`` aside) is one of one class (jax-rl's ``self.module =
  Modules(...)``: ``self.module.actor`` is the field ``actor`` of ``Modules`` alone)."""
  value = _calls.unwrap(program, unit, value)
  if isinstance(value, cst.Name):
    return instance_of(program, unit, value, depth + 1)
  if isinstance(value, cst.Attribute):
    return _field_instance(program, unit, value, depth) if depth <= 4 else None
  cls = program.instance_class(unit, value)
  called = returned_values(program, unit, value) if cls is None and depth <= 4 else None
  if called is None:
    return cls
  made_in, _, values = called
  classes = {_instance_made(program, made_in, v, depth + 1) if v is not None else None
             for v in values}
  return classes.pop() if len(classes) == 1 else None


def _field_instance(program: Program, unit: SourceFile, node: cst.Attribute,
                    depth: int) -> Optional[str]:
  """``_instance_made`` of ``x.<name>`` (``node``), ``x`` a method's ``self`` or an instance of
  the project's class (``agent = Agent()``, then ``agent.optimizer.actor``)."""
  owner = program.receiver_class(unit, node.value) or _instance_made(
      program, unit, node.value, depth + 1)
  name = node.attr.value
  if owner is None or program.field_values(None, name):   # also set where its class is unknown
    return None
  classes = {_instance_made(program, u, v, depth + 1) if v is not None else None for u, v in
             program.field_values(program.field_key(owner, name), name)
             if not (isinstance(v, cst.Name) and v.value == 'None')}
  return classes.pop() if len(classes) == 1 else None


def returned_values(program: Program, unit: SourceFile, call: cst.CSTNode
                    ) -> Optional[Tuple[SourceFile, cst.FunctionDef, List[Optional[cst.CSTNode]]]]:
  """``(file, fdef, values)`` where ``call`` calls the project's plain function ``fdef`` (as
  ``resolve_callable`` gives it, no positional argument bound by a ``partial``): the value of
  each of its ``return`` and ``yield`` nodes, None for a bare ``return`` and for a ``yield``
  (a call of a generator function hands back no value its ``return`` names); else None."""
  made = program.resolve_callable(unit, call.func) if isinstance(call, cst.Call) else None
  if made is None or not isinstance(made[1], cst.FunctionDef) or made[2]:
    return None
  return made[0], made[1], [r.value if isinstance(r, cst.Return) else None
                            for r in _unit.returns_of(made[0], made[1])]


def part(slot: Optional[tuple], path: Tuple[int, ...]) -> Optional[tuple]:
  """The slot of the part of ``slot``'s value at ``path`` (``()``: the value itself)."""
  if slot is None or not path:
    return slot
  if slot[0] == 'part':
    return ('part', slot[1], slot[2] + tuple(path))
  return ('part', slot, tuple(path))


def return_slot(unit: SourceFile, fdef: cst.FunctionDef, path: Tuple[int, ...] = ()) -> tuple:
  """The slot of what ``fdef`` (or a lambda) returns (the part at ``path`` where it returns a
  tuple)."""
  name = fdef.name.value if isinstance(fdef, cst.FunctionDef) else '<lambda>'
  return part(('return', unit.path, name, id(fdef)), path)


def call_slot(unit: SourceFile, call: cst.Call) -> tuple:
  return ('call', unit.path, id(call))


def create_slot(unit: SourceFile, call: cst.Call) -> tuple:
  return ('create', unit.path, unit.line(call), id(call))


def literal_key(node: cst.Subscript):
  """The index of ``x[1]`` (an int) or the key of ``x['actor']`` (a str), else None."""
  if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
    return None
  index = node.slice[0].slice.value
  if isinstance(index, cst.Integer):
    return int(index.value)
  if isinstance(index, cst.SimpleString):
    return index.evaluated_value
  return None


def target_slot(program: Program, unit: SourceFile,
                target: cst.BaseExpression) -> Optional[tuple]:
  """The slot an assignment to ``target`` (a name, an attribute of a value, the item of a
  literal string key: ``optimizers['actor'] = ...``) writes."""
  if isinstance(target, cst.Name):
    return var_slot(unit, target)
  if isinstance(target, cst.Subscript) and isinstance(literal_key(target), str):
    return part(base_of(program, unit, target.value), (literal_key(target),))
  if isinstance(target, cst.Attribute) and not _unit.is_module_like(unit, target.value):
    return field_slot(program, unit, target.value, target.attr.value)
  return None


def annotated_slot(program: Program, unit: SourceFile,
                   annotation: cst.Annotation) -> Optional[tuple]:
  """The slot whose type ``annotation`` states (a parameter, a variable, a field, a return)."""
  owner = unit.parent(annotation)
  if isinstance(owner, cst.Param):
    return var_slot(unit, owner.name)
  if isinstance(owner, cst.AnnAssign) and isinstance(owner.target, cst.Name):
    owner_class = unit.enclosing(owner, (cst.ClassDef, cst.FunctionDef))
    if isinstance(owner_class, cst.ClassDef):
      return ('field', program.field_key(program.class_name(unit, owner_class),
                                         owner.target.value), owner.target.value)
    return var_slot(unit, owner.target)
  if isinstance(owner, cst.FunctionDef):
    return return_slot(unit, owner)
  return None


def base_of(program: Program, unit: SourceFile, node: cst.CSTNode) -> Optional[tuple]:
  """The slot that holds the value of ``node``, an optimizer or not (where its parts are)."""
  if isinstance(node, cst.Name):
    return var_slot(unit, node)
  got = (node.value, node.attr.value) if isinstance(node, cst.Attribute) else (
      _unit.literal_getattr(unit, node))   # ``getattr(agent, 'optimizer')``
  if got is not None:
    return None if _unit.is_module_like(unit, got[0]) else field_slot(program, unit, *got)
  if isinstance(node, cst.Subscript):
    key = literal_key(node)
    return None if key is None else part(base_of(program, unit, node.value), (key,))
  if isinstance(node, cst.Call):
    if program.traced_only(unit, node):
      return None   # ``jax.make_jaxpr(step)(opt)``: a jaxpr, not what ``step`` returns
    arg = _calls.pass_through_arg(program, unit, node)
    if arg is not None:
      return base_of(program, unit, arg)
    if _calls.differentiated(program, unit, node) or _calls.loop(program, unit, node):
      return call_slot(unit, node)
    callee = program.resolve_callable(unit, node.func)
    if callee is not None and isinstance(callee[1], cst.FunctionDef):
      if _calls.returned_parameter(program, callee[0], callee[1]) is not None:
        return call_slot(unit, node)   # what this call passes (``_Joiner.per_call``)
      return return_slot(callee[0], callee[1])
    lam = _calls.called_lambda(unit, node.func) if callee is None else (
        callee[1] if isinstance(callee[1], cst.Lambda) else None)   # a parameter bound to one
    if lam is not None:
      return return_slot(callee[0] if callee else unit, lam)
    if callee is None and _unit.create_method(unit, node) is not None:
      return create_slot(unit, node)   # a def's create, traced to a flax.optim def or not
  return None


class Known:
  """The slots known to hold an optimizer so far, and which parts of each value are one."""

  def __init__(self):
    self.slots: Set[tuple] = set()
    self._parts: Dict[tuple, Set[tuple]] = {}

  def __contains__(self, slot) -> bool:
    return slot in self.slots

  def __iter__(self):
    return iter(self.slots)

  def add(self, slot: tuple) -> bool:
    if slot in self.slots:
      return False
    self.slots.add(slot)
    if slot[0] == 'part':
      self._parts.setdefault(slot[1], set()).add(slot)
    return True

  def parts(self, base: Optional[tuple]) -> List[Tuple[Tuple[int, ...], tuple]]:
    """``[(path, slot)]``: the known optimizers inside the value of ``base`` (path ``()``:
    the value is one)."""
    if base is None:
      return []
    found = [((), base)] if base in self.slots else []
    root, prefix = (base[1], base[2]) if base[0] == 'part' else (base, ())
    for slot in self._parts.get(root, ()):
      if slot[2][:len(prefix)] == prefix and len(slot[2]) > len(prefix):
        found.append((slot[2][len(prefix):], slot))
    return found


# ---------------------------------------------------------------------- joins

def joins(program: Program, unit: SourceFile, node: cst.CSTNode, slot_in: SlotIn,
          known: Known) -> List[Join]:
  """The pairs of slots that ``node`` joins, given ``slot_in`` (the slot an expression's
  optimizer is in, else None, for an expression of any file) and the slots ``known`` to hold
  an optimizer so far."""
  joiner = _Joiner(program, unit, slot_in, known)
  joiner.node(node)
  return joiner.found


class _Joiner:

  def __init__(self, program: Program, unit: SourceFile, slot_in: SlotIn, known: Known):
    self.program, self.unit, self.slot_in, self.known = program, unit, slot_in, known
    self.slot_of: SlotOf = lambda n: slot_in(unit, n)
    self.found: List[Join] = []

  def node(self, node: cst.CSTNode):
    program, unit = self.program, self.unit
    if isinstance(node, cst.Assign):
      for t in node.targets:
        self.target(t.target, node.value)
    elif isinstance(node, cst.AnnAssign) and node.value is not None:
      self.target(node.target, node.value)
    elif isinstance(node, cst.Return) and node.value is not None:
      fdef = unit.enclosing(node, (cst.FunctionDef, cst.Lambda))
      if isinstance(fdef, cst.FunctionDef):
        self.value(return_slot(unit, fdef), node.value)
        if _calls.accessor(fdef) == 'getter':   # ``self.optimizer``: what the property returns
          self.value(self.accessor_field(fdef), node.value)
    elif isinstance(node, cst.FunctionDef) and _calls.accessor(node) == 'setter':
      params = node.params.params
      field = self.accessor_field(node)
      if len(params) == 2 and field is not None:   # ``self.optimizer = v`` binds ``value``
        value = var_slot(unit, params[1].name)   # either way, once one side holds one
        self.copy(field, value)
        self.copy(value, field)
    elif isinstance(node, cst.Lambda):
      self.value(return_slot(unit, node), node.body)
    elif isinstance(node, cst.Attribute):
      self.field(node.value, node.attr.value)
    elif _unit.literal_getattr(unit, node) is not None:
      self.field(*_unit.literal_getattr(unit, node))
    elif isinstance(node, cst.Call) and unit.names(node.func) & _calls.TREE_MAPS:
      slots = [self.slot_of(a.value) for a in node.args[1:] if a.keyword is None and not a.star]
      slots = [s for s in slots if s]
      for other in slots[1:]:
        self.found.append((slots[0], other))
    elif isinstance(node, cst.Call):
      if _calls.pass_through_arg(program, unit, node) is not None:
        return   # the project's function that hands its argument back: not a parameter
      callee = program.resolve_callable(unit, node.func)
      bound = program.partial_callee(unit, node)
      differentiated = _calls.differentiated(program, unit, node)
      loop = _calls.loop(program, unit, node)
      lam = _calls.called_lambda(unit, node.func) if all(
          x is None for x in (callee, bound, differentiated, loop)) else None
      if callee is not None:
        self.call(node.args, callee)
        if isinstance(callee[1], cst.FunctionDef):
          self.per_call(node, callee)
      elif bound is not None:   # ``partial(loss_fn, opt)``: opt is loss_fn's first parameter
        self.call(node.args[1:], bound)
      elif differentiated is not None:
        callee, aux = differentiated
        self.call(node.args, callee)
        if aux is not None:
          self.copy(part(call_slot(unit, node), aux), return_slot(callee[0], callee[1], (1,)))
      elif loop is not None:
        self.loop(node, *loop)
      elif lam is not None:
        self.call(node.args, (unit, lam, 0))
      elif isinstance(node.func, cst.Attribute) and node.func.attr.value in ('replace',
                                                                         '_replace'):
        if self.slot_of(node.func.value) is None:
          for arg in node.args:
            if arg.keyword is not None:
              self.value(field_slot(program, unit, node.func.value, arg.keyword.value),
                         arg.value)

  def accessor_field(self, fdef: cst.FunctionDef) -> Optional[tuple]:
    """The field a property of the project's class reads or sets: ``self.<name>``."""
    owner = self.unit.enclosing(self.unit.parent(fdef), (cst.ClassDef, cst.FunctionDef))
    if not isinstance(owner, cst.ClassDef):
      return None
    name = fdef.name.value
    return ('field', self.program.field_key(self.program.class_name(self.unit, owner), name),
            name)

  # ---- a value into a slot, a slot's value into targets

  def value(self, dest: Optional[tuple], value: cst.BaseExpression):
    """``dest`` receives ``value``: each element of a tuple into its part."""
    if dest is None:
      return
    value = _calls.unwrap(self.program, self.unit, value)   # ``replicate((a, b))``
    if isinstance(value, cst.Tuple):   # not a list: a list changes after it is built
      for i, e in enumerate(value.elements):
        if isinstance(e, cst.StarredElement):
          return
        self.value(part(dest, (i,)), e.value)
      return
    # A dict changes only by ``d['key'] = ...``, a target here.
    items = _calls.dict_items(self.unit, value)
    if items is not None:
      for key, v in items:
        self.value(part(dest, (key,)), v)
      return
    slot = self.slot_of(value)
    if slot:
      self.found.append((dest, slot))
    source = self.base(value)
    self.copy(dest, source)
    if source is not None and (dest[1] if dest[0] == 'part' else dest)[0] == 'field':
      # A field that holds an optimizer (``opt: flax.optim.Optimizer``) makes what is stored
      # in it one: ``State(opt=optimizer)`` ties ``optimizer`` to the field's object.
      self.copy(source, dest)

  def base(self, value: cst.BaseExpression) -> Optional[tuple]:
    """``base_of(value)``; None for a member of an optimizer (``opt.target`` is its params,
    not the field ``target`` of a class the analysis does not know, named alike)."""
    if isinstance(value, cst.Attribute) and self.slot_of(value.value) is not None:
      return None
    return base_of(self.program, self.unit, value)

  def copy(self, dest: tuple, source: Optional[tuple]):
    """``dest`` holds what ``source`` holds: each known optimizer part of it."""
    for path, slot in self.known.parts(source):
      self.found.append((part(dest, path), slot))

  def target(self, target: cst.BaseExpression, value: cst.BaseExpression):
    program, unit = self.program, self.unit
    if isinstance(target, (cst.Tuple, cst.List)):
      elements = [e.value for e in target.elements]
      inner = _calls.unwrap(program, unit, value)   # ``a, b = jax_utils.replicate((a, b))``
      if isinstance(inner, (cst.Tuple, cst.List)) and len(inner.elements) == len(elements):
        for t, v in zip(elements, inner.elements):
          self.target(t, v.value)
      elif isinstance(inner, cst.Call) and isinstance(inner.func, cst.Attribute) and (
          inner.func.attr.value == 'optimize'):
        # ``new, loss[, aux] = opt.optimize(loss_fn)``: the first target is the new optimizer.
        slot = self.slot_of(inner.func.value)
        tslot = target_slot(program, unit, elements[0]) if elements else None
        if slot and tslot:
          self.found.append((tslot, slot))
      else:
        self.unpack(target, self.base(value))
      return
    self.value(target_slot(program, unit, target), value)

  def unpack(self, target: cst.BaseExpression, source: Optional[tuple]):
    """``target`` (a name, an attribute or a tuple of them) bound to the value of ``source``."""
    if source is None:
      return
    if isinstance(target, (cst.Tuple, cst.List)):
      for i, e in enumerate(target.elements):
        if isinstance(e, cst.StarredElement):
          return
        self.unpack(e.value, part(source, (i,)))
      return
    tslot = target_slot(self.program, self.unit, target)
    if tslot:
      self.copy(tslot, source)

  # ---- fields, calls, loops

  def field(self, receiver: cst.CSTNode, name: str):
    """Joins the attribute ``receiver.<name>`` of an unknown class with the same field of the
    classes that hold an optimizer in it, where the file may see one there
    (``SourceFile.sees_field``: a same-named attribute of a TensorFlow agent is not one of
    theirs); and ``self.<name>`` of a class with the field of an unknown class that holds one."""
    program, unit = self.program, self.unit
    if (not unit.sees_field(name) or _unit.is_module_like(unit, receiver)
        or _import_paths.library_global(program, unit, receiver)):
      return
    slot = field_slot(program, unit, receiver, name)
    unknown = ('field', None, name)
    if slot == unknown:
      for other in [s for s in self.known.slots
                    if s[0] == 'field' and s[2] == slot[2] and s != unknown]:
        self.found.append((unknown, other))
    elif unknown in self.known:
      self.found.append((slot, unknown))

  def call(self, args: Iterable[cst.Arg], callee):
    """An argument and the parameter (or the class field) it binds; none of a call that does
    not match the function's parameters (it raises TypeError before it runs)."""
    cunit, cnode, shift = callee
    args = list(args)
    if mismatch(cnode, args) is not None:
      return
    if isinstance(cnode, cst.ClassDef):
      cls = self.program.class_name(cunit, cnode)
      fields = _fields(cunit, cnode)
      for i, arg in enumerate(args):
        if arg.star:
          break
        name = arg.keyword.value if arg.keyword else (fields[i] if i < len(fields) else None)
        if name is not None:
          self.value(('field', self.program.field_key(cls, name), name), arg.value)
      return
    params = _positional(cunit, cnode)[shift:]
    by_name = {p.name.value: p
               for p in list(cnode.params.params) + list(cnode.params.kwonly_params)}
    for i, arg in enumerate(args):
      if arg.star:
        continue
      param = by_name.get(arg.keyword.value) if arg.keyword else (
          params[i] if i < len(params) else None)
      if param is not None:
        self.value(var_slot(cunit, param.name), arg.value)

  def per_call(self, call: cst.Call, callee):
    """The result of ``call``, where its function returns its parameter
    (``_calls.returned_parameter``): what this call passes for it, and the values the function
    binds to it; a ``*args`` / ``**kwargs`` that may pass it: what every call passes."""
    cunit, fdef, shift = callee
    returned = _calls.returned_parameter(self.program, cunit, fdef)
    if returned is None:
      return
    param, values = returned
    dest = call_slot(self.unit, call)
    arg = bound_argument(cunit, fdef, call.args, shift, param)
    if arg is UNKNOWN:
      self.copy(dest, var_slot(cunit, param.name))
      return
    if arg is param.default:   # the default, an expression of the function's file
      values = [*values, arg] if arg is not None else values
    else:
      self.value(dest, arg)
    for value in values:
      inner = _calls.unwrap(self.program, cunit, value)
      if isinstance(inner, cst.Name) and var_slot(cunit, inner) == var_slot(cunit, param.name):
        continue   # ``tree = jax.device_put(tree, d)``: what this call passes, as above
      slot = self.slot_in(cunit, value)
      if slot:
        self.found.append((dest, slot))
      self.copy(dest, base_of(self.program, cunit, value))

  def loop(self, call: cst.Call, callee, param_at: int, init, path: Tuple[int, ...]):
    """The carry: the initial value, the body's carry parameter, the carry the body returns
    and the loop's result are one value."""
    cunit, fdef, shift = callee
    params = _positional(cunit, fdef)[shift:]
    if param_at >= len(params):
      return
    carry = var_slot(cunit, params[param_at].name)
    if carry is None:
      return
    self.value(carry, init)
    returned = return_slot(cunit, fdef, path)
    self.copy(carry, returned)
    self.copy(returned, carry)
    self.copy(part(call_slot(self.unit, call), path), carry)


UNKNOWN = object()   # an argument the call may bind but does not show (``*args``, ``**kw``)


def mismatch(fdef, args: Iterable[cst.Arg]) -> Optional[str]:
  """Why a call with ``args`` cannot bind ``fdef``'s parameters, where a keyword names none of
  them and ``fdef`` takes no ``**kwargs`` (Python raises TypeError before the function runs:
  AAIR-lab/saycan's ``demo.py`` calls ``run_cliport(optim, env, obs, text, path,
  show_state=False)`` of a ``def run_cliport(output_dir, optim, env, obs, text)``), else None.
  Positional arguments are not counted: a method's ``self`` is bound or passed depending on
  how the call reaches it; nor is a decorated function, whose wrapper may take more."""
  if not isinstance(fdef, cst.FunctionDef) or fdef.params.star_kwarg is not None or (
      fdef.decorators):
    return None
  named = {p.name.value for p in [*fdef.params.params, *fdef.params.kwonly_params]}
  for arg in args:
    if arg.keyword is not None and arg.keyword.value not in named:
      return (f'the call does not match the parameters of {fdef.name.value}() (no parameter '
              f'{arg.keyword.value}), so it raises TypeError as it is')
  return None


def bound_argument(unit: SourceFile, fdef: cst.FunctionDef, args: Iterable[cst.Arg], shift: int,
                   param: cst.Param):
  """What a call with ``args`` binds to ``fdef``'s parameter ``param`` (of ``unit``): the
  argument, the parameter's default where the call passes none (None without one), or
  ``UNKNOWN`` where a ``*args`` / ``**kwargs`` of the call may bind it. ``shift``: leading
  positional parameters bound before ``args`` (by a ``functools.partial``)."""
  args = list(args)
  for arg in args:
    if arg.keyword is not None and arg.keyword.value == param.name.value:
      return arg.value
  params = _positional(unit, fdef)[shift:]
  position = next((i for i, p in enumerate(params) if p is param), None)
  positional = []
  for arg in args:
    if arg.star:
      return UNKNOWN
    if arg.keyword is None:
      positional.append(arg.value)
  if position is not None and position < len(positional):
    return positional[position]
  return param.default


def reachable_returns(unit: SourceFile, fdef: cst.FunctionDef, call_unit: SourceFile,
                      call: cst.Call) -> List[cst.CSTNode]:
  """The ``return`` / ``yield`` nodes of ``fdef`` (of ``unit``) that ``call`` (of
  ``call_unit``), a call of it, can reach: one inside a branch of an ``if`` whose test the call
  decides, the other branch taken, is left out. A test is decided where the call names
  ``fdef`` itself (not a variable, ``functools.partial`` or ``jax.jit`` of it, which may bind
  more), the test reads one parameter that nothing in ``fdef`` binds again, as ``p``, ``not
  p``, ``p == literal`` or ``p != literal``, and the call binds a literal to it (its default
  where the call passes none): ``optimization_manager(config)`` of ``def
  optimization_manager(config, deq_score_joint=False)`` reaches the ``return`` of its
  ``else``, never that of ``if deq_score_joint:``. So is one after such an ``if`` whose taken
  branch ends in a ``return`` or ``raise`` (``if joint: return joint_fn`` then ``return
  step_fn``: a call binding ``joint=True`` never reaches the second). Any other test leaves
  both branches reachable."""
  returns = _unit.returns_of(unit, fdef)
  if not call_unit.names(call.func) & unit.names(fdef.name):
    return returns
  args, shift = list(call.args), 0
  reachable = []
  for found in returns:
    child, node = found, unit.parent(found)
    while node is not None and node is not fdef:
      if isinstance(node, cst.If) and child is not node.test:
        taken = _decided(unit, fdef, args, shift, node.test)
        if taken is not None and taken != (child is node.body):
          break
      if isinstance(node, cst.IndentedBlock) and any(
          isinstance(before, cst.If) and _leaves(unit, fdef, args, shift, before)
          for before in node.body[:next(i for i, s in enumerate(node.body) if s is child)]):
        break
      child, node = node, unit.parent(node)
    else:
      reachable.append(found)
  return reachable


def _leaves(unit: SourceFile, fdef: cst.FunctionDef, args: List[cst.Arg], shift: int,
            branch: cst.If) -> bool:
  """Whether a call with ``args`` takes a branch of the ``if`` ``branch`` (``_decided``) that
  ends in a ``return`` or ``raise``, so that no statement after the ``if`` runs."""
  taken = _decided(unit, fdef, args, shift, branch.test)
  if taken is None:
    return False
  block = branch.body if taken else branch.orelse
  if isinstance(block, cst.If):   # ``elif``
    return _leaves(unit, fdef, args, shift, block)
  block = block.body if isinstance(block, cst.Else) else block
  last = block.body[-1] if isinstance(block, cst.IndentedBlock) and block.body else None
  return isinstance(last, cst.SimpleStatementLine) and isinstance(
      last.body[-1], (cst.Return, cst.Raise))


_UNDECIDED = object()


def _decided(unit: SourceFile, fdef: cst.FunctionDef, args: List[cst.Arg], shift: int,
             test: cst.BaseExpression) -> Optional[bool]:
  """Whether the ``if`` test ``test`` of ``fdef`` is true for a call with ``args``; None where
  the call does not decide it (``reachable_returns`` says which tests it decides)."""
  negate = isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)
  if negate:
    test = test.expression
  compared = None
  if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(
      test.comparisons[0].operator, (cst.Equal, cst.NotEqual)):
    compared, test = test.comparisons[0], test.left
  if not isinstance(test, cst.Name):
    return None
  value = _parameter_literal(unit, fdef, args, shift, test)
  if compared is not None and value is not _UNDECIDED:
    other = _literal(compared.comparator)
    value = _UNDECIDED if other is _UNDECIDED else (
        (value == other) == isinstance(compared.operator, cst.Equal))
  if value is _UNDECIDED:
    return None
  return bool(value) != negate


def _parameter_literal(unit: SourceFile, fdef: cst.FunctionDef, args: List[cst.Arg], shift: int,
                       name: cst.Name):
  """The literal value a call with ``args`` binds to ``fdef``'s parameter read as ``name``,
  where nothing in ``fdef`` binds it again; else ``_UNDECIDED``."""
  param = _unit.parameter(unit, name)   # None where bound again (``p = ...``)
  if param is None or unit.enclosing(param, (cst.FunctionDef, cst.Lambda)) is not fdef or any(
      isinstance(n, (cst.Nonlocal, cst.Global)) and any(
          n_.name.value == name.value for n_ in n.names) for n in _unit.walk(fdef.body)):
    return _UNDECIDED   # (``nonlocal p`` in a nested function may bind it too)
  arg = bound_argument(unit, fdef, args, shift, param)
  if arg is None or arg is UNKNOWN:
    return _UNDECIDED
  return _literal(arg)


def _literal(node: cst.BaseExpression):
  """The value of a literal expression (``False``, ``'joint'``, ``0``), else ``_UNDECIDED``."""
  try:
    return ast.literal_eval(cst.Module([]).code_for_node(node).strip())
  except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
    return _UNDECIDED


def _positional(unit: SourceFile, fdef: cst.FunctionDef) -> List[cst.Param]:
  params = list(fdef.params.posonly_params) + list(fdef.params.params)
  if isinstance(unit.enclosing(unit.parent(fdef), (cst.ClassDef, cst.FunctionDef)),
                cst.ClassDef):
    params = params[1:]   # self
  return params


_RECORDS = frozenset({'flax.struct.dataclass', 'dataclasses.dataclass', 'typing.NamedTuple',
                      'chex.dataclass'})


def _fields(unit: SourceFile, classdef: cst.ClassDef) -> List[str]:
  """The fields of a dataclass or NamedTuple in their positional order, else ``[]``."""
  heads = [d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator
           for d in classdef.decorators] + [b.value for b in classdef.bases]
  if not any(unit.names(h) & _RECORDS for h in heads):
    return []
  fields = []
  for statement in classdef.body.body:
    if isinstance(statement, cst.SimpleStatementLine):
      for small in statement.body:
        if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
          fields.append(small.target.value)
  return fields
