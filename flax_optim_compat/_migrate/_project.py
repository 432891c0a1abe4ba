"""Whole-project analysis: which values are legacy optimizers, across the project's files.

A value is a legacy optimizer when it comes from ``<def>.create(...)`` of a ``flax.optim`` def,
or flows from one (``_flows``: assignments, returns, arguments, fields, pass-through calls).
Slots joined by a flow are one *object*, rewritten entirely or not at all: the joins run to a
fixed point here, over the parsed program (``_program``). What the code does with each
optimizer value (its *sites*) is classified in ``_sites``.
"""
from typing import Dict, List, Optional, Set, Tuple

import libcst as cst

from . import _flows
from . import _unit
from ._program import Program
from ._program import UnionFind
from ._program import python_files  # noqa: F401  (the command and the corpus tool list files)
from ._unit import SourceFile


class Project(Program):
  """The parsed program, and the optimizer objects found in it."""

  def __init__(self, sources: Dict[str, str]):
    """``sources``: absolute path -> text."""
    super().__init__(sources)
    self.groups = UnionFind()
    self.optimizer_slots: Set[tuple] = set()
    self.def_slots: Set[tuple] = set()
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
    if isinstance(node, cst.Call):
      target = self.resolve_callable(unit, node.func)
      if target is None or not isinstance(target[1], cst.FunctionDef) or target[2]:
        return None
      cunit, fdef, _ = target
      returns = [n for n in _unit.walk(fdef) if isinstance(n, cst.Return)
                 and cunit.enclosing(n, (cst.FunctionDef, cst.Lambda)) is fdef]
      if not returns or any(r.value is None for r in returns):
        return None
      for r in returns:
        found = self.def_branches(cunit, r.value, depth + 1)
        if found is None:
          return None
        branches.extend(found)
      return branches
    return None

  def is_create(self, unit: SourceFile, node: cst.CSTNode) -> bool:
    return (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
            and node.func.attr.value == 'create'
            and self.def_branches(unit, node.func.value) is not None)

  # -------------------------------------------------------------------- what is an optimizer

  def slot_of(self, unit: SourceFile, node: cst.CSTNode) -> Optional[tuple]:
    """The slot whose optimizer ``node`` evaluates to, or None if it is not one."""
    if isinstance(node, cst.Call):
      if self.is_create(unit, node):
        return _flows.create_slot(unit, node)
      func = node.func
      # Before the methods: ``jax_utils.replicate(x)`` is a library call, not ``x.replicate()``.
      arg = _flows.pass_through_arg(unit, node)
      if arg is not None:
        return self.slot_of(unit, arg)
      if isinstance(func, cst.Attribute) and func.attr.value in (
          'apply_gradient', 'replace', 'replicate', 'unreplicate'):
        return self.slot_of(unit, func.value)
      target = self.resolve_callable(unit, func)
      if target is not None and isinstance(target[1], cst.FunctionDef):
        slot = _flows.return_slot(target[0], target[1])
        return slot if slot in self.optimizer_slots else None
      return None
    if isinstance(node, cst.Name):
      slot = _flows.var_slot(unit, node)
      return slot if slot in self.optimizer_slots else None
    if isinstance(node, cst.Attribute):
      if _compared_with_a_string(unit, node):
        return None   # ``config.optim.optimizer == 'Adam'``: a config field, not an optimizer
      slot = _flows.field_slot(self, unit, node.value, node.attr.value)
      if slot[1] is None and not unit.uses_jax_or_flax:
        return None   # an attribute of an unknown class, in a file that never sees jax or flax
      if slot in self.optimizer_slots and not _unit.is_module_like(unit, node.value):
        return slot
      return None
    if isinstance(node, cst.Subscript) and len(node.slice) == 1:
      index = node.slice[0].slice
      if isinstance(index, cst.Index) and isinstance(index.value, cst.Integer):
        call = node.value
        if isinstance(call, cst.Call):
          target = self.resolve_callable(unit, call.func)
          if target is not None and isinstance(target[1], cst.FunctionDef):
            slot = _flows.return_slot(target[0], target[1], int(index.value.value))
            return slot if slot in self.optimizer_slots else None
    return None

  def _mark(self, slot: tuple, other: Optional[tuple] = None) -> bool:
    changed = False
    if slot not in self.optimizer_slots:
      self.optimizer_slots.add(slot)
      changed = True
    if other is not None:
      if other not in self.optimizer_slots:
        self.optimizer_slots.add(other)
        changed = True
      changed |= self.groups.union(slot, other)
    else:
      self.groups.find(slot)
    return changed

  # -------------------------------------------------------------------- the fixed point

  def _analyse(self):
    # Variables bound to a legacy def: ``opt_def = optim.Adam(...)``.
    for unit in self.units:
      for node in unit.nodes:
        if isinstance(node, cst.Assign) and len(node.targets) == 1:
          target = node.targets[0].target
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
        slot_of = lambda n, unit=unit: self.slot_of(unit, n)
        for node in unit.nodes:
          for slot, other in _flows.joins(self, unit, node, slot_of, self.optimizer_slots):
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
          for _, call in self.def_branches(unit, node.func.value):
            if id(call) in by_def:
              self._mark(slot, by_def[id(call)])
            by_def.setdefault(id(call), slot)


def only_created(unit: SourceFile, name: cst.Name) -> bool:
  """Whether the variable ``name`` is read once, or only as ``name.create(...)``."""
  uses = _unit.accesses(unit, name)
  if uses is None or not uses:
    return False
  if len(uses) == 1:
    return True
  for use in uses:
    attribute = unit.parent(use)
    call = unit.parent(attribute)
    if not (isinstance(attribute, cst.Attribute) and attribute.value is use
            and attribute.attr.value == 'create' and isinstance(call, cst.Call)
            and call.func is attribute):
      return False
  return True


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
