"""Whole-project analysis: which values are legacy optimizers, and every place one is used.

Names are resolved, never matched as text: LibCST's ``FullyQualifiedNameProvider`` (through a
``FullRepoManager``, so imports between the project's own files resolve) says what each name
and attribute refers to. A value is a legacy optimizer when it comes from ``<def>.create(...)``
of a ``flax.optim`` def, or flows from one: through assignments (tuples included), returns,
arguments of the project's own functions (also through ``jax.jit`` / ``jax.pmap`` /
``functools.partial``), fields of the project's own classes (constructor keywords,
``.replace(field=...)``, ``field: optim.Optimizer`` annotations), and the library calls that
hand back what they are given (``jax_utils.replicate``, ``checkpoints.restore_checkpoint``, ...).
Every storage place (a variable, a function's return, a field name) is a *slot*; slots joined
by a flow are one *object*, rewritten entirely or not at all.
"""
import dataclasses
import os
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple

import libcst as cst
from libcst import metadata as meta

import flax_optim_compat as _optim
from .. import _adapter
from .. import _layouts
from . import _refusals

LEGACY_PREFIXES = ('flax.optim.', 'flax_optim_compat.')
# The built-in optimizers (flax.optim's own, each with its optax form), as registered.
BUILTIN_DEFS = tuple(name for name in _layouts.optimizer_names()
                     if issubclass(getattr(_optim, name), _adapter.OptaxBackedDef))
OPTIMIZER_CLASSES = ('Optimizer',)

# Function wrappers whose result is called with the wrapped function's arguments.
_WRAPPERS = frozenset({'jax.jit', 'jax.pmap', 'flax.jax_utils.pad_shard_unpad'})
_PARTIAL = frozenset({'functools.partial'})
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
}
# Of these, every positional argument after the function is a tree of the same structure.
_TREE_MAPS = frozenset({'jax.tree_util.tree_map', 'jax.tree.map'})
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


# The names of flax.optim (flax 0.5.3), at the package or in its modules.
LEGACY_NAMES = frozenset(BUILTIN_DEFS + (
    'Optimizer', 'OptimizerDef', 'OptimizerState', 'MultiOptimizer', 'ModelParamTraversal',
    'WeightNorm', 'DynamicScale', 'ReplicatedOptimizer'))


def legacy_name(names: Iterable[str]) -> Optional[str]:
  """``'Adam'`` for ``flax.optim.Adam`` / ``flax.optim.adam.Adam`` / ``flax_optim_compat.Adam``.

  Only flax.optim's own names: the package's private modules (``flax_optim_compat._restore``)
  and its additions (``from_optax``) are not legacy uses.
  """
  for name in names:
    if name.startswith(LEGACY_PREFIXES):
      parts = name.split('.')
      prefix = 2 if parts[0] == 'flax' else 1
      last = parts[-1]
      modules = parts[prefix:-1]
      if last in LEGACY_NAMES and len(modules) <= 1 and not any(
          m.startswith('_') for m in modules):
        return last
  return None


