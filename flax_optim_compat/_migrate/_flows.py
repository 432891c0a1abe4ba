"""How a value moves through the program, one node at a time: the slots each node joins.

Every storage place of a value is a *slot*: a variable (``('var', qualified name)``), a field
of a class family (``('field', family, name)``; family None: a class the analysis does not
know), a function's return (``('return', path, name, id, index)``, index None for the whole
value) and a ``create(...)`` call (``('create', path, line, id)``). A node *joins* two slots
when the value in one reaches the other: an assignment (tuples included), a return, an
argument of the project's own function or class (also through ``jax.jit`` / ``jax.pmap`` /
``functools.partial``), ``.replace(field=...)``, a tree map over several trees, and the library
calls that hand back what they are given (``jax_utils.replicate``,
``checkpoints.restore_checkpoint``, ...). ``_project`` runs these joins to a fixed point.
"""
from typing import Callable, List, Optional, Set, Tuple

import libcst as cst

from . import _unit
from ._program import Program
from ._unit import SourceFile

# Calls that return the optimizer they are given (argument position, keyword name).
_PASS_THROUGH = {
    'flax.jax_utils.replicate': (0, 'tree'),
    'flax.jax_utils.unreplicate': (0, 'tree'),
    'flax.training.checkpoints.restore_checkpoint': (1, 'target'),
    'jax.device_get': (0, 'x'),
    'jax.device_put': (0, 'x'),
    'jax.block_until_ready': (0, 'x'),
    'flax.serialization.from_bytes': (0, 'target'),
    'flax.serialization.from_state_dict': (0, 'target'),
    'jax.tree_util.tree_map': (1, 'tree'),
    'jax.tree.map': (1, 'tree'),
    'jax.tree_map': (1, 'tree'),            # removed from jax; legacy programs use them
    'jax.tree_multimap': (1, 'tree'),
    'jax.tree_util.tree_multimap': (1, 'tree'),
}
# Of these, every positional argument after the function is a tree of the same structure.
TREE_MAPS = frozenset({'jax.tree_util.tree_map', 'jax.tree.map', 'jax.tree_map',
                       'jax.tree_multimap', 'jax.tree_util.tree_multimap'})

Join = Tuple[tuple, tuple]
SlotOf = Callable[[cst.CSTNode], Optional[tuple]]


# ---------------------------------------------------------------------- slots

def var_slot(unit: SourceFile, name: cst.CSTNode) -> Optional[tuple]:
  names = unit.names(name)
  if len(names) != 1:
    return None
  return ('var', next(iter(names)))


def field_slot(program: Program, unit: SourceFile, receiver: cst.CSTNode, name: str) -> tuple:
  """The slot of the attribute ``name`` of ``receiver``: the field of its class family where
  the receiver is a method's ``self``, else the field of an unknown class (None)."""
  return ('field', program.receiver_family(unit, receiver), name)


def return_slot(unit: SourceFile, fdef: cst.FunctionDef, index: Optional[int] = None) -> tuple:
  """The slot of what ``fdef`` returns (its ``index``-th element where it returns a tuple)."""
  return ('return', unit.path, fdef.name.value, id(fdef), index)


def create_slot(unit: SourceFile, call: cst.Call) -> tuple:
  return ('create', unit.path, unit.line(call), id(call))


def target_slot(program: Program, unit: SourceFile,
                target: cst.BaseExpression) -> Optional[tuple]:
  """The slot an assignment to ``target`` (a name or an attribute of a value) writes."""
  if isinstance(target, cst.Name):
    return var_slot(unit, target)
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
      return ('field', program.family(unit, owner_class), owner.target.value)
    return var_slot(unit, owner.target)
  if isinstance(owner, cst.FunctionDef):
    return return_slot(unit, owner)
  return None


# ---------------------------------------------------------------------- library calls

def unwrap(unit: SourceFile, value: cst.BaseExpression) -> cst.BaseExpression:
  """``value`` inside the pass-through calls around it (``replicate((a, b))`` -> ``(a, b)``)."""
  for _ in range(8):
    arg = pass_through_arg(unit, value) if isinstance(value, cst.Call) else None
    if arg is None:
      return value
    value = arg
  return value


def pass_through_arg(unit: SourceFile, call: cst.Call) -> Optional[cst.BaseExpression]:
  """The argument that ``call`` (``jax_utils.replicate(opt)``, ...) returns, else None."""
  for name in unit.names(call.func):
    if name in _PASS_THROUGH:
      return _unit.call_arg(call, *_PASS_THROUGH[name])
  return None


# ---------------------------------------------------------------------- joins

