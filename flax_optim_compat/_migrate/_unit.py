"""One parsed file of the project, and what its names refer to.

A ``SourceFile`` holds a file's LibCST tree with the metadata the analysis reads: fully qualified
names (``optim.Adam`` after ``from flax import optim`` is ``flax.optim.Adam``), scopes, parents
and positions. ``legacy_name`` says which names are flax.optim's own, however they are spelled
(``'Adam'`` for each of ``flax.optim.Adam``, ``flax.optim.adam.Adam``,
``flax_optim_compat.Adam``). The small helpers below read one node of a file; the analysis,
the classification of sites, the plan and the rules share them.
"""
import collections
import importlib
import os
import pkgutil
from typing import Dict, Iterable, List, Optional, Set

import libcst as cst
from libcst import metadata as meta

import flax_optim_compat as _optim
from .. import _adapter
from .. import _legacy_jax
from .. import _layouts

LEGACY_PREFIXES = ('flax.optim.', 'flax_optim_compat.')
LEGACY_MODULES = ('flax.optim', 'flax_optim_compat')   # imported, whole or in part
# The built-in optimizers (flax.optim's own, each with its optax form), as registered.
BUILTIN_DEFS = tuple(name for name in _layouts.optimizer_names()
                     if issubclass(getattr(_optim, name), _adapter.OptaxBackedDef))
OPTIMIZER_CLASSES = ('Optimizer',)

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


def dotted(node) -> str:
  """The source text of a (dotted) name: ``flax.optim`` for its ``Attribute``."""
  return cst.Module([]).code_for_node(node)


# flax.optim and its modules (``flax.optim.adam``), as names.
_MODULES = frozenset({'flax.optim'} | {f'flax.optim.{m.name}' for m in pkgutil.iter_modules(
    _optim.__path__) if not m.name.startswith('_')})


def the_module(unit, node) -> bool:
  """Whether ``node`` is flax.optim itself or one of its modules, as a value: no legacy name
  (``getattr(flax.optim, name)``, ``hasattr(optim, name)`` under ``from flax import optim``)."""
  return bool(unit.names(node) & _MODULES)


def private_legacy(unit, node) -> bool:
  """``flax.optim.adam._AdamParamState``: a name of flax.optim's private modules or classes
  (legacy internals), which no legacy name covers; read through its module or imported by
  itself (``from flax.optim.adam import _AdamParamState``)."""
  return isinstance(node, (cst.Name, cst.Attribute)) and any(
      n.startswith('flax.optim.') and '._' in n[len('flax.optim'):] for n in unit.names(node))


def refers_to_legacy(unit, node) -> bool:
  """Whether ``node`` is a name (or attribute) that refers to flax.optim: a legacy name, a
  private one of its modules (``private_legacy``), or flax.optim itself (``the_module``)."""
  return isinstance(node, (cst.Name, cst.Attribute)) and bool(
      unit.legacy(node) or private_legacy(unit, node) or the_module(unit, node))


def missing_member(unit, node) -> Optional[str]:
  """``'Sgd'`` where ``node`` is flax.optim (or one of its modules) and its parent reads a name
  that flax 0.5.3's module does not have (``optim.Sgd``: the legacy program fails there too);
  else None. The package is name-for-name with flax 0.5.3's flax.optim."""
  parent = unit.parent(node)
  if not (isinstance(parent, cst.Attribute) and parent.value is node):
    return None
  for name in unit.names(node) & _MODULES:
    module = importlib.import_module(name.replace('flax.optim', _optim.__name__, 1))
    if not hasattr(module, parent.attr.value):
      return parent.attr.value
  return None


