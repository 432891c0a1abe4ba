"""Class families: the union-find that groups them (and optimizer groups), and, as Python
resolves a method, which of the methods of one name a family defines runs on an instance of a
given class."""
from typing import Dict, List, Optional, Set, Tuple

import libcst as cst

from ._unit import SourceFile


class UnionFind:
  """Disjoint sets: the class families, the groups of slots that are one optimizer."""

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


Classes = Dict[str, Tuple[SourceFile, cst.ClassDef]]   # qualified name -> its definition


def nearest(classes: Classes, cls: str,
            found: Dict[int, Tuple[SourceFile, cst.FunctionDef]]) -> Optional[tuple]:
  """Of the methods ``found`` (one name, defined by several classes of a family), the one Python
  runs on an instance of the class ``cls`` or of the project's subclasses of it: ``cls``'s own,
  else the nearest base's along a chain of single bases (distml's
  ``FlaxTrainingOperator.register`` over its base's abstract one), where no subclass of ``cls``
  defines it again; else None (a subclass's override may run, or multiple bases)."""
  owner = {id(u.enclosing(u.parent(node), (cst.ClassDef,))): (u, node)
           for u, node in found.values()}
  if cls not in classes:
    return None
  start = classes[cls][1]
  if any(key != id(start) and id(start) in _ancestors(classes, key) for key in owner):
    return None   # a subclass of cls overrides it
  node = start
  for _ in range(16):
    if id(node) in owner:
      return owner[id(node)]
    parents = _bases(classes, node)
    if len(parents) != 1:
      return None
    node = parents[0]
  return None


def only_concrete(classes: Classes, cls: str,
                  found: Dict[int, Tuple[SourceFile, cst.FunctionDef]]) -> Optional[tuple]:
  """Of the methods ``found``, the one that is not abstract (``abstract``), where it is the only
  one and its class is ``cls``, a base of it or a subclass of it (flaxseed's
  ``FlaxseedModule.init_optimizer``, an ``@abstractmethod`` its subclass overrides: on an
  instance of ``cls`` the override runs, as no instance has the abstract one); else None."""
  concrete = [(u, node) for u, node in found.values() if not abstract(node)]
  if len(concrete) != 1 or cls not in classes:
    return None
  u, node = concrete[0]
  owner, start = id(u.enclosing(u.parent(node), (cst.ClassDef,))), id(classes[cls][1])
  related = owner == start or start in _ancestors(classes, owner) or (
      owner in _ancestors(classes, start))
  return concrete[0] if related else None


def abstract(fdef: cst.FunctionDef) -> bool:
  """Whether the method is there to be overridden: decorated ``@abstractmethod``, or its body
  (after a docstring) only raises ``NotImplementedError``."""
  if any(isinstance(d.decorator, (cst.Name, cst.Attribute)) and cst.Module([]).code_for_node(
      d.decorator).split('.')[-1] == 'abstractmethod' for d in fdef.decorators):
    return True
  body = [s for s in fdef.body.body if not (   # a docstring
      isinstance(s, cst.SimpleStatementLine) and len(s.body) == 1
      and isinstance(s.body[0], cst.Expr)
      and isinstance(s.body[0].value, (cst.SimpleString, cst.ConcatenatedString)))]
  if len(body) != 1 or not isinstance(body[0], cst.SimpleStatementLine):
    return False
  raised = body[0].body[0].exc if isinstance(body[0].body[0], cst.Raise) else None
  raised = raised.func if isinstance(raised, cst.Call) else raised
  return isinstance(raised, cst.Name) and raised.value == 'NotImplementedError'


def _bases(classes: Classes, classdef: cst.ClassDef) -> List[cst.ClassDef]:
  """The project's classes ``classdef`` names as its bases."""
  unit = next(u for u, c in classes.values() if c is classdef)
  return list({id(c): c for base in classdef.bases for n in unit.names(base.value)
               if n in classes for c in (classes[n][1],)}.values())


def _ancestors(classes: Classes, key: int) -> Set[int]:
  """The ids of the project's classes that the class whose id is ``key`` derives from."""
  todo = [c for _, c in classes.values() if id(c) == key][:1]
  seen: Set[int] = set()
  while todo:
    for base in _bases(classes, todo.pop()):
      if id(base) not in seen:
        seen.add(id(base))
        todo.append(base)
  return seen
