"""The project's files parsed, and what their names and calls refer to, across files.

Names are resolved, never matched as text: LibCST's ``FullyQualifiedNameProvider`` (through a
``FullRepoManager``, so imports between the project's own files resolve) says what each name
and attribute refers to. A ``Program`` knows the project's own functions and classes, which
classes share their fields (a class and its bases), which functions run traced (under
``jax.jit`` / ``jax.pmap``) and with which pmap axis names, and which function a call runs
(through ``jax.jit`` / ``jax.pmap`` / ``functools.partial`` and variables bound to one). Where
optimizer values go is the next modules' question (``_calls``, ``_flows``, ``_project``).
"""
import os
import re
from typing import Dict, List, Optional, Set, Tuple

import libcst as cst
from libcst import metadata as meta

from . import _family
from ._family import UnionFind
from . import _import_paths
from . import _unit
from . import _unparsed
from ._unit import SourceFile
from ._unparsed import Unparsed, imported_words, names_legacy

# Wrappers whose result is called with the wrapped function's arguments but hands back
# something other than what the function returns: ``jax.make_jaxpr(f)(x)`` is f's jaxpr.
TRACERS = frozenset({'jax.make_jaxpr'})
# Function wrappers whose result is called with the wrapped function's arguments.
_WRAPPERS = frozenset({'jax.jit', 'jax.pmap', 'jax.vmap',
                       'flax.jax_utils.pad_shard_unpad'}) | TRACERS
PARTIAL = frozenset({'functools.partial'})
COMPILERS = frozenset({'jax.jit', 'jax.pmap'})
# Wrappers whose result runs the wrapped function as it is run: compiled where the result is
# compiled (``jax.jit(jax.vmap(step))``, ``jax.pmap(functools.partial(step, model))``).
REBINDERS = frozenset({'jax.vmap'}) | PARTIAL


def compiling(unit, decorator: cst.BaseExpression) -> bool:
  """Whether ``decorator`` compiles the function it decorates: ``@jax.jit``, ``@jax.pmap(...)``,
  ``@functools.partial(jax.jit, static_argnums=...)``."""
  head = decorator.func if isinstance(decorator, cst.Call) else decorator
  partial = isinstance(decorator, cst.Call) and unit.names(head) & PARTIAL and bool(
      decorator.args and unit.names(decorator.args[0].value) & COMPILERS)
  return bool(unit.names(head) & COMPILERS or partial)


# The files the last ``Program`` parsed, by (path, project root, text). A project migrated and
# then checked again (the result run once more, as ``--check`` after ``--write`` or the corpus
# tool's second run) parses again only the files that changed. A parsed file is never changed
# after it is built (the trees are immutable; plans key their own tables by its nodes), so one
# file may serve both runs; holding only the last project's files bounds the memory.
_PARSED: Dict[tuple, SourceFile] = {}