def module_imports(unit: "SourceFile") -> List[str]:
  """The dotted names ``unit``'s plain module-level imports load (``from models import build``:
  ``models.build``; ``from . import utils`` in ``pkg/train.py``: ``pkg.utils``), run when the
  module is imported."""
  found = []
  for statement in unit.module.body:
    for small in statement.body if isinstance(statement, cst.SimpleStatementLine) else ():
      if isinstance(small, cst.Import):
        found += [dotted(a.name) for a in small.names]
      elif isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):
        base = [dotted(small.module)] if small.module else []
        if small.relative:   # ``from . import utils``: the package of the file, up
          package = unit.module_name.split('.')[:-1]
          base = package[:len(package) - len(small.relative) + 1] + base
        found += ['.'.join(base + [dotted(a.name)]) for a in small.names]
  return found


def bound_name(alias: cst.ImportAlias) -> str:
  """The name an import alias binds: ``import jax.numpy`` binds ``jax``, ``... as jnp`` ``jnp``."""
  return dotted(alias.asname.name if alias.asname else alias.name).split('.')[0]


def plainly_imported(unit: "SourceFile", but=None) -> Set[str]:
  """The top-level modules plain module-level ``import m`` statements of the file (other than
  ``but``) bind as ``m``."""
  return {dotted(a.name) for other in unit.module.body
          if isinstance(other, cst.SimpleStatementLine) for small in other.body
          if isinstance(small, cst.Import) and small is not but
          for a in small.names if a.asname is None and '.' not in dotted(a.name)}


def uses_flax_nn(unit: "SourceFile") -> bool:
  """Whether the file uses pre-Linen ``flax.nn``: a name of it other than the functions
  flax.linen has (``flax.nn.relu``, which migrate renames), outside annotations (``model:
  flax.nn.Model`` of a Linen program's params: a removed name, FOM299, no flax.nn model)."""
  return any(n.startswith('flax.nn.') and '.'.join(n.split('.')[:3]) not in _LINEN_HAS
             for node in unit.nodes if isinstance(node, (cst.Name, cst.Attribute))
             and unit.enclosing(node, cst.Annotation) is None for n in unit.names(node))


_LINEN_HAS = frozenset(e.qualname for e in _legacy_jax.NAMES if e.module == 'flax.nn')


# What only a legacy optimizer has, of what a value of unknown origin is read for.
OPTIMIZER_ONLY_READS = frozenset({'target', 'apply_gradient', 'optimizer_def'})


def names_field(unit: "SourceFile", classdef: cst.ClassDef, name: str) -> bool:
  """Whether the class's own code names the field ``name``: ``self.<name>`` in its body, or a
  class-level ``name: T`` / ``name = v`` (a dataclass's field). The class is read once, for
  all its names (faceclipnerf: 956 asks over 64 files were 126 of 770 profiled seconds)."""
  named = unit.__dict__.setdefault('_fields_named', {})
  if id(classdef) not in named:
    found = {node.attr.value for node in walk(classdef.body)
             if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name)
             and node.value.value == 'self'}
    for statement in classdef.body.body:
      for small in statement.body if isinstance(statement, cst.SimpleStatementLine) else ():
        target = small.target if isinstance(small, cst.AnnAssign) else sole_target(small)
        if isinstance(target, cst.Name):
          found.add(target.value)
    named[id(classdef)] = found
  return name in named[id(classdef)]


