"""What the plan hands the rewrite, per file: the rule and data for each node to rewrite, the
marker comments above each statement, and the imports the new code needs.
"""
import dataclasses
from typing import Dict, List, Set

import libcst as cst

from ._rules import NoData, Rule
from ._unit import Unit


@dataclasses.dataclass(frozen=True)
class Edit:
  rule: Rule          # the rule that rewrites the node
  data: object = NoData()   # the rule's own data class (``_rules.CreateData``, ...)


@dataclasses.dataclass
class FilePlan:
  unit: Unit
  edits: Dict[int, Edit] = dataclasses.field(default_factory=dict)
  markers: Dict[int, List[str]] = dataclasses.field(default_factory=dict)
  needs: Set[str] = dataclasses.field(default_factory=set)   # imports: 'optax', 'jnp', ...

  def mark(self, node: cst.CSTNode, text: str, unless: str = ''):
    """Puts the marker ``text`` above ``node``'s statement once (not where a marker of the
    statement starts with ``unless``)."""
    stmt = statement_of(self.unit, node)
    texts = self.markers.setdefault(id(stmt), [])
    if text not in texts and not (unless and any(t.startswith(unless) for t in texts)):
      texts.append(text)


def statement_of(unit: Unit, node: cst.CSTNode) -> cst.CSTNode:
  """The statement that holds ``node`` (the line a marker goes above)."""
  while node is not None and not isinstance(
      node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
    node = unit.parent(node)
  return node