class Program:
  """Every file's tree and metadata; the project's functions, classes and compiled code."""

  def __init__(self, sources: Dict[str, str]):
    """``sources``: absolute path -> text."""
    self.units: List[SourceFile] = []
    self.unparsed: List[Unparsed] = []
    files = sorted(sources)
    root = _import_paths.root_of([os.path.abspath(f) for f in files],
                                 [sources[f] for f in files]) if files else '.'
    rel = {f: os.path.abspath(f) for f in files}
    aliases, own_folder = _import_paths.aliases(
        root, list(rel.values()), [sources[f] for f in files]) if files else ({}, {})
    manager = meta.FullRepoManager(root, list(rel.values()), {meta.FullyQualifiedNameProvider})
    local = _unparsed.local_modules(files)
    parsed = {}
    for f in files:
      # a bare name its own folder defines is that folder's module, before the project's rule
      file_aliases = dict(own_folder.get(rel[f], {}))
      file_aliases.update((k, v) for k, v in aliases.items() if k not in file_aliases)
      # what a file's tree and metadata are computed from
      key = (f, root, tuple(sorted(file_aliases.items())), sources[f])
      unit = _PARSED.get(key)
      if unit is None:
        try:
          module = cst.parse_module(sources[f])
        except cst.ParserSyntaxError as e:
          self.unparsed.append(Unparsed(f, *_unparsed.parse_error(sources[f], e),
                                        names_legacy(sources[f], local), sources[f]))
          continue
        # LibCST parses what Python refuses (``from __future__ import google_type_annotations``,
        # jax-recommenders' metrics.py): no program imports such a file, so it is one that does
        # not parse, decided before any plan (its rewrite would be left out after the plan had
        # rewritten, in other files, the uses of what it holds).
        refused = _unparsed.compile_error(sources[f], f)
        if refused is not None:
          self.unparsed.append(Unparsed(f, *refused, names_legacy(sources[f], local),
                                        sources[f], parsed=True))
          continue
        # Straight from the parser, so no node appears twice: no deep copy needed.
        wrapper = meta.MetadataWrapper(module, unsafe_skip_copy=True,
                                       cache=manager.get_cache_for_path(rel[f]))
        unit = SourceFile(f, sources[f], wrapper)
        if file_aliases:
          _import_paths.aliased(unit, file_aliases)
        unit.star_sources = _import_paths.star_sources(unit, file_aliases)
      parsed[key] = unit
      self.units.append(unit)
    _PARSED.clear()
    _PARSED.update(parsed)
    self._attributes: Optional[Dict[str, List[Tuple[SourceFile, cst.Attribute]]]] = None
    self._references: Optional[Dict[str, list]] = None
    self._field_values: Dict[str, Dict[Optional[str], list]] = {}
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
    reexported = _import_paths.reexports(self.units, self._classes, self._functions)
    for unit in self.units:   # ``from .training import *``: what ``Trainer`` is (``_unit.names``)
      unit.star_names = _import_paths.star_names(unit.star_sources, (self._classes, self._functions))
    self.star_read = _import_paths.bind_star_imports(self.units)   # module -> names read so
    # Classes related by inheritance share their fields: ``self.optimizer`` set in a base
    # class and read in a subclass is one field.
    self._families = UnionFind()
    for name, target in reexported.items():
      if target in self._classes:
        self._families.union(target, name)
    for name, (u, node) in self._classes.items():
      for base in node.bases:
        for base_name in u.names(base.value):
          if base_name in self._classes:
            self._families.union(base_name, name)
    # The project's own subclasses of a flax.optim def, also through another of them
    # (AdaHessianJax's ``Adahessian(SecondOrderOptimizerDef)``): their optimizers are tracked
    # (and refused at every use, not only at the class).
    self.user_defs: Set[str] = set()
    more = True
    while more:
      more = {name for name, (u, node) in self._classes.items() if name not in self.user_defs
              and any(u.legacy(base.value) not in (None, 'Optimizer')
                      or u.names(base.value) & self.user_defs for base in node.bases)}
      self.user_defs |= more
    # FunctionDef id -> the axis names it is pmapped with (``jax.pmap(f, axis_name='batch')``,
    # or decorated ``@functools.partial(jax.pmap, axis_name='batch')``: flaxseed's step).
    self.pmap_axes: Dict[int, Set[str]] = {}
    for unit in self.units:
      for node in unit.nodes:
        if isinstance(node, cst.Call) and 'jax.pmap' in unit.names(node.func) and node.args:
          callee = self.resolve_callable(unit, node.args[0].value)
          axis = _unit.call_arg(node, 1, 'axis_name')
          if callee is not None and isinstance(axis, cst.SimpleString):
            self.pmap_axes.setdefault(id(callee[1]), set()).add(axis.evaluated_value)
        for d in node.decorators if isinstance(node, cst.FunctionDef) else ():
          d = d.decorator
          if isinstance(d, cst.Call) and unit.names(d.func) & PARTIAL and d.args and (
              'jax.pmap' in unit.names(d.args[0].value)):
            axis = next((a.value for a in d.args if a.keyword and a.keyword.value == 'axis_name'),
                        None)
            if isinstance(axis, cst.SimpleString):
              self.pmap_axes.setdefault(id(node), set()).add(axis.evaluated_value)
    self._compiled = self._compiled_functions()
    self._pre_linen: Optional[Dict[str, str]] = None   # path -> why (``pre_linen``)
    self.leafwise: Dict[int, Optional[int]] = {}   # FunctionDef id -> param (``_calls``)
    self.returned_params: Dict[int, Optional[tuple]] = {}   # FunctionDef id -> (``_calls``)

  def _compiled_functions(self) -> Set[int]:
    """The ids of the FunctionDefs that run traced: given to ``jax.jit`` / ``jax.pmap``
    (``jax.jit(step)``, ``@jax.jit``, ``@partial(jax.pmap, ...)``) or called from one such."""
    compiled: Set[int] = set()
    bodies = []
    for unit in self.units:
      for node in unit.nodes:
        if isinstance(node, cst.Call) and unit.names(node.func) & COMPILERS and node.args:
          callee = self.resolve_callable(unit, node.args[0].value)
          if callee is not None and isinstance(callee[1], cst.FunctionDef):
            compiled.add(id(callee[1]))
        elif isinstance(node, cst.FunctionDef):
          bodies.append((unit, node))
          if any(compiling(unit, d.decorator) for d in node.decorators):
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
    return self._without_eager(compiled, bodies)

  def _without_eager(self, compiled: Set[int], bodies) -> Set[int]:
    """``compiled`` less the functions that also run eagerly: referred to (called, bound to a
    field, passed) somewhere that is neither inside a compiler call's first argument nor in the
    body of a function that runs compiled (TD3's ``self.actor_step = self._actor_step`` where
    ``jit`` is off, beside ``jax.jit(self._actor_step)``). A decorated function has no such
    reference: every call of it runs compiled."""
    named = {}
    for unit, fdef in bodies:
      if id(fdef) in compiled and not fdef.decorators:
        named.setdefault(fdef.name.value, []).append(fdef)
    if not named:
      return compiled
    undecorated = {id(fdef) for fdefs in named.values() for fdef in fdefs}
    refs = [(unit, node) for unit in self.units for node in unit.nodes
            if (isinstance(node, cst.Name) and node.value in named
                and not isinstance(unit.parent(node), (cst.FunctionDef, cst.Attribute)))
            or (isinstance(node, cst.Attribute) and node.attr.value in named)]
    for _ in range(8):
      shrunk = False
      for unit, node in refs:
        target = self.resolve_callable(unit, node)
        key = None if target is None else id(target[1])
        if key not in undecorated or key not in compiled or self._compiled_at(
            unit, node, compiled) or self._compiler_bound(unit, node):
          continue
        compiled.discard(key)
        shrunk = True
      if not shrunk:
        break
    return compiled

  def _compiler_bound(self, unit: SourceFile, node: cst.CSTNode) -> bool:
    """Whether the name ``node`` is the target of ``f = jax.jit(f)`` (the decorator written as
    a rebinding), or a read that sees such a binding (the one assignment of the name, or in
    top-level code the last top-level binding before the read): the function runs compiled
    there, as a decorated one does."""
    if not isinstance(node, cst.Name):
      return False
    parent = unit.parent(node)
    if isinstance(parent, cst.AssignTarget):
      value = unit.parent(parent).value
    else:
      value = self.reaching_binding(unit, node)
      value = _unit.assigned_value(unit, node) if value is None else value
    return isinstance(value, cst.Call) and bool(unit.names(value.func) & COMPILERS)

  def _compiled_at(self, unit: SourceFile, node: cst.CSTNode, compiled: Set[int],
                   depth: int = 0) -> bool:
    """Whether the reference ``node`` runs compiled: inside a compiler call's first argument
    (``jax.jit(self._step)``, ``jax.pmap(functools.partial(step, ...))``), in the body of a
    function of ``compiled``, or the value (or in a ``REBINDERS`` call of it, as the value)
    of ``v = value`` / ``self.v = value`` whose every read runs compiled (``fn =
    functools.partial(step, ...)`` then ``jax.pmap(fn)``; ``v = jax.vmap(step)`` then
    ``jax.jit(v)``). A binding target is no run: its value is the reference that runs."""
    if depth > 8:
      return False
    child, parent = node, unit.parent(node)
    if isinstance(parent, cst.AssignTarget):
      return True
    rebound = True   # ``node``, or only REBINDERS calls of it, so far
    while parent is not None:
      if isinstance(parent, cst.Call) and parent.args and parent.args[0] is child:
        if unit.names(parent.func) & COMPILERS:
          return True
        rebound = rebound and bool(unit.names(parent.func) & REBINDERS)
      elif isinstance(parent, cst.Assign) and child is parent.value:
        target = _unit.sole_target(parent)
        if rebound and target is not None:
          return self._reads_compiled(unit, target, compiled, depth + 1)
        rebound = False
      elif not isinstance(parent, cst.Arg):
        rebound = False
      if isinstance(parent, cst.FunctionDef) and child is not parent.name:
        return id(parent) in compiled
      child, parent = parent, unit.parent(parent)
    return False

  def _reads_compiled(self, unit: SourceFile, target: cst.CSTNode, compiled: Set[int],
                      depth: int) -> bool:
    """Whether every read of the variable or field ``target`` (``fn`` of ``fn = ...``,
    ``self.fn`` of a method's ``self.fn = ...``) runs compiled, and there is one: a module's
    variable that another file names, or a field read on a receiver whose class is unknown,
    may run anywhere (False)."""
    if isinstance(target, cst.Name):
      reads = _unit.accesses(unit, target)
      if not reads or (isinstance(unit.scopes.get(target), meta.GlobalScope) and any(
          unit.names(target) & u.names(n) for u in self.units if u is not unit
          for n in u.nodes if (isinstance(n, cst.Name) and n.value == target.value) or (
              isinstance(n, cst.Attribute) and n.attr.value == target.value))):
        return False
      return all(self._compiled_at(unit, r, compiled, depth) for r in reads)
    family = isinstance(target, cst.Attribute) and self.receiver_family(unit, target.value)
    if not family:
      return False
    name = target.attr.value
    reads = [(u, n) for u in self.units for n in u.nodes
             if isinstance(n, cst.Attribute) and n.attr.value == name
             and not isinstance(u.parent(n), cst.AssignTarget)]
    return bool(reads) and all(
        self.receiver_family(u, n.value) == family and self._compiled_at(u, n, compiled, depth)
        for u, n in reads)

  def is_compiled(self, unit: SourceFile, node: cst.CSTNode) -> bool:
    """Whether ``node`` runs traced: inside a function that runs under jit or pmap."""
    fdef = unit.enclosing(node, (cst.FunctionDef,))
    while fdef is not None:
      if id(fdef) in self._compiled:
        return True
      fdef = unit.enclosing(unit.parent(fdef), (cst.FunctionDef,))
    return False

  def is_user_def(self, unit: SourceFile, func: cst.CSTNode) -> bool:
    """Whether ``func`` names one of the project's own subclasses of a flax.optim def."""
    return bool(unit.names(func) & self.user_defs)

  # -------------------------------------------------------------------- calls

  def resolve_callable(self, unit: SourceFile, func: cst.CSTNode, shift: int = 0, depth: int = 0):
    """``(unit, FunctionDef | ClassDef, shift)`` that a call of ``func`` runs, else None;
    ``shift``: how many leading positional parameters a ``functools.partial`` already bound."""
    if depth > 8:
      return None
    if isinstance(func, cst.Call):
      names = unit.names(func.func)
      if names == {'builtins.type'} and len(func.args) == 1:   # type(self)(...) in a method
        owner = self._class_of_cls(unit, func.args[0].value, classmethod=False)
        return (unit, owner, shift) if owner is not None else None
      if names & _WRAPPERS and func.args:
        return self.resolve_callable(unit, func.args[0].value, shift, depth + 1)
      if names & PARTIAL and func.args:
        bound = sum(1 for a in func.args[1:] if a.keyword is None)
        return self.resolve_callable(unit, func.args[0].value, shift + bound, depth + 1)
      return None
    if isinstance(func, cst.Name):
      reaching = self.reaching_binding(unit, func) or self._class_of_cls(unit, func)
      if isinstance(reaching, (cst.FunctionDef, cst.ClassDef)):
        return unit, reaching, shift
      if reaching is not None:
        return self.resolve_callable(unit, reaching, shift, depth + 1)
    for name in unit.names(func):
      if name in self._functions:
        u, node = self._functions[name]
        return u, node, shift
      if name in self._classes:
        u, node = self._classes[name]
        return u, node, shift
    if isinstance(func, cst.Name):
      value = _unit.value_of(unit, func)   # ``p_step = jax.pmap(step, ...)``
      if value is not None:
        return self.resolve_callable(unit, value, shift, depth + 1)
    if isinstance(func, cst.Attribute):
      method = self._own_method(unit, func, depth)
      if method is not None:
        return method[0], method[1], method[2] + shift
    return None

  @staticmethod
  def _class_of_cls(unit: SourceFile, name: cst.CSTNode,
                    classmethod: bool = True) -> Optional[cst.ClassDef]:
    """The class whose method reads ``name`` as its first parameter: ``cls`` of a
    ``@classmethod`` (aqt's ``TrainingState.initialize`` returns ``cls(optimizer=optimizer)``),
    or, ``classmethod=False``, ``self`` of a plain method (``type(self)(optimizer=...)`` in its
    ``restore_checkpoint``); else None. A subclass's instance is of the same class family,
    which is what fields follow."""
    param = _unit.parameter(unit, name)
    fdef = unit.enclosing(param, (cst.FunctionDef,)) if param is not None else None
    if fdef is None or not fdef.params.params or fdef.params.params[0] is not param:
      return None
    kinds = {unit.code(d.decorator) for d in fdef.decorators} & {'classmethod', 'staticmethod'}
    if kinds != ({'classmethod'} if classmethod else set()):
      return None
    owner = unit.enclosing(unit.parent(fdef), (cst.ClassDef, cst.FunctionDef))
    return owner if isinstance(owner, cst.ClassDef) else None

  def _own_method(self, unit: SourceFile, func: cst.Attribute, depth: int = 0):
    """``(unit, FunctionDef)`` of ``receiver.name``, the receiver a method's ``self`` or a
    variable whose every binding is an instance of the project's class (``m = Model(config)``;
    StatefulOdeNets binds its ``trainer`` again in a loop): the one method ``name`` of that
    class's family, or of several the one no override can displace (``_family.nearest``), a
    plain method (not a property, static or class method, whose call binds otherwise). The
    receiver is followed as an object, never matched by name."""
    cls, found = self.family_methods(unit, func)
    if cls is None:
      return None
    name = func.attr.value
    if not found:
      return self._bound_field(self.field_key(cls, name), name, depth)
    u, node = next(iter(found.values())) if len(found) == 1 else (
        _family.nearest(self._classes, cls, found)
        or _family.only_concrete(self._classes, cls, found) or (None, None))
    if node is None:
      return None
    if any(u.code(d.decorator).split('.')[-1] in ('property', 'staticmethod', 'classmethod',
                                                  'setter', 'cached_property')
           for d in node.decorators):
      return None
    return u, node, 0

  def family_methods(self, unit: SourceFile, func: cst.Attribute):
    """``(class, {id: (unit, FunctionDef)})`` of ``receiver.name``: the receiver's class (as
    ``_own_method`` names it) and the methods ``name`` its family defines; ``(None, {})``."""
    cls = self.receiver_class(unit, func.value)
    if cls is None and isinstance(func.value, cst.Name):
      cls = self._bound_class(unit, func.value)
    if cls is None:
      return None, {}
    family, found = self._families.find(cls), {}
    by_name = self.__dict__.get('_functions_by_name')
    if by_name is None:   # asked per call of a method (faceclipnerf: 67,664 asks)
      by_name = self.__dict__.setdefault('_functions_by_name', {})
      for u, node in self._functions.values():
        by_name.setdefault(node.name.value, []).append((u, node))
    for u, node in by_name.get(func.attr.value, ()):
      owner = u.enclosing(u.parent(node), (cst.ClassDef, cst.FunctionDef))
      if isinstance(owner, cst.ClassDef) and self.family(u, owner) == family:
        found[id(node)] = (u, node)
    return cls, found

  def field_values(self, key: str,
                   name: str) -> List[Tuple[SourceFile, Optional[cst.BaseExpression]]]:
    """``(unit, value)`` of each assignment to the field ``<x>.<name>`` whose ``field_key`` is
    ``key``, ``x`` the ``self`` of a method, followed as an object, never matched by name; the
    value is None where the assignment is not one plain ``x.name = value`` (an augmented or
    annotated one, or one of several targets)."""
    by_key = self._field_values.get(name)
    if by_key is None:   # every field of that name at once: each assignment's key found once
      by_key = self._field_values[name] = {}
      for u, node in self.attributes(name):
        target = u.parent(node)
        if isinstance(target, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign)):
          assign = u.parent(target) if isinstance(target, cst.AssignTarget) else None
          by_key.setdefault(self.field_key(self.receiver_class(u, node.value), name), []).append(
              (u, assign.value if _unit.sole_target(assign) is not None else None))
    return list(by_key.get(key, ()))

  def attributes(self, name: str) -> List[Tuple[SourceFile, cst.Attribute]]:
    """``[(unit, <x>.name), ...]``: every attribute of that name in the project, in the files'
    order and then the file's; indexed in one walk, so a question about one field or method does
    not walk every file (a repository of 545 files: 337 of 612 samples of its migration were
    ``field_values``' walk)."""
    if self._attributes is None:
      self._attributes = {}
      for u in self.units:
        for node in u.nodes:
          if isinstance(node, cst.Attribute):
            self._attributes.setdefault(node.attr.value, []).append((u, node))
    return self._attributes.get(name, [])

  def references(self, qualified: Set[str]) -> List[Tuple[SourceFile, cst.CSTNode]]:
    """``[(unit, node), ...]``: every name or attribute of the project that refers to one of the
    fully qualified names ``qualified`` (``SourceFile.names``), in the files' order and then
    the file's; indexed in one walk."""
    if self._references is None:
      self._references = {}
      for i, u in enumerate(self.units):
        for node in u.nodes:
          if isinstance(node, (cst.Name, cst.Attribute)):
            for name in u.names(node):
              self._references.setdefault(name, []).append((i, u.order(node), u, node))
    found = {(i, at): (u, node) for q in qualified for i, at, u, node in
             self._references.get(q, ())}
    return [found[k] for k in sorted(found)]

  def _bound_field(self, key: str, name: str, depth: int):
    """``(unit, FunctionDef, shift)`` that the field ``self.<name>`` (its ``field_key``) holds
    where every assignment to it in the family's methods is a callable that resolves to the same
    function (TD3's ``self.actor_step = jax.jit(self._actor_step)`` in one branch,
    ``self._actor_step`` in the other), else None."""
    cache = self.__dict__.setdefault('_bound_fields', {})
    if (key, name) in cache:
      return cache[(key, name)]
    cache[(key, name)] = None   # while it is being decided (a field bound to itself): none
    values = self.field_values(key, name)
    if any(v is None for _, v in values):
      return None
    resolved = {(id(t[1]), t[2]): t for t in (
        self.resolve_callable(u, v, 0, depth + 1) for u, v in values) if t is not None}
    if not values or len(resolved) != 1 or any(
        self.resolve_callable(u, v, 0, depth + 1) is None for u, v in values):
      return None
    cache[(key, name)] = next(iter(resolved.values()))
    return cache[(key, name)]

  def pre_linen(self, unit: SourceFile) -> Optional[str]:
    """Why ``unit`` cannot run on today's flax where it is pre-Linen (FOM105 for the optimizers
    it creates or holds), else None: it uses ``flax.nn`` itself (a name flax.linen lacks), or a
    module-level import of it loads such a file that imports ``flax.nn`` when it loads, in turn
    (oyster's ``td3.py`` imports ``models``, whose ``from flax import nn`` fails on today's flax;
    a ``flax.nn.make_rng()`` in a function fails only where it runs)."""
    if self._pre_linen is None:
      why = {u.path: 'this file uses flax.nn' for u in self.units if _unit.uses_flax_nn(u)}
      broken = {u.path for u in self.units if u.path in why and any(
          n == 'flax.nn' or n.startswith('flax.nn.') for n in _unit.module_imports(u))}
      # What each file loads of the project's (a module, or the file of a function or class).
      modules = {u.module_name: u for u in self.units if u.module_name} if broken else {}
      loads = {u.path: {m.path for m in (
          (self._functions.get(n) or self._classes.get(n) or (modules.get(n),))[0]
          for n in _unit.module_imports(u)) if m is not None} for u in self.units} if broken else {}
      while broken:
        more = {path: loaded for path, paths in loads.items() if path not in broken
                for loaded in sorted(paths & broken)[:1]}
        if not more:
          break
        broken.update(more)
        for path, loaded in more.items():
          why.setdefault(path, f'it imports {os.path.basename(loaded)}, which cannot be imported '
                               'on today\'s flax (it loads flax.nn)')
      self._pre_linen = why
    return self._pre_linen.get(unit.path)

  def imported_by(self, text: str) -> List[SourceFile]:
    """The project's parsed files that the code ``text`` may import, directly or through
    other files: each whose module name (its file's name, or its folder's for an
    ``__init__.py``) is a word of an import statement of ``text``, or of such a file. Read
    from the text, for a file without a tree; a word that only looks like a module's name
    makes the set larger, never smaller."""
    by_name: Dict[str, List[SourceFile]] = {}
    for unit in self.units:
      stem = os.path.splitext(os.path.basename(unit.path))[0]
      if stem == '__init__':
        stem = os.path.basename(os.path.dirname(unit.path))
      by_name.setdefault(stem, []).append(unit)
    found: Dict[str, SourceFile] = {}
    queue = [text]
    while queue:
      for word in sorted(imported_words(queue.pop())):
        for unit in by_name.get(word, ()):
          if unit.path not in found:
            found[unit.path] = unit
            queue.append(unit.source)
    return [found[p] for p in sorted(found)]

  def own_name_ending(self, qualified: str) -> Optional[str]:
    """The longest name of the project's own functions and classes that ``qualified`` ends
    with (``nerf.utils.TrainState`` for ``google3.experimental.jaxnerf.nerf.utils.TrainState``:
    an import path that does not resolve to the given files), else None."""
    own = [k for k in (*self._functions, *self._classes) if qualified.endswith('.' + k)]
    return max(own, key=len) if own else None

  def lacking_module(self, qualified: str) -> Optional[SourceFile]:
    """The project's file whose module ``qualified`` names an attribute of, where its source
    defines no such name at its top level (ref_nerf_jax's ``internal.utils.TrainState``: the
    import resolves, the class is missing), else None."""
    module, _, attribute = qualified.rpartition('.')
    holder = next((u for u in self.units if module and u.module_name == module), None)
    if holder is None or re.search(
        rf'^(?:(?:async\s+)?def|class)\s+{re.escape(attribute)}\b|^{re.escape(attribute)}\s*[:=]',
        holder.source, re.MULTILINE):
      return None
    return holder

  def traced_only(self, unit: SourceFile, call: cst.Call) -> bool:
    """Whether ``call`` runs a function wrapped by one of ``TRACERS`` (``jax.make_jaxpr(f)(opt)``,
    or a variable bound once to such a wrapper): its arguments reach ``f``, its result is not
    what ``f`` returns."""
    func = call.func
    if isinstance(func, cst.Name):
      func = _unit.assigned_value(unit, func) or func
    return isinstance(func, cst.Call) and bool(unit.names(func.func) & TRACERS)

  def partial_callee(self, unit: SourceFile, call: cst.Call):
    """``resolve_callable`` of ``f`` in ``functools.partial(f, ...)``, else None."""
    if unit.names(call.func) & PARTIAL and call.args and call.args[0].keyword is None:
      callee = self.resolve_callable(unit, call.args[0].value)
      if callee is not None and isinstance(callee[1], cst.FunctionDef):
        return callee
    return None

  def reaching_binding(self, unit: SourceFile, name: cst.Name) -> Optional[cst.CSTNode]:
    """Where a module's top-level code binds ``name`` more than once (a notebook-style script
    that defines ``train_step`` and ``train_pstep = jax.pmap(train_step, ...)`` again for its
    next stage), the binding a read in that top-level code sees: the last of those statements
    before the read's own, as each runs once, in order. The ``FunctionDef`` / ``ClassDef``, or
    the value of ``name = value``; None where ``name`` is bound once, where a binding inside a
    branch, a loop or a ``with`` may run between that statement and the read, or the read is
    in a function or class body (which runs when called, seeing whichever binding is current):
    the top-level case of ``_unit.reaching``."""
    scope = unit.scopes.get(name)
    if not isinstance(scope, meta.GlobalScope) or len(list(scope[name.value])) < 2:
      return None
    binding = _unit.reaching(unit, name)
    return _unit.bound_value(unit, binding) if binding is not None else None

  def assignment_values(self, unit: SourceFile,
                        name: cst.Name) -> Optional[List[cst.BaseExpression]]:
    """The values of every ``name = value`` binding of ``name``; None if another kind binds it.
    Of one binding where straight-line code decides which reaches the read ``name``
    (``_unit.reaching``)."""
    scope = unit.scopes.get(name)
    if scope is None:
      return None
    binding = _unit.reaching(unit, name) if isinstance(name, cst.Name) else None
    assign = _unit.plain_assignment(unit, binding) if binding is not None else None
    if assign is not None:
      return [assign.value]
    values = []
    for a in _unit.bindings(unit, scope, name.value):
      assign = _unit.plain_assignment(unit, a)
      if assign is None:
        return None
      values.append(assign.value)
    return values

  # -------------------------------------------------------------------- classes

  def class_name(self, unit: SourceFile, classdef: cst.ClassDef) -> Optional[str]:
    """The qualified name of the project's class ``classdef``."""
    names = sorted(unit.names(classdef.name) & set(self._classes))
    return names[0] if names else None

  def family(self, unit: SourceFile, classdef: cst.ClassDef) -> Optional[str]:
    """The class family (a class and the project's classes it derives from, or that derive
    from it) of ``classdef``, named by one of its classes: whose methods ``self.<m>()`` may
    run."""
    name = self.class_name(unit, classdef)
    return self._families.find(name) if name else None

  def field_key(self, cls: Optional[str], name: str) -> Optional[str]:
    """Which field ``<x>.<name>`` is for an instance ``x`` of the project's class ``cls``: the
    topmost of ``cls`` and the classes it derives from whose code names ``self.<name>`` (or
    declares ``name``), so a subclass shares its base's field, while two subclasses of a base
    that never names it have one each (balloon-learning-environment's MLPAgent, on flax.optim,
    and DQNAgent, on optax, both Agent's); ``cls``'s family where none names it."""
    if cls is None:
      return None
    cache = self.__dict__.setdefault('_field_keys', {})
    if (cls, name) not in cache:
      chain, todo = [], [cls]
      while todo:   # cls, then the project's classes it derives from, nearer first
        current = todo.pop(0)
        if current in chain:
          continue
        chain.append(current)
        u, node = self._classes[current]
        todo += sorted({n for base in node.bases for n in u.names(base.value)} & set(self._classes))
      named = [c for c in chain if _unit.names_field(*self._classes[c], name)]
      cache[(cls, name)] = named[-1] if named else self._families.find(cls)
    return cache[(cls, name)]

  def _bound_class(self, unit: SourceFile, name: cst.Name) -> Optional[str]:
    """The class each binding of the variable ``name`` (or the one that reaches it) makes an
    instance of, else None; asked once per read (a binding that leads back to it finds none)."""
    known = self.__dict__.setdefault('_bound_classes', {})
    if id(name) not in known:
      known[id(name)] = None
      classes = {self.instance_class(unit, v) for v in self.assignment_values(unit, name) or [None]}
      known[id(name)] = classes.pop() if len(classes) == 1 else None
    return known[id(name)]

  def instance_class(self, unit: SourceFile, value: Optional[cst.CSTNode]) -> Optional[str]:
    """The project's class whose instance ``value`` makes where it calls the class
    (``Model(config)``, ``CheckpointContents(optimizer=opt, ...)``), else None."""
    made = self.resolve_callable(unit, value.func) if isinstance(value, cst.Call) else None
    if made is None or not isinstance(made[1], cst.ClassDef):
      return None
    return self.class_name(made[0], made[1])

  def instance_family(self, unit: SourceFile, value: Optional[cst.CSTNode]) -> Optional[str]:
    cls = self.instance_class(unit, value)
    return self._families.find(cls) if cls else None

  def receiver_class(self, unit: SourceFile, node: cst.CSTNode) -> Optional[str]:
    """The class of ``node`` where it is the ``self`` of a method, else None (a value of a
    class the analysis does not know)."""
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
          return self.class_name(unit, owner)
        return None
      fdef = unit.enclosing(unit.parent(fdef), (cst.FunctionDef,))
    return None

  def receiver_family(self, unit: SourceFile, node: cst.CSTNode) -> Optional[str]:
    cls = self.receiver_class(unit, node)
    return self._families.find(cls) if cls else None
