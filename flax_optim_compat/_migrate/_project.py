"""Whole-project analysis: which values are legacy optimizers, across the project's files.

Names are resolved, never matched as text: LibCST's ``FullyQualifiedNameProvider`` (through a
``FullRepoManager``, so imports between the project's own files resolve) says what each name
and attribute refers to. A value is a legacy optimizer when it comes from ``<def>.create(...)``
of a ``flax.optim`` def, or flows from one: through assignments (tuples included), returns,
arguments of the project's own functions (also through ``jax.jit`` / ``jax.pmap`` /
``functools.partial``), fields of the project's own classes (constructor keywords,
``.replace(field=...)``, ``field: optim.Optimizer`` annotations), and the library calls that
hand back what they are given (``jax_utils.replicate``, ``checkpoints.restore_checkpoint``, ...).
Every storage place (a variable, a function's return, a field name) is a *slot*; slots joined
by a flow are one *object*, rewritten entirely or not at all. What the code does with each
optimizer value (its *sites*) is classified in ``_sites``.
"""
import os
from typing import Dict, List, Optional, Sequence, Set, Tuple

import libcst as cst
from libcst import metadata as meta

from . import _unit
from ._unit import SourceFile

# Function wrappers whose result is called with the wrapped function's arguments.
_WRAPPERS = frozenset({'jax.jit', 'jax.pmap', 'flax.jax_utils.pad_shard_unpad'})
_PARTIAL = frozenset({'functools.partial'})
_COMPILERS = frozenset({'jax.jit', 'jax.pmap'})
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


class _UnionFind:

  def __init__(self):
    self.parent: Dict[tuple, tuple] = {}

  def find(self, x):
    self.parent.setdefault(x, x)
    while self.parent[x] != x:
      self.parent[x] = self.parent[self.parent[x]]
      x = self.parent[x]
    return x

  def union(self, a, b) -> bool:
    ra, rb = self.find(a), self.find(b)
    if ra == rb:
      return False
    self.parent[rb] = ra
    return True


def python_files(paths: Sequence[str]) -> List[str]:
  """The ``.py`` files under ``paths`` (files or directories), sorted, absolute."""
  found = []
  for path in paths:
    if os.path.isdir(path):
      for folder, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith('.') and d != '__pycache__')
        found.extend(os.path.join(folder, f) for f in sorted(files) if f.endswith('.py'))
    elif os.path.isfile(path):
      found.append(path)
    else:
      raise FileNotFoundError(2, 'No such file or directory', path)
  return sorted({os.path.abspath(p) for p in found})


def _root_of(files: Sequence[str]) -> str:
  """The folder whose dotted sub-paths are the project's module names.

  The common folder of all files, moved up while it is a package (has ``__init__.py``), so
  ``pkg/train.py`` is module ``pkg.train`` and its relative imports resolve.
  """
  root = os.path.commonpath([os.path.dirname(f) for f in files])
  while os.path.isfile(os.path.join(root, '__init__.py')) and os.path.dirname(root) != root:
    root = os.path.dirname(root)
  return root