def joins(program: Program, unit: SourceFile, node: cst.CSTNode, slot_of: SlotOf,
          known: Set[tuple]) -> List[Join]:
  """The pairs of slots that ``node`` joins, given ``slot_of`` (the slot an expression's
  optimizer is in, else None) and the slots ``known`` to hold an optimizer so far."""
  found: List[Join] = []
  if isinstance(node, cst.Assign):
    for t in node.targets:
      _bind_targets(program, unit, t.target, node.value, slot_of, known, found)
  elif isinstance(node, cst.AnnAssign) and node.value is not None:
    _bind_targets(program, unit, node.target, node.value, slot_of, known, found)
  elif isinstance(node, cst.Return) and node.value is not None:
    fdef = unit.enclosing(node, (cst.FunctionDef, cst.Lambda))
    if isinstance(fdef, cst.FunctionDef):
      value = unwrap(unit, node.value)   # ``return restore_checkpoint(d, (opt, ema))``
      values = ([(i, e.value) for i, e in enumerate(value.elements)]
                if isinstance(value, cst.Tuple) else [(None, node.value)])
      for i, v in values:
        slot = slot_of(v)
        if slot:
          found.append((return_slot(unit, fdef, i), slot))
  elif isinstance(node, cst.Attribute):
    _join_field(program, unit, node, known, found)
  elif isinstance(node, cst.Call) and unit.names(node.func) & TREE_MAPS:
    slots = [slot_of(a.value) for a in node.args[1:] if a.keyword is None and not a.star]
    slots = [s for s in slots if s]
    for other in slots[1:]:
      found.append((slots[0], other))
  elif isinstance(node, cst.Call):
    callee = program.resolve_callable(unit, node.func)
    bound = program.partial_callee(unit, node)
    if callee is not None:
      _join_call(program, unit, node, callee, slot_of, found)
    elif bound is not None:   # ``partial(loss_fn, opt)``: opt is loss_fn's first parameter
      _join_call(program, unit, node.with_changes(args=node.args[1:]), bound, slot_of, found)
    elif isinstance(node.func, cst.Attribute) and node.func.attr.value == 'replace':
      if slot_of(node.func.value) is None:
        for arg in node.args:
          if arg.keyword is not None:
            slot = slot_of(arg.value)
            if slot:
              found.append(
                  (field_slot(program, unit, node.func.value, arg.keyword.value), slot))
  return found


def _bind_targets(program: Program, unit: SourceFile, target: cst.BaseExpression,
                  value: cst.BaseExpression, slot_of: SlotOf, known: Set[tuple],
                  found: List[Join]):
  if isinstance(target, (cst.Tuple, cst.List)):
    elements = [e.value for e in target.elements]
    value = unwrap(unit, value)   # ``a, b = jax_utils.replicate((a, b))``
    if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(elements):
      for t, v in zip(elements, value.elements):
        _bind_targets(program, unit, t, v.value, slot_of, known, found)
    elif isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and (
        value.func.attr.value == 'optimize'):
      # ``new, loss[, aux] = opt.optimize(loss_fn)``: the first target is the new optimizer.
      slot = slot_of(value.func.value)
      tslot = target_slot(program, unit, elements[0]) if elements else None
      if slot and tslot:
        found.append((tslot, slot))
    elif isinstance(value, cst.Call):
      callee = program.resolve_callable(unit, value.func)
      if callee is not None and isinstance(callee[1], cst.FunctionDef):
        for i, t in enumerate(elements):
          rslot = return_slot(callee[0], callee[1], i)
          tslot = target_slot(program, unit, t)
          if tslot and rslot in known:
            found.append((tslot, rslot))
    return
  slot = slot_of(value)
  tslot = target_slot(program, unit, target)
  if slot and tslot:
    found.append((tslot, slot))


def _join_field(program: Program, unit: SourceFile, node: cst.Attribute, known: Set[tuple],
                found: List[Join]):
  """Joins the attribute ``node`` of an unknown class with the same field of the classes
  that hold an optimizer in it, in a file that uses jax or flax (a same-named attribute of
  a TensorFlow agent is not one of theirs); and ``self.<name>`` of a class with the field of
  an unknown class that holds one."""
  if not unit.uses_jax_or_flax or _unit.is_module_like(unit, node.value):
    return
  slot = field_slot(program, unit, node.value, node.attr.value)
  unknown = ('field', None, node.attr.value)
  if slot == unknown:
    for other in [s for s in known if s[0] == 'field' and s[2] == slot[2] and s != unknown]:
      found.append((unknown, other))
  elif unknown in known:
    found.append((slot, unknown))


def _join_call(program: Program, unit: SourceFile, call: cst.Call, callee, slot_of: SlotOf,
               found: List[Join]):
  """An argument and the parameter (or the class field, by keyword) it binds."""
  cunit, cnode, shift = callee
  if isinstance(cnode, cst.ClassDef):
    for arg in call.args:
      if arg.keyword is not None:
        slot = slot_of(arg.value)
        if slot:
          found.append((('field', program.family(cunit, cnode), arg.keyword.value), slot))
    return
  params = list(cnode.params.params)
  if isinstance(cunit.enclosing(cunit.parent(cnode), (cst.ClassDef, cst.FunctionDef)),
                cst.ClassDef):
    params = params[1:]   # self
  params = params[shift:]
  by_name = {p.name.value: p
             for p in list(cnode.params.params) + list(cnode.params.kwonly_params)}
  for i, arg in enumerate(call.args):
    if arg.star:
      continue
    slot = slot_of(arg.value)
    if not slot:
      continue
    param = by_name.get(arg.keyword.value) if arg.keyword else (
        params[i] if i < len(params) else None)
    if param is not None:
      pslot = var_slot(cunit, param.name)
      if pslot:
        found.append((pslot, slot))