class SourceFile:
  """One parsed file with the metadata the analysis reads."""

  def __init__(self, path: str, source: str, wrapper: meta.MetadataWrapper):
    self.path = path
    self.source = source
    self.wrapper = wrapper
    self.module = wrapper.module
    self.fqnames = wrapper.resolve(meta.FullyQualifiedNameProvider)
    self.scopes = wrapper.resolve(meta.ScopeProvider)
    self.module_name = next(iter(self.fqnames.get(self.module, ())), None)
    self.module_name = self.module_name.name if self.module_name else ''
    # One walk, reused by every pass of the analysis; it records each node's parent too (what
    # LibCST's ParentNodeProvider computes, without its two more walks of the tree).
    collect = _Collect()
    self.module.visit(collect)
    self.nodes, self.parents = collect.nodes, collect.parents
    self._positions = None   # LibCST's PositionProvider (a render of the file): when first read
    self._order = None
    self._returns = None
    self._uses = None
    self._optimizer_fields = None
    self._names_legacy = None
    self.star_sources: List[str] = []   # ``from X import *``: set by ``_program.Program``,
    self.star_names: Dict[str, str] = {}   # with what they bind
    self.star_imports: Dict[str, str] = {}   # and what they bind from its imports
    self._reads_legacy = None

  @property
  def uses_jax_or_flax(self) -> bool:
    """Whether any name of the file refers to jax, flax, optax or this package."""
    if self._uses is None:
      roots = {q.name.split('.')[0] for qs in self.fqnames.values() for q in qs}
      self._uses = bool(roots & {'jax', 'flax', 'optax', 'flax_optim_compat'})
    return self._uses

  def sees_field(self, name: str) -> bool:
    """Whether an attribute ``x.<name>`` of a value whose class the analysis cannot tell may be
    a flax.optim optimizer held in a field of that name: in a file that uses jax or flax, or
    where the file reads ``x.<name>`` for what only a legacy optimizer has (``.target``,
    ``.apply_gradient``, ``.optimizer_def``, ``.state.step``, ``.state.param_states``: a runner
    handed the agent, ``np.asarray(agent.optimizer.target['w'])``, imports neither; or reads
    them on a variable bound once to ``x.<name>``). A
    TensorFlow agent's ``self.optimizer.minimize(...)`` in a file with no jax is not one."""
    if self._optimizer_fields is None:
      self._optimizer_fields = set()
      for n in self.nodes:
        if isinstance(n, cst.Attribute) and n.attr.value in ('step', 'param_states') and (
            isinstance(n.value, cst.Attribute) and n.value.attr.value == 'state'):
          n = n.value   # ``x.<name>.state.step``
        elif not (isinstance(n, cst.Attribute) and n.attr.value in OPTIMIZER_ONLY_READS):
          continue
        held = n.value
        if isinstance(held, cst.Name):   # ``opt = agent.optimizer``, then ``opt.target``
          held = assigned_value(self, held)
        got = literal_getattr(self, held)   # ``getattr(agent, 'optimizer').target``
        if isinstance(held, cst.Attribute) or got is not None:
          self._optimizer_fields.add(held.attr.value if got is None else got[1])
    return self.uses_jax_or_flax or name in self._optimizer_fields

  @property
  def names_flax_optim(self) -> bool:
    """Whether any name or attribute of the file refers to a flax.optim name, or to flax.optim
    itself (``getattr(flax.optim, name)``)."""
    if self._names_legacy is None:
      self._names_legacy = any(self._refers(n) for n in self.nodes)
    return self._names_legacy

  def reads_flax_optim(self) -> bool:
    """Whether code of the file, not an import, reads flax.optim (a name of it, or itself)."""
    if self._reads_legacy is None:
      self._reads_legacy = any(self._refers(n) and self.enclosing(
          n, (cst.Import, cst.ImportFrom)) is None for n in self.nodes)
    return self._reads_legacy

  def _refers(self, node: cst.CSTNode) -> bool:
    """Whether ``node`` is a name or attribute that refers to flax.optim or this package: a
    name of either, private ones included (``_AdamParamState`` imported from
    ``flax.optim.adam``, the package's own ``from_optax``), or either module itself."""
    return isinstance(node, (cst.Name, cst.Attribute)) and any(
        n == m or n.startswith(m + '.') for n in self.names(node) for m in LEGACY_MODULES)

  def names(self, node: cst.CSTNode) -> Set[str]:
    found = {q.name for q in self.fqnames.get(node, ())}
    if found or not (self.star_names or self.star_imports):
      return found
    root, rest = node, []   # ``flax.optim.Adam`` where ``flax`` is a star import's
    while isinstance(root, cst.Attribute):
      root, rest = root.value, [root.attr.value] + rest
    parent = self.parents.get(root)   # a free name ``from X import *`` binds: not a field
    if not isinstance(root, cst.Name) or self.fqnames.get(root) or any(
        root is getattr(parent, f, None) for f in ('attr', 'keyword', 'name')):
      return found
    if root is node and root.value in self.star_names:
      return {self.star_names[root.value]}
    if root.value in self.star_imports:
      return {'.'.join([self.star_imports[root.value], *rest])}
    return found

  def legacy(self, node: cst.CSTNode) -> Optional[str]:
    return legacy_name(self.names(node))

  def line(self, node: cst.CSTNode) -> int:
    if self._positions is None:
      self._positions = self.wrapper.resolve(meta.PositionProvider)
    return self._positions[node].start.line

  def order(self, node: cst.CSTNode) -> int:
    """Where ``node`` comes in the file (its place in ``nodes``, a walk in source order, a node
    before those inside it): the order in which the analysis walks LibCST's sets of bindings
    and reads (``bindings``, ``accesses``), whose own order follows object identities, which
    differ from run to run. (Not ``line``: LibCST's positions cost a render of the file.)"""
    if self._order is None:
      self._order = {id(n): i for i, n in enumerate(self.nodes)}
    return self._order[id(node)]

  def returns(self, fdef: cst.CSTNode) -> List[cst.CSTNode]:
    """``returns_of``, from one pass over ``nodes`` for the whole file."""
    if self._returns is None:
      self._returns = collections.defaultdict(list)
      for n in self.nodes:
        if isinstance(n, (cst.Return, cst.Yield)):
          self._returns[id(self.enclosing(n, (cst.FunctionDef, cst.Lambda)))].append(n)
    return list(self._returns.get(id(fdef), ()))

  def parent(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
    return self.parents.get(node)

  def code(self, node: cst.CSTNode) -> str:
    return self.module.code_for_node(node)

  def enclosing(self, node, types):
    while node is not None and not isinstance(node, types):
      node = self.parents.get(node)
    return node


def plain_reference(node) -> bool:
  """Whether ``node`` is a name or a chain of attributes of one (``state.optimizer``)."""
  if isinstance(node, cst.Name):
    return True
  return isinstance(node, cst.Attribute) and plain_reference(node.value)


def mentioned_names(unit: SourceFile, node: cst.CSTNode) -> Set[str]:
  """The variable names ``node`` mentions (not attribute or keyword names)."""
  names = set()
  for n in walk(node):
    parent = unit.parent(n)
    if isinstance(n, cst.Name) and not (
        isinstance(parent, cst.Attribute) and parent.attr is n) and not (
            isinstance(parent, cst.Arg) and parent.keyword is n):
      names.add(n.value)
  return names


def accesses(unit: SourceFile, name: cst.Name) -> Optional[List[cst.CSTNode]]:
  """Every read of the variable ``name`` (once each, over all its bindings); None where
  something other than an assignment binds it."""
  scope = unit.scopes.get(name)
  if scope is None:
    return None
  nodes = {}
  for a in bindings(unit, scope, name.value):
    if not isinstance(a, meta.Assignment):
      return None
    nodes.update((id(access.node), access.node) for access in reads_of(unit, a))
  return sorted(nodes.values(), key=unit.order)


def bindings(unit: SourceFile, scope: meta.Scope, name: str) -> List[meta.BaseAssignment]:
  """``scope[name]`` in the file's order (``SourceFile.order``; a builtin, which has no node in
  the file, first): the same order in every run."""
  return sorted(scope[name], key=lambda a: unit.order(a.node) if isinstance(
      getattr(a, 'node', None), cst.CSTNode) else -1)


def reads_of(unit: SourceFile, binding: meta.BaseAssignment) -> List[meta.Access]:
  """The reads of ``binding`` in ``unit``, in the file's order (``SourceFile.order``): its
  references that may see it. LibCST's references of a binding also hold a nested scope's reads
  of the same name where that scope binds the name itself (``def train(optimizer)`` beside a
  module's ``optimizer = ...``); such a read's own referents name the binding it sees."""
  return sorted((a for a in binding.references if any(r is binding for r in a.referents)),
                key=lambda a: unit.order(a.node))


def _statement_in(unit: SourceFile, node: cst.CSTNode, body) -> Optional[int]:
  """The index in ``body`` (a block's statements) of the statement that holds ``node``."""
  while node is not None:
    index = next((i for i, b in enumerate(body) if b is node), None)
    if index is not None:
      return index
    node = unit.parent(node)
  return None


def reaching(unit: SourceFile, read: cst.Name) -> Optional[meta.Assignment]:
  """The one binding of a variable that reaches ``read`` in straight-line code, else None.

  A binding placed as a statement of the scope's own body (``name = value``, ``a, name =
  value``, ``def name``, ``class name``) runs once, in order; one inside a statement of that
  body (a branch, a loop, a ``with``) may run or not. Decided where the read is in that scope,
  after a placed binding: the last placed one before the statement that holds the read (a
  binding's own value reads the one before it: ``optimizer = optim.Adam(lr)``, then
  ``optimizer = optimizer.create(params)``), when no binding inside a statement lies between
  it and the read, or in the read's own statement (a loop that rebinds the name). A binding in
  a nested function (``global``, ``nonlocal``) leaves every read undecided; so does a read in
  a nested function (it runs when called)."""
  return _reaching(unit, read)[0]


def _reaching(unit: SourceFile, read: cst.Name):
  """``(binding, body, placed)`` of ``reaching`` (``_placed_bindings``'s two), or ``(None,
  None, None)`` where it is not decided. The blocks holding the read are asked innermost first:
  a binding placed in a branch's (or loop's) block before the read in that block reaches it as
  in the scope's body (``step = make(joint=True)`` then ``step(state)`` in one branch, ``step
  = make()`` in the other); a block with no binding before the read leaves it to the next."""
  found = _placed_bindings(unit, read)
  blocks = [] if found is None else [b.body for b in _ancestors_to(unit, read, found[0])
                                     if isinstance(b, cst.IndentedBlock)] + [found[0]]
  for body, placed in ((b, (found if b is found[0] else _placed_bindings(unit, read, b))[1])
                       for b in blocks):
    at = _statement_in(unit, read, body)
    if at is None or not any(i <= at for i, _, _ in placed):
      continue
    before = [(i, b) for i, b, own in placed if own and i < at]
    if not before:
      break
    last, binding = max(before, key=lambda p: p[0])
    if any(not own and last <= i <= at for i, _, own in placed):
      break
    return binding, body, placed
  return None, None, None


def _ancestors_to(unit: SourceFile, node: cst.CSTNode, body) -> List[cst.CSTNode]:
  """The nodes above ``node``, innermost first, up to the one whose statements are ``body``."""
  found, node = [], unit.parent(node)
  while node is not None and getattr(node, 'body', None) is not body:
    found.append(node)
    node = unit.parent(node)
  return found


def _placed_bindings(unit: SourceFile, read: cst.Name, body=None):
  """``(body, [(index, binding, own)])`` for the bindings of ``read``'s variable in its scope:
  the index in ``body`` (the scope's statements, or those of a block given) of the statement
  that holds each binding, ``own`` where that statement is the binding itself (``reaching``;
  a binding outside a block given is left out); None where ``read`` is a target, or a binding
  lies outside the scope body's statements or in a nested function."""
  scope = unit.scopes.get(read)
  if scope is None or read.value not in scope:
    return None
  owner = unit.module if isinstance(scope, meta.GlobalScope) else getattr(scope, 'node', None)
  inner, body = body, body if body is not None else getattr(owner, 'body', None)
  body = getattr(body, 'body', body)
  if not isinstance(body, (list, tuple)):
    return None
  placed = []
  for binding in bindings(unit, scope, read.value):
    node = getattr(binding, 'node', None)
    if node is read or node is None:
      return None   # a target, not a read
    if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
      line = node
    else:
      assign = _assigned_by(unit, node)
      line = unit.parent(assign) if assign is not None else None
    index = next((i for i, b in enumerate(body) if b is line), None)
    if index is not None:
      placed.append((index, binding, True))
      continue
    holder = unit.enclosing(node, (cst.FunctionDef, cst.Lambda, cst.ClassDef))
    index = _statement_in(unit, node, body)
    if index is None and inner is not None:
      continue
    if index is None or (holder is not None and holder is not owner):
      return None
    placed.append((index, binding, False))
  return body, placed


def _assigned_by(unit: SourceFile, target) -> Optional[cst.Assign]:
  """The statement ``name = value`` or ``a, name = value`` (a part of a tuple or list target,
  at any depth) whose target holds the name ``target``; else None."""
  node = unit.parent(target) if isinstance(target, cst.Name) else None
  while isinstance(node, (cst.Element, cst.StarredElement, cst.Tuple, cst.List)):
    node = unit.parent(node)
  assign = unit.parent(node) if isinstance(node, cst.AssignTarget) else None
  return assign if isinstance(assign, cst.Assign) else None


def bound_value(unit: SourceFile, binding: meta.Assignment) -> Optional[cst.CSTNode]:
  """What ``binding`` binds: the ``FunctionDef`` / ``ClassDef``, or the value of ``name =
  value``; else None."""
  if isinstance(binding.node, (cst.FunctionDef, cst.ClassDef)):
    return binding.node
  assign = plain_assignment(unit, binding)
  return assign.value if assign is not None else None


def binding_reads(unit: SourceFile, read: cst.Name) -> Optional[List[cst.CSTNode]]:
  """The reads that may see the binding that reaches ``read`` (``reaching``): each read of
  the variable in the same scope, after that binding's statement, with no binding placed as a
  statement of its own between them (which would run first); None where that binding is not
  decided, or a read is in another scope."""
  binding, body, placed = _reaching(unit, read)
  if binding is None:
    return None
  start = next(i for i, b, _ in placed if b is binding)
  reads = []
  for access in reads_of(unit, binding):
    node = access.node
    if not isinstance(node, cst.Name) or unit.scopes.get(node) is not unit.scopes.get(read):
      return None
    at = _statement_in(unit, node, body)
    if at is None:
      return None
    hidden = any(own and start < i < at for i, _, own in placed)
    if start < at and not hidden and all(node is not r for r in reads):
      reads.append(node)
  return reads


def sole_target(node: Optional[cst.CSTNode], value: Optional[cst.CSTNode] = None):
  """The target of ``node`` where it is an ``Assign`` with one target (``t = ...``, not
  ``a = b = ...``) and, when ``value`` is given, ``value`` is what it assigns; else None. The
  one test of "a statement that binds one target" for the whole wing."""
  if not (isinstance(node, cst.Assign) and len(node.targets) == 1):
    return None
  if value is not None and node.value is not value:
    return None
  return node.targets[0].target


def plain_assignment(unit: SourceFile, binding: meta.BaseAssignment) -> Optional[cst.Assign]:
  """The statement ``name = value`` whose one target is the name that ``binding`` (one
  binding of a scope) binds; None for any other binding: a parameter, an import, ``for name
  in``, ``a, name = ...``, ``a = name = ...``, ``name += ...``, ``name: T = ...``."""
  if not isinstance(binding, meta.Assignment):
    return None
  target = unit.parent(binding.node)
  assign = unit.parent(target) if isinstance(target, cst.AssignTarget) else None
  if sole_target(assign) is not binding.node:
    return None
  return assign


def parameter(unit: SourceFile, name: cst.CSTNode) -> Optional[cst.Param]:
  """The parameter the variable ``name`` reads, where a parameter is its only binding, else
  None."""
  scope = unit.scopes.get(name)
  if not isinstance(name, cst.Name) or scope is None:
    return None
  bindings = list(scope[name.value])
  if len(bindings) == 1 and isinstance(getattr(bindings[0], 'node', None), cst.Param):
    return bindings[0].node
  return None


def literal_getattr(unit: SourceFile, node: cst.CSTNode):
  """``(receiver, name)`` where ``node`` is ``getattr(receiver, 'name')`` (two arguments, the
  name a literal identifier): the attribute ``receiver.name`` by another spelling; else None."""
  if not (isinstance(node, cst.Call) and 'builtins.getattr' in unit.names(node.func)
          and len(node.args) == 2 and all(a.keyword is None and not a.star for a in node.args)
          and isinstance(node.args[1].value, cst.SimpleString)):
    return None
  name = node.args[1].value.evaluated_value
  return (node.args[0].value, name) if isinstance(name, str) and name.isidentifier() else None


def statement_of(unit: SourceFile, node: cst.CSTNode) -> cst.CSTNode:
  """The statement that holds ``node`` (the line a marker goes above)."""
  while node is not None and not isinstance(
      node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
    node = unit.parent(node)
  return node


def value_of(unit: SourceFile, name: cst.CSTNode) -> Optional[cst.BaseExpression]:
  """The value of the ``name = value`` that binds the variable ``name``: its one binding
  (``assigned_value``), or the one that reaches the read ``name`` in straight-line code
  (``reaching``); else None."""
  assign = plain_assignment(unit, reaching(unit, name)) if isinstance(name, cst.Name) else None
  return assigned_value(unit, name) or (assign.value if assign is not None else None)


def assigned_value(unit: SourceFile, name: cst.CSTNode,
                   annotated: bool = False) -> Optional[cst.BaseExpression]:
  """The value of the one ``name = value`` (``plain_assignment``) that binds the variable
  ``name``, where nothing else binds it (``annotated``: or the one ``name: T = value``, its
  annotation unread); else None."""
  scope = unit.scopes.get(name)
  if not isinstance(name, cst.Name) or scope is None:
    return None
  bindings = list(scope[name.value])
  if annotated and len(bindings) == 1 and isinstance(bindings[0], meta.Assignment):
    owner = unit.parent(bindings[0].node)
    if isinstance(owner, cst.AnnAssign) and owner.target is bindings[0].node:
      return owner.value
  assign = plain_assignment(unit, bindings[0]) if len(bindings) == 1 else None
  return None if assign is None else assign.value


def call_arg(call: cst.Call, position: int, keyword: str) -> Optional[cst.BaseExpression]:
  positional = [a for a in call.args if a.keyword is None and not a.star]
  for a in call.args:
    if a.keyword is not None and a.keyword.value == keyword:
      return a.value
  return positional[position].value if position < len(positional) else None


# Transforms a create may be called through whole, each measured to give legacy's state and
# updates with the rewritten create called through it: ``jax.jit(opt_def.create)(params)``
# (the same arrays as ``opt_def.create(params)``), ``jax.vmap(opt_def.create)(batched)``
# (one optimizer per row, as legacy's vmapped ``create``).
CREATE_TRANSFORMS = frozenset({'jax.jit', 'jax.vmap'})


def create_method(unit: SourceFile, call: cst.Call) -> Optional[cst.Attribute]:
  """The ``X.create`` that ``call`` calls: ``X.create(params)``, or ``T(X.create)(params)``
  with ``T`` one of ``CREATE_TRANSFORMS`` (its other arguments, ``backend=`` or ``in_axes=``,
  stay with it); else None."""
  func = call.func
  if isinstance(func, cst.Call) and unit.names(func.func) & CREATE_TRANSFORMS and (
      func.args and func.args[0].keyword is None and not func.args[0].star):
    func = func.args[0].value
  return func if isinstance(func, cst.Attribute) and func.attr.value == 'create' else None


def create_receiver(unit: SourceFile, call: cst.Call) -> cst.BaseExpression:
  """The def a create call is called on (``X`` of ``X.create(...)`` or of
  ``jax.jit(X.create)(...)``)."""
  return create_method(unit, call).value


def create_call_of(unit: SourceFile, method: cst.Attribute) -> Optional[cst.Call]:
  """The call that calls the create method ``method`` (``X.create``), directly or through a
  transform (``create_method``); else None."""
  call = unit.parent(method)
  if isinstance(call, cst.Arg):
    call = unit.parent(unit.parent(call))
  return call if isinstance(call, cst.Call) and create_method(unit, call) is method else None


def transformed_create(unit: SourceFile, call: cst.Call) -> bool:
  """Whether ``call`` is a create called through a transform (``jax.vmap(X.create)(p)``)."""
  return isinstance(call.func, cst.Call) and create_method(unit, call) is not None


def is_module_like(unit: SourceFile, node: cst.CSTNode) -> bool:
  """Whether ``node`` names an imported module (``jax``, ``optim``), not a value."""
  scope = unit.scopes.get(node)
  if isinstance(node, cst.Name) and scope is not None:
    return any(isinstance(a, meta.ImportAssignment) for a in scope[node.value])
  if isinstance(node, cst.Attribute):
    return is_module_like(unit, node.value)
  return False


def annotation_head(node: cst.BaseExpression) -> cst.BaseExpression:
  """``optim.Optimizer`` of ``Optional[optim.Optimizer]`` and of ``'optim.Optimizer'``."""
  if isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(
      node.slice[0].slice, cst.Index):
    return annotation_head(node.slice[0].slice.value)
  return node


class _Walk(cst.CSTVisitor):
  """Every node, parents before children (no per-attribute hooks: a plain walk)."""

  def __init__(self):
    super().__init__()
    self.nodes: List[cst.CSTNode] = []

  def on_visit(self, node):
    self.nodes.append(node)
    return True

  def on_leave(self, original_node):
    pass

  def on_visit_attribute(self, node, attribute):
    pass

  def on_leave_attribute(self, original_node, attribute):
    pass


class _Collect(_Walk):
  """A walk that records each node's parent too (the module has none)."""

  def __init__(self):
    super().__init__()
    self.parents: Dict[cst.CSTNode, cst.CSTNode] = {}
    self._stack: List[cst.CSTNode] = []

  def on_visit(self, node):
    self.nodes.append(node)
    if self._stack:
      self.parents[node] = self._stack[-1]
    self._stack.append(node)
    return True

  def on_leave(self, original_node):
    self._stack.pop()


def at(unit: SourceFile, node: cst.CSTNode) -> str:
  """``train.py:382``: where ``node`` is, for a report message."""
  return f'{os.path.basename(unit.path)}:{unit.line(node)}'


def returns_of(unit: SourceFile, fdef: cst.FunctionDef) -> List[cst.CSTNode]:
  """The ``return`` and ``yield`` nodes of ``fdef`` itself, not of a function or lambda nested
  in it."""
  return unit.returns(fdef)


def walk(node: cst.CSTNode) -> List[cst.CSTNode]:
  """Every node under ``node`` (itself included), parents before children."""
  collect = _Walk()
  node.visit(collect)
  return collect.nodes


def short(text: str, width: int = 60) -> str:
  """``text`` on one line, cut to ``width`` characters with ``...`` (for messages)."""
  text = ' '.join(text.split())
  return text if len(text) <= width else text[:width - 3] + '...'