class Project:
  """Every file's tree and metadata, and the optimizer objects found in them."""

  def __init__(self, sources: Dict[str, str]):
    """``sources``: absolute path -> text."""
    self.units: List[SourceFile] = []
    self.failed: List[Tuple[str, str]] = []   # (path, why) of files that do not parse
    files = sorted(sources)
    root = _root_of([os.path.abspath(f) for f in files]) if files else '.'
    rel = {f: os.path.abspath(f) for f in files}
    manager = meta.FullRepoManager(root, list(rel.values()), {meta.FullyQualifiedNameProvider})
    for f in files:
      try:
        module = cst.parse_module(sources[f])
      except cst.ParserSyntaxError as e:
        self.failed.append((f, f'does not parse: {e.message} (line {e.raw_line})'))
        continue
      wrapper = meta.MetadataWrapper(module, cache=manager.get_cache_for_path(rel[f]))
      self.units.append(SourceFile(f, sources[f], wrapper))
    self._functions: Dict[str, Tuple[SourceFile, cst.FunctionDef]] = {}
    self._classes: Dict[str, Tuple[SourceFile, cst.ClassDef]] = {}
    for unit in self.units:
      for node in unit.nodes:
        if isinstance(node, cst.FunctionDef):
          for name in unit.names(node.name):
            self._functions[name] = (unit, node)
        elif isinstance(node, cst.ClassDef):
          for name in unit.names(node.name):
            self._classes[name] = (unit, node)
    # Classes related by inheritance share their fields: ``self.optimizer`` set in a base
    # class and read in a subclass is one field.
    self._families = _UnionFind()
    for name, (u, node) in self._classes.items():
      for base in node.bases:
        for base_name in u.names(base.value):
          if base_name in self._classes:
            self._families.union(base_name, name)
    # The project's own subclasses of a flax.optim def: their optimizers are tracked (and
    # refused at every use, not only at the class).
    self.user_defs = {name for name, (u, node) in self._classes.items() if any(
        u.legacy(base.value) not in (None, 'Optimizer') for base in node.bases)}
    # FunctionDef id -> the axis names it is pmapped with (``jax.pmap(f, axis_name='batch')``).
    self.pmap_axes: Dict[int, Set[str]] = {}
    for unit in self.units:
      for node in unit.nodes:
        if isinstance(node, cst.Call) and 'jax.pmap' in unit.names(node.func) and node.args:
          callee = self.resolve_callable(unit, node.args[0].value)
          axis = _unit.call_arg(node, 1, 'axis_name')
          if callee is not None and isinstance(axis, cst.SimpleString):
            self.pmap_axes.setdefault(id(callee[1]), set()).add(axis.evaluated_value)
    self._compiled = self._compiled_functions()
    self.groups = _UnionFind()
    self.optimizer_slots: Set[tuple] = set()
    self.def_slots: Set[tuple] = set()
    self._analyse()

  def _compiled_functions(self) -> Set[int]:
    """The ids of the FunctionDefs that run traced, under ``jax.jit`` / ``jax.pmap``: given to
    one (``jax.jit(step)``, ``@jax.jit``, ``@functools.partial(jax.pmap, ...)``), or called
    from one."""
    compiled: Set[int] = set()
    bodies = []
    for unit in self.units:
      for node in unit.nodes:
        if isinstance(node, cst.Call) and unit.names(node.func) & _COMPILERS and node.args:
          callee = self.resolve_callable(unit, node.args[0].value)
          if callee is not None and isinstance(callee[1], cst.FunctionDef):
            compiled.add(id(callee[1]))
        elif isinstance(node, cst.FunctionDef):
          bodies.append((unit, node))
          for d in node.decorators:
            head = d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator
            partial = isinstance(d.decorator, cst.Call) and unit.names(head) & _PARTIAL and (
                d.decorator.args and unit.names(d.decorator.args[0].value) & _COMPILERS)
            if unit.names(head) & _COMPILERS or partial:
              compiled.add(id(node))
    for _ in range(8):   # what a compiled function calls runs traced too
      grown = False
      for unit, fdef in bodies:
        if id(fdef) not in compiled:
          continue
        for node in _unit.walk(fdef.body):
          if isinstance(node, cst.Call):
            callee = self.resolve_callable(unit, node.func)
            if callee is not None and isinstance(callee[1], cst.FunctionDef) and (
                id(callee[1]) not in compiled):
              compiled.add(id(callee[1]))
              grown = True
      if not grown:
        break
    return compiled

  def is_compiled(self, unit: SourceFile, node: cst.CSTNode) -> bool:
    """Whether ``node`` runs traced: inside a function that runs under jit or pmap."""
    fdef = unit.enclosing(node, (cst.FunctionDef,))
    while fdef is not None:
      if id(fdef) in self._compiled:
        return True
      fdef = unit.enclosing(unit.parent(fdef), (cst.FunctionDef,))
    return False

  # -------------------------------------------------------------------- name resolution

  def var_slot(self, unit: SourceFile, name: cst.CSTNode) -> Optional[tuple]:
    names = unit.names(name)
    if len(names) != 1:
      return None
    return ('var', next(iter(names)))

  def resolve_callable(self, unit: SourceFile, func: cst.CSTNode, shift: int = 0, depth: int = 0):
    """``(unit, FunctionDef | ClassDef, shift)`` that a call of ``func`` runs, else None.

    ``shift``: how many leading positional parameters a ``functools.partial`` already bound.
    """
    if depth > 8:
      return None
    if isinstance(func, cst.Call):
      names = unit.names(func.func)
      if names & _WRAPPERS and func.args:
        return self.resolve_callable(unit, func.args[0].value, shift, depth + 1)
      if names & _PARTIAL and func.args:
        bound = sum(1 for a in func.args[1:] if a.keyword is None)
        return self.resolve_callable(unit, func.args[0].value, shift + bound, depth + 1)
      return None
    for name in unit.names(func):
      if name in self._functions:
        u, node = self._functions[name]
        return u, node, shift
      if name in self._classes:
        u, node = self._classes[name]
        return u, node, shift
    if isinstance(func, cst.Name):
      # A variable bound once to a wrapped function: ``p_step = jax.pmap(step, ...)``.
      value = self._single_value(unit, func)
      if value is not None:
        return self.resolve_callable(unit, value, shift, depth + 1)
    return None

  def _single_value(self, unit: SourceFile, name: cst.Name) -> Optional[cst.BaseExpression]:
    """The value of the one ``name = value`` that binds ``name``, else None."""
    scope = unit.scopes.get(name)
    if scope is None:
      return None
    assignments = list(scope[name.value])
    if len(assignments) != 1 or not isinstance(assignments[0], meta.Assignment):
      return None
    node = assignments[0].node
    target = unit.parent(node)
    assign = unit.parent(target) if isinstance(target, cst.AssignTarget) else None
    if isinstance(assign, cst.Assign) and len(assign.targets) == 1 and assign.targets[0] is target:
      return assign.value
    return None

  def assignment_values(self, unit: SourceFile, name: cst.Name) -> Optional[List[cst.BaseExpression]]:
    """The values of every ``name = value`` binding of ``name``; None if another kind binds it."""
    scope = unit.scopes.get(name)
    if scope is None:
      return None
    values = []
    for a in scope[name.value]:
      if not isinstance(a, meta.Assignment):
        return None
      target = unit.parent(a.node)
      assign = unit.parent(target) if isinstance(target, cst.AssignTarget) else None
      if not (isinstance(assign, cst.Assign) and len(assign.targets) == 1
              and assign.targets[0].target is a.node):
        return None
      values.append(assign.value)
    return values

  # -------------------------------------------------------------------- what is a legacy value

  def def_call(self, unit: SourceFile, node: cst.CSTNode) -> Optional[cst.Call]:
    """The ``optim.X(...)`` call that ``node`` evaluates to (directly or through a variable)."""
    if isinstance(node, cst.Call) and (unit.legacy(node.func) or self.is_user_def(unit, node.func)):
      return node
    if isinstance(node, cst.Name) and self.var_slot(unit, node) in self.def_slots:
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

  def is_user_def(self, unit: SourceFile, func: cst.CSTNode) -> bool:
    """Whether ``func`` names one of the project's own subclasses of a flax.optim def."""
    return bool(unit.names(func) & self.user_defs)

  def is_create(self, unit: SourceFile, node: cst.CSTNode) -> bool:
    return (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
            and node.func.attr.value == 'create'
            and self.def_branches(unit, node.func.value) is not None)

  def slot_of(self, unit: SourceFile, node: cst.CSTNode) -> Optional[tuple]:
    """The slot whose optimizer ``node`` evaluates to, or None if it is not one."""
    if isinstance(node, cst.Call):
      if self.is_create(unit, node):
        return ('create', unit.path, unit.line(node), id(node))
      func = node.func
      # Before the methods: ``jax_utils.replicate(x)`` is a library call, not ``x.replicate()``.
      arg = pass_through_arg(unit, node)
      if arg is not None:
        return self.slot_of(unit, arg)
      if isinstance(func, cst.Attribute) and func.attr.value in (
          'apply_gradient', 'replace', 'replicate', 'unreplicate'):
        return self.slot_of(unit, func.value)
      target = self.resolve_callable(unit, func)
      if target is not None and isinstance(target[1], cst.FunctionDef):
        slot = ('return', target[0].path, target[1].name.value, id(target[1]), None)
        return slot if slot in self.optimizer_slots else None
      return None
    if isinstance(node, cst.Name):
      slot = self.var_slot(unit, node)
      return slot if slot in self.optimizer_slots else None
    if isinstance(node, cst.Attribute):
      if _compared_with_a_string(unit, node):
        return None   # ``config.optim.optimizer == 'Adam'``: a config field, not an optimizer
      slot = self.field_slot(unit, node.value, node.attr.value)
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
            slot = ('return', target[0].path, target[1].name.value, id(target[1]),
                    int(index.value.value))
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
            slot = self.var_slot(unit, target)
            if slot:
              self.def_slots.add(slot)
    # Annotations name optimizer slots directly.
    for unit in self.units:
      for node in unit.nodes:
        if isinstance(node, cst.Annotation) and unit.legacy(
            _unit.annotation_head(node.annotation)) in _unit.OPTIMIZER_CLASSES:
          slot = self.annotated_slot(unit, node)
          if slot:
            self._mark(slot)
    for _ in range(50):
      changed = False
      for unit in self.units:
        for node in unit.nodes:
          changed |= self._flow(unit, node)
      if not changed:
        break
    # Creates that share a def (a helper called in two places) are one object: the def's
    # expression is written once, in one learning-rate mode.
    by_def: Dict[int, tuple] = {}
    for unit in self.units:
      for node in unit.nodes:
        if self.is_create(unit, node):
          slot = ('create', unit.path, unit.line(node), id(node))
          for _, call in self.def_branches(unit, node.func.value):
            if id(call) in by_def:
              self._mark(slot, by_def[id(call)])
            by_def.setdefault(id(call), slot)

  def annotated_slot(self, unit: SourceFile, annotation: cst.Annotation) -> Optional[tuple]:
    owner = unit.parent(annotation)
    if isinstance(owner, cst.Param):
      return self.var_slot(unit, owner.name)
    if isinstance(owner, cst.AnnAssign) and isinstance(owner.target, cst.Name):
      owner_class = unit.enclosing(owner, (cst.ClassDef, cst.FunctionDef))
      if isinstance(owner_class, cst.ClassDef):
        return ('field', self._family(unit, owner_class), owner.target.value)
      return self.var_slot(unit, owner.target)
    if isinstance(owner, cst.FunctionDef):
      return ('return', unit.path, owner.name.value, id(owner), None)
    return None

  def _bind_targets(self, unit: SourceFile, target: cst.BaseExpression, value: cst.BaseExpression,
                    value_slot_of) -> bool:
    changed = False
    if isinstance(target, (cst.Tuple, cst.List)):
      elements = [e.value for e in target.elements]
      value = unwrap(unit, value)   # ``a, b = jax_utils.replicate((a, b))``
      if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(elements):
        for t, v in zip(elements, value.elements):
          changed |= self._bind_targets(unit, t, v.value, value_slot_of)
      elif isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and (
          value.func.attr.value == 'optimize'):
        # ``new, loss[, aux] = opt.optimize(loss_fn)``: the first target is the new optimizer.
        slot = value_slot_of(value.func.value)
        tslot = self.target_slot(unit, elements[0]) if elements else None
        if slot and tslot:
          changed |= self._mark(tslot, slot)
      elif isinstance(value, cst.Call):
        callee = self.resolve_callable(unit, value.func)
        if callee is not None and isinstance(callee[1], cst.FunctionDef):
          for i, t in enumerate(elements):
            rslot = ('return', callee[0].path, callee[1].name.value, id(callee[1]), i)
            tslot = self.target_slot(unit, t)
            if tslot and rslot in self.optimizer_slots:
              changed |= self._mark(tslot, rslot)
            elif tslot and tslot in self.optimizer_slots:
              # assigned an optimizer somewhere else: the function returns one here too
              pass
      return changed
    slot = value_slot_of(value)
    tslot = self.target_slot(unit, target)
    if slot and tslot:
      changed |= self._mark(tslot, slot)
    return changed

  def target_slot(self, unit: SourceFile, target: cst.BaseExpression) -> Optional[tuple]:
    if isinstance(target, cst.Name):
      return self.var_slot(unit, target)
    if isinstance(target, cst.Attribute) and not _unit.is_module_like(unit, target.value):
      return self.field_slot(unit, target.value, target.attr.value)
    return None

  def _flow(self, unit: SourceFile, node: cst.CSTNode) -> bool:
    slot_of = lambda n: self.slot_of(unit, n)
    changed = False
    if isinstance(node, cst.Assign):
      for t in node.targets:
        changed |= self._bind_targets(unit, t.target, node.value, slot_of)
    elif isinstance(node, cst.AnnAssign) and node.value is not None:
      changed |= self._bind_targets(unit, node.target, node.value, slot_of)
    elif isinstance(node, cst.Return) and node.value is not None:
      fdef = unit.enclosing(node, (cst.FunctionDef, cst.Lambda))
      if isinstance(fdef, cst.FunctionDef):
        value = unwrap(unit, node.value)   # ``return restore_checkpoint(d, (opt, ema))``
        values = ([(i, e.value) for i, e in enumerate(value.elements)]
                  if isinstance(value, cst.Tuple) else [(None, node.value)])
        for i, v in values:
          slot = slot_of(v)
          if slot:
            changed |= self._mark(('return', unit.path, fdef.name.value, id(fdef), i), slot)
    elif isinstance(node, cst.Attribute):
      changed |= self._join_field(unit, node)
    elif isinstance(node, cst.Call) and unit.names(node.func) & TREE_MAPS:
      slots = [slot_of(a.value) for a in node.args[1:] if a.keyword is None and not a.star]
      slots = [s for s in slots if s]
      for other in slots[1:]:
        changed |= self._mark(slots[0], other)
    elif isinstance(node, cst.Call):
      callee = self.resolve_callable(unit, node.func)
      bound = self.partial_callee(unit, node)
      if callee is not None:
        changed |= self._flow_call(unit, node, callee)
      elif bound is not None:   # ``partial(loss_fn, opt)``: opt is loss_fn's first parameter
        changed |= self._flow_call(unit, node.with_changes(args=node.args[1:]), bound)
      elif isinstance(node.func, cst.Attribute) and node.func.attr.value == 'replace':
        if slot_of(node.func.value) is None:
          for arg in node.args:
            if arg.keyword is not None:
              slot = slot_of(arg.value)
              if slot:
                changed |= self._mark(
                    self.field_slot(unit, node.func.value, arg.keyword.value), slot)
    return changed

  def _family(self, unit: SourceFile, classdef: cst.ClassDef) -> Optional[str]:
    """The class family (a class and the project's classes it derives from, or that derive
    from it) of ``classdef``, named by one of its classes."""
    names = sorted(unit.names(classdef.name) & set(self._classes))
    return self._families.find(names[0]) if names else None

  def receiver_family(self, unit: SourceFile, node: cst.CSTNode) -> Optional[str]:
    """The class family of ``node`` where it is the ``self`` of a method, else None (a value
    of a class the analysis does not know)."""
    if not isinstance(node, cst.Name):
      return None
    fdef = unit.enclosing(node, (cst.FunctionDef,))
    while fdef is not None:
      params = [*fdef.params.posonly_params, *fdef.params.params]
      if node.value in {p.name.value for p in params + list(fdef.params.kwonly_params)}:
        owner = unit.enclosing(unit.parent(fdef), (cst.ClassDef, cst.FunctionDef))
        static = any(unit.code(d.decorator) in ('staticmethod', 'classmethod')
                     for d in fdef.decorators)
        if isinstance(owner, cst.ClassDef) and params[0].name.value == node.value and not static:
          return self._family(unit, owner)
        return None
      fdef = unit.enclosing(unit.parent(fdef), (cst.FunctionDef,))
    return None

  def field_slot(self, unit: SourceFile, receiver: cst.CSTNode, name: str) -> tuple:
    """The slot of the attribute ``name`` of ``receiver``: the field of its class family where
    the receiver is a method's ``self``, else the field of an unknown class (None)."""
    return ('field', self.receiver_family(unit, receiver), name)

  def _join_field(self, unit: SourceFile, node: cst.Attribute) -> bool:
    """Joins the attribute ``node`` of an unknown class with the same field of the classes
    that hold an optimizer in it, in a file that uses jax or flax (a same-named attribute of
    a TensorFlow agent is not one of theirs); and ``self.<name>`` of a class with the field of
    an unknown class that holds one."""
    if not unit.uses_jax_or_flax or _unit.is_module_like(unit, node.value):
      return False
    slot = self.field_slot(unit, node.value, node.attr.value)
    unknown = ('field', None, node.attr.value)
    changed = False
    if slot == unknown:
      for other in [s for s in self.optimizer_slots
                    if s[0] == 'field' and s[2] == slot[2] and s != unknown]:
        changed |= self._mark(unknown, other)
    elif unknown in self.optimizer_slots:
      changed |= self._mark(slot, unknown)
    return changed

  def partial_callee(self, unit: SourceFile, call: cst.Call):
    """``resolve_callable`` of ``f`` in ``functools.partial(f, ...)``, else None."""
    if unit.names(call.func) & _PARTIAL and call.args and call.args[0].keyword is None:
      callee = self.resolve_callable(unit, call.args[0].value)
      if callee is not None and isinstance(callee[1], cst.FunctionDef):
        return callee
    return None

  def _flow_call(self, unit: SourceFile, call: cst.Call, callee) -> bool:
    cunit, cnode, shift = callee
    changed = False
    if isinstance(cnode, cst.ClassDef):
      for arg in call.args:
        if arg.keyword is not None:
          slot = self.slot_of(unit, arg.value)
          if slot:
            changed |= self._mark(('field', self._family(cunit, cnode), arg.keyword.value),
                                  slot)
      return changed
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
      slot = self.slot_of(unit, arg.value)
      if not slot:
        continue
      param = by_name.get(arg.keyword.value) if arg.keyword else (
          params[i] if i < len(params) else None)
      if param is not None:
        pslot = self.var_slot(cunit, param.name)
        if pslot:
          changed |= self._mark(pslot, slot)
    return changed


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