class Unit:
  """One parsed file with the metadata the analysis reads."""

  def __init__(self, path: str, source: str, wrapper: meta.MetadataWrapper):
    self.path = path
    self.source = source
    self.wrapper = wrapper
    self.module = wrapper.module
    self.fqnames = wrapper.resolve(meta.FullyQualifiedNameProvider)
    self.scopes = wrapper.resolve(meta.ScopeProvider)
    self.parents = wrapper.resolve(meta.ParentNodeProvider)
    self.positions = wrapper.resolve(meta.PositionProvider)
    self.module_name = next(iter(self.fqnames.get(self.module, ())), None)
    self.module_name = self.module_name.name if self.module_name else ''
    self.nodes = walk(self.module)   # one walk, reused by every pass of the analysis

  def names(self, node: cst.CSTNode) -> Set[str]:
    return {q.name for q in self.fqnames.get(node, ())}

  def legacy(self, node: cst.CSTNode) -> Optional[str]:
    return legacy_name(self.names(node))

  def line(self, node: cst.CSTNode) -> int:
    return self.positions[node].start.line

  def parent(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
    return self.parents.get(node)

  def code(self, node: cst.CSTNode) -> str:
    return self.module.code_for_node(node)

  def enclosing(self, node, types):
    while node is not None and not isinstance(node, types):
      node = self.parents.get(node)
    return node


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
    self.units: List[Unit] = []
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
      self.units.append(Unit(f, sources[f], wrapper))
    self._functions: Dict[str, Tuple[Unit, cst.FunctionDef]] = {}
    self._classes: Dict[str, Tuple[Unit, cst.ClassDef]] = {}
    for unit in self.units:
      for node in unit.nodes:
        if isinstance(node, cst.FunctionDef):
          for name in unit.names(node.name):
            self._functions[name] = (unit, node)
        elif isinstance(node, cst.ClassDef):
          for name in unit.names(node.name):
            self._classes[name] = (unit, node)
    # FunctionDef id -> the axis names it is pmapped with (``jax.pmap(f, axis_name='batch')``).
    self.pmap_axes: Dict[int, Set[str]] = {}
    for unit in self.units:
      for node in unit.nodes:
        if isinstance(node, cst.Call) and 'jax.pmap' in unit.names(node.func) and node.args:
          callee = self.resolve_callable(unit, node.args[0].value)
          axis = call_arg(node, 1, 'axis_name')
          if callee is not None and isinstance(axis, cst.SimpleString):
            self.pmap_axes.setdefault(id(callee[1]), set()).add(axis.evaluated_value)
    self.groups = _UnionFind()
    self.optimizer_slots: Set[tuple] = set()
    self.def_slots: Set[tuple] = set()
    self._analyse()

  # -------------------------------------------------------------------- name resolution

  def var_slot(self, unit: Unit, name: cst.CSTNode) -> Optional[tuple]:
    names = unit.names(name)
    if len(names) != 1:
      return None
    return ('var', next(iter(names)))

  def resolve_callable(self, unit: Unit, func: cst.CSTNode, shift: int = 0, depth: int = 0):
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

  def _single_value(self, unit: Unit, name: cst.Name) -> Optional[cst.BaseExpression]:
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

  def assignment_values(self, unit: Unit, name: cst.Name) -> Optional[List[cst.BaseExpression]]:
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

  def def_call(self, unit: Unit, node: cst.CSTNode) -> Optional[cst.Call]:
    """The ``optim.X(...)`` call that ``node`` evaluates to (directly or through a variable)."""
    if isinstance(node, cst.Call) and unit.legacy(node.func):
      return node
    if isinstance(node, cst.Name) and self.var_slot(unit, node) in self.def_slots:
      values = self.assignment_values(unit, node)
      if values and len(values) == 1:
        return self.def_call(unit, values[0])
    return None

  def is_create(self, unit: Unit, node: cst.CSTNode) -> bool:
    return (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
            and node.func.attr.value == 'create'
            and self.def_call(unit, node.func.value) is not None)

  def slot_of(self, unit: Unit, node: cst.CSTNode) -> Optional[tuple]:
    """The slot whose optimizer ``node`` evaluates to, or None if it is not one."""
    if isinstance(node, cst.Call):
      if self.is_create(unit, node):
        return ('create', unit.path, unit.line(node), id(node))
      func = node.func
      # Before the methods: ``jax_utils.replicate(x)`` is a library call, not ``x.replicate()``.
      arg = _pass_through_arg(unit, node)
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
      slot = ('field', node.attr.value)
      if slot in self.optimizer_slots and not _is_module_like(unit, node.value):
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
          if isinstance(target, cst.Name) and isinstance(node.value, cst.Call) and unit.legacy(
              node.value.func) and unit.legacy(node.value.func) != 'Optimizer':
            slot = self.var_slot(unit, target)
            if slot:
              self.def_slots.add(slot)
    # Annotations name optimizer slots directly.
    for unit in self.units:
      for node in unit.nodes:
        if isinstance(node, cst.Annotation) and unit.legacy(
            annotation_head(node.annotation)) in OPTIMIZER_CLASSES:
          slot = self._annotated_slot(unit, node)
          if slot:
            self._mark(slot)
    for _ in range(50):
      changed = False
      for unit in self.units:
        for node in unit.nodes:
          changed |= self._flow(unit, node)
      if not changed:
        break

  def _annotated_slot(self, unit: Unit, annotation: cst.Annotation) -> Optional[tuple]:
    owner = unit.parent(annotation)
    if isinstance(owner, cst.Param):
      return self.var_slot(unit, owner.name)
    if isinstance(owner, cst.AnnAssign) and isinstance(owner.target, cst.Name):
      if isinstance(unit.enclosing(owner, (cst.ClassDef, cst.FunctionDef)), cst.ClassDef):
        return ('field', owner.target.value)
      return self.var_slot(unit, owner.target)
    if isinstance(owner, cst.FunctionDef):
      return ('return', unit.path, owner.name.value, id(owner), None)
    return None

  def _bind_targets(self, unit: Unit, target: cst.BaseExpression, value: cst.BaseExpression,
                    value_slot_of) -> bool:
    changed = False
    if isinstance(target, (cst.Tuple, cst.List)):
      elements = [e.value for e in target.elements]
      if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(elements):
        for t, v in zip(elements, value.elements):
          changed |= self._bind_targets(unit, t, v.value, value_slot_of)
      elif isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and (
          value.func.attr.value == 'optimize'):
        # ``new, loss[, aux] = opt.optimize(loss_fn)``: the first target is the new optimizer.
        slot = value_slot_of(value.func.value)
        tslot = self._target_slot(unit, elements[0]) if elements else None
        if slot and tslot:
          changed |= self._mark(tslot, slot)
      elif isinstance(value, cst.Call):
        callee = self.resolve_callable(unit, value.func)
        if callee is not None and isinstance(callee[1], cst.FunctionDef):
          for i, t in enumerate(elements):
            rslot = ('return', callee[0].path, callee[1].name.value, id(callee[1]), i)
            tslot = self._target_slot(unit, t)
            if tslot and rslot in self.optimizer_slots:
              changed |= self._mark(tslot, rslot)
            elif tslot and tslot in self.optimizer_slots:
              # assigned an optimizer somewhere else: the function returns one here too
              pass
      return changed
    slot = value_slot_of(value)
    tslot = self._target_slot(unit, target)
    if slot and tslot:
      changed |= self._mark(tslot, slot)
    return changed

  def _target_slot(self, unit: Unit, target: cst.BaseExpression) -> Optional[tuple]:
    if isinstance(target, cst.Name):
      return self.var_slot(unit, target)
    if isinstance(target, cst.Attribute) and not _is_module_like(unit, target.value):
      return ('field', target.attr.value)
    return None

  def _flow(self, unit: Unit, node: cst.CSTNode) -> bool:
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
        values = ([(i, e.value) for i, e in enumerate(node.value.elements)]
                  if isinstance(node.value, cst.Tuple) else [(None, node.value)])
        for i, v in values:
          slot = slot_of(v)
          if slot:
            changed |= self._mark(('return', unit.path, fdef.name.value, id(fdef), i), slot)
    elif isinstance(node, cst.Call) and unit.names(node.func) & _TREE_MAPS:
      slots = [slot_of(a.value) for a in node.args[1:] if a.keyword is None and not a.star]
      slots = [s for s in slots if s]
      for other in slots[1:]:
        changed |= self._mark(slots[0], other)
    elif isinstance(node, cst.Call):
      callee = self.resolve_callable(unit, node.func)
      if callee is not None:
        changed |= self._flow_call(unit, node, callee)
      elif isinstance(node.func, cst.Attribute) and node.func.attr.value == 'replace':
        if slot_of(node.func.value) is None:
          for arg in node.args:
            if arg.keyword is not None:
              slot = slot_of(arg.value)
              if slot:
                changed |= self._mark(('field', arg.keyword.value), slot)
    return changed

  def _flow_call(self, unit: Unit, call: cst.Call, callee) -> bool:
    cunit, cnode, shift = callee
    changed = False
    if isinstance(cnode, cst.ClassDef):
      for arg in call.args:
        if arg.keyword is not None:
          slot = self.slot_of(unit, arg.value)
          if slot:
            changed |= self._mark(('field', arg.keyword.value), slot)
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

  # -------------------------------------------------------------------- sites

  def sites(self) -> List[Site]:
    """Every use of an optimizer value and every legacy name, classified."""
    found: List[Site] = []
    for unit in self.units:
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
          head = annotation_head(node.annotation)
          if unit.legacy(head) in OPTIMIZER_CLASSES:
            found.append(Site(unit, node, 'annotation', self._annotated_slot(unit, node)))
          continue
        if not isinstance(node, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)):
          continue
        slot = self.slot_of(unit, node)
        if slot is None:
          continue
        for site in self._classify(unit, node, slot):
          found.append(site)
          if site.kind in ('step',):
            seen.add(id(site.node))
    return found

  def _classify(self, unit: Unit, node: cst.CSTNode, slot: tuple) -> List[Site]:
    """The sites of the optimizer value ``node``: its creation, and its use by its parent.

    A ``create(...)`` call is both: ``optim.Adam(0.1).create(p).replicate()`` creates the
    optimizer and calls a method on it, and each of the two is rewritten by its own rule.
    """
    parent = unit.parent(node)
    if isinstance(node, cst.Call) and self.is_create(unit, node):
      if not self._flows_ok(unit, node, parent):
        return [Site(unit, node, 'escape', slot, _refusals.ESCAPE,
                     f'{unit.code(node)} is used where the analysis cannot follow it')]
      create = Site(unit, node, 'create', slot)
      if isinstance(parent, cst.Attribute) and parent.value is node:
        return [create, self._member(unit, node, slot)]
      return [create]
    if isinstance(parent, cst.Attribute) and parent.value is node:
      return [self._member(unit, node, slot)]
    if isinstance(node, (cst.Call, cst.Name, cst.Attribute, cst.Subscript)):
      if isinstance(parent, cst.Attribute) and parent.attr is node:
        return []
      if self._flows_ok(unit, node, parent):
        return []
      return [Site(unit, node, 'escape', slot, _refusals.ESCAPE,
                   f'{unit.code(node)} is used where the analysis cannot follow it')]
    return []

  def _member(self, unit: Unit, node: cst.CSTNode, group: tuple) -> Site:
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
      if not self._flows_ok(unit, grand, unit.parent(grand)):
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

  def _flows_ok(self, unit: Unit, node: cst.CSTNode, parent: cst.CSTNode) -> bool:
    """Whether the optimizer value ``node`` goes somewhere the analysis follows."""
    if isinstance(parent, (cst.AssignTarget, cst.Param)):
      return True
    if isinstance(parent, cst.Assign) and parent.value is node:
      return all(self._target_ok(unit, t.target) for t in parent.targets)
    if isinstance(parent, cst.AnnAssign):
      return True
    if isinstance(parent, cst.Return):
      return True
    if isinstance(parent, (cst.Element,)):
      container = unit.parent(parent)
      outer = unit.parent(container)
      if isinstance(container, cst.Tuple) and isinstance(outer, cst.Return):
        return True
      if isinstance(container, cst.Tuple) and isinstance(outer, cst.Assign):
        return True
      return isinstance(container, cst.Tuple) and isinstance(outer, cst.AssignTarget)
    if isinstance(parent, cst.Attribute):
      return True   # its own attribute uses are classified on their own
    if isinstance(parent, cst.Arg):
      call = unit.parent(parent)
      if not isinstance(call, cst.Call):
        return False
      names = unit.names(call.func)
      if _pass_through_arg(unit, call) is node or _sink_arg(unit, call) is node:
        return True
      if names & _TREE_MAPS and parent.keyword is None and call.args[0] is not parent:
        return True
      if names & {'print', 'builtins.print'}:
        return True
      callee = self.resolve_callable(unit, call.func)
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

  def _target_ok(self, unit: Unit, target) -> bool:
    if isinstance(target, (cst.Tuple, cst.List)):
      return all(self._target_ok(unit, e.value) for e in target.elements)
    return self._target_slot(unit, target) is not None


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
  if not plain_reference(receiver):
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
  if not isinstance(elements[0].value, (cst.Name, cst.Attribute)) or _is_module_like(
      unit, elements[0].value):
    return f'{code}: the new optimizer goes to {unit.code(elements[0].value)}'
  assigned = set().union(*(mentioned_names(unit, e.value) for e in elements[1:]))
  read = mentioned_names(unit, receiver).union(
      *(mentioned_names(unit, a.value) for a in args[1:]))
  if assigned & read:
    return (f'{code}: the optimizer or an override reads {", ".join(sorted(assigned & read))}, '
            'which the gradient statement would assign first')
  return None


