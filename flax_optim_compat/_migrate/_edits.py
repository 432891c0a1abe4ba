"""What the plan hands the rewrite, per file: the rule and data for each node to rewrite, the
marker comments above each statement, and the imports the new code needs.
"""
import dataclasses
from typing import Dict, FrozenSet, List, NamedTuple, Optional, Set

import libcst as cst

from ._unit import SourceFile
from ._unit import statement_of


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


