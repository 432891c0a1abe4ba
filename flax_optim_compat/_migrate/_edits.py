"""What the plan hands the rewrite, per file: the rule and data for each node to rewrite, the
marker comments above each statement, and the imports the new code needs.
"""
import dataclasses
from typing import Dict, FrozenSet, List, NamedTuple, Optional, Set

import libcst as cst
from libcst import metadata as meta

from ._unit import SourceFile
from ._unit import dotted
from ._unit import statement_of
from ._unit import walk


@dataclasses.dataclass(frozen=True)
class NoData:
  """The data of a rule that needs nothing but its node."""


class Import(NamedTuple):
  """An import the new code needs: ``import module`` / ``from module import name as asname``."""
  module: str
  name: Optional[str] = None
  asname: Optional[str] = None


OPTAX = Import('optax')
JAX = Import('jax')
JNP = Import('jax.numpy', asname='jnp')
JAX_UTILS = Import('flax', 'jax_utils')
TRAVERSE_UTIL = Import('flax', 'traverse_util')
# The engine imports it under another name where the file already uses ``train_state``.
TRAIN_STATE = Import('flax.training', 'train_state')


@dataclasses.dataclass(frozen=True)
class Edit:
  rule: object              # the ``_rule.Rule`` that rewrites the node
  data: object = NoData()   # the rule's own data class


@dataclasses.dataclass
class FilePlan:
  unit: SourceFile
  edits: Dict[int, Edit] = dataclasses.field(default_factory=dict)
  markers: Dict[int, List[str]] = dataclasses.field(default_factory=dict)
  needs: Set[Import] = dataclasses.field(default_factory=set)
  # The project's class fields whose legacy Optimizer annotation FOM006 rewrote (``optimizer:
  # flax.optim.Optimizer``): what a checkpoint of an instance holds under that key is now a
  # TrainState (FOM014 reads a raw restore by it); set by the plan before its second pass.
  optimizer_fields: FrozenSet[str] = frozenset()

  def mark(self, node: cst.CSTNode, text: str, unless: str = ''):
    """Puts the marker ``text`` above ``node``'s statement once (not where a marker of the
    statement starts with ``unless``)."""
    stmt = statement_of(self.unit, node)
    texts = self.markers.setdefault(id(stmt), [])
    if text not in texts and not (unless and any(t.startswith(unless) for t in texts)):
      texts.append(text)


def import_line(statement) -> bool:
  return isinstance(statement, cst.SimpleStatementLine) and all(
      isinstance(s, (cst.Import, cst.ImportFrom)) for s in statement.body)


def first_lines_end(body) -> int:
  """The place after a module's first block of imports (and its docstring) in ``body``."""
  index = 0
  while index < len(body) and (import_line(body[index]) or index == 0 and isinstance(
      body[0], cst.SimpleStatementLine) and len(body[0].body) == 1 and isinstance(
          body[0].body[0], cst.Expr) and isinstance(body[0].body[0].value, cst.SimpleString)):
    index += 1
  return index


def set_up_end(body) -> Optional[int]:
  """Where new module-level lines go in a module that sets up what jax reads as it loads (a
  statement not an import before its first import of jax, flax or optax, all of which load
  jax: ``os.environ['JAX_ENABLE_X64'] = 'True'``): after the block of imports that holds that
  import. None where that import is in the first block (or there is none)."""
  loads = lambda s: import_line(s) and any(
      dotted(n).split('.')[0] in ('jax', 'jaxlib', 'flax', 'optax') for n in
      [a.name for x in s.body if isinstance(x, cst.Import) for a in x.names] +
      [x.module for x in s.body if isinstance(x, cst.ImportFrom) and x.module and not x.relative])
  first = next((i for i, s in enumerate(body) if loads(s)), None)
  if first is None or first < first_lines_end(body):
    return None
  while first < len(body) and import_line(body[first]):
    first += 1
  return first


def imported_in_a_block(unit: SourceFile, node: cst.Attribute, root: str):
  """The import lines inside a block (``if``, ``try``, a function) that bind the name ``node``
  starts from, where each binding of it is one and an ``import <root>...`` can stand in its
  place: in a function that reads or binds ``root`` nowhere else (there it would make ``root``
  local to the whole function), not in a class body. Else None: the module's top imports it
  (which would load jax before the block's own set-up, or where the block never ran)."""
  while isinstance(node, cst.Attribute):
    node = node.value
  scope = unit.scopes.get(node) if isinstance(node, cst.Name) else None
  bindings = list(scope[node.value]) if scope is not None else []
  lines = [unit.enclosing(b.node, cst.SimpleStatementLine) for b in bindings
           if isinstance(b, meta.ImportAssignment)]
  if not lines or len(lines) < len(bindings) or any(
      line is None or isinstance(unit.parent(line), cst.Module) for line in lines):
    return None
  own = {id(n) for line in lines for n in walk(line)}   # the imports' own names
  for line in lines:
    holder = unit.enclosing(line, (cst.FunctionDef, cst.ClassDef, cst.Lambda))
    if isinstance(holder, cst.ClassDef):
      return None
    if holder is not None and any(isinstance(n, cst.Name) and n.value == root and
                                  id(n) not in own for n in walk(holder.body)):
      return None
  return lines