def plain_reference(node) -> bool:
  """Whether ``node`` is a name or a chain of attributes of one (``state.optimizer``)."""
  if isinstance(node, cst.Name):
    return True
  return isinstance(node, cst.Attribute) and plain_reference(node.value)


def mentioned_names(unit: Unit, node: cst.CSTNode) -> Set[str]:
  """The variable names ``node`` mentions (not attribute or keyword names)."""
  names = set()
  for n in walk(node):
    parent = unit.parent(n)
    if isinstance(n, cst.Name) and not (
        isinstance(parent, cst.Attribute) and parent.attr is n) and not (
            isinstance(parent, cst.Arg) and parent.keyword is n):
      names.add(n.value)
  return names


def _pass_through_arg(unit: Unit, call: cst.Call) -> Optional[cst.BaseExpression]:
  for name in unit.names(call.func):
    if name in _PASS_THROUGH:
      return call_arg(call, *_PASS_THROUGH[name])
  return None


def _sink_arg(unit: Unit, call: cst.Call) -> Optional[cst.BaseExpression]:
  for name in unit.names(call.func):
    if name in _SINKS:
      return call_arg(call, *_SINKS[name])
  return None


def call_arg(call: cst.Call, position: int, keyword: str) -> Optional[cst.BaseExpression]:
  positional = [a for a in call.args if a.keyword is None and not a.star]
  for a in call.args:
    if a.keyword is not None and a.keyword.value == keyword:
      return a.value
  return positional[position].value if position < len(positional) else None


def _is_module_like(unit: Unit, node: cst.CSTNode) -> bool:
  """Whether ``node`` names an imported module (``jax``, ``optim``), not a value."""
  scope = unit.scopes.get(node)
  if isinstance(node, cst.Name) and scope is not None:
    return any(isinstance(a, meta.ImportAssignment) for a in scope[node.value])
  if isinstance(node, cst.Attribute):
    return _is_module_like(unit, node.value)
  return False


def annotation_head(node: cst.BaseExpression) -> cst.BaseExpression:
  """``optim.Optimizer`` of ``Optional[optim.Optimizer]`` and of ``'optim.Optimizer'``."""
  if isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(
      node.slice[0].slice, cst.Index):
    return annotation_head(node.slice[0].slice.value)
  return node


class _Collect(cst.CSTVisitor):

  def __init__(self):
    super().__init__()
    self.nodes: List[cst.CSTNode] = []

  def on_visit(self, node):
    self.nodes.append(node)
    return True


def walk(node: cst.CSTNode) -> List[cst.CSTNode]:
  """Every node under ``node`` (itself included), parents before children."""
  collect = _Collect()
  node.visit(collect)
  return collect.nodes
