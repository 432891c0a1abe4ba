"""What a rewrite rule is, and what it decides and writes with.

A rule is one module of ``rules/``, found there by ``rules.ALL``: its code and title, what it
matches (``match``: one use of an optimizer value; ``claims``: a site the analysis found on
its own, such as a ``create(...)``; ``plan_name``: a legacy name that no optimizer object
covers), what it decides for each of its sites (``refusal``: whether the object allows the
rewrite; ``plan``: the edits, imports and report record), and what it writes (``rewrite``: the
new node, from the already-rewritten children, so a ``state.step`` inside a learning rate is
rewritten before the ``apply_gradient`` around it). What a rule needs to know about its node
beyond the node itself is a small frozen dataclass of its own module, filled in by its
``plan``. Each rule's examples (complete scripts before and after it, run both ways) live
beside its test, outside the installed package.
"""
import dataclasses
import re
from typing import Dict, List, NamedTuple, Optional, Tuple

import libcst as cst

from . import _optax_text
from . import _refusals
from ._edits import Edit, FilePlan  # noqa: F401  (Edit: for the rule modules)
from ._report import Conversion, Record
from ._unit import SourceFile


class Match(NamedTuple):
  """A use a rule matched: its kind, the node to rewrite, and why it is refused (or None)."""
  kind: str
  node: cst.CSTNode
  refusal: Optional[_refusals.Refusal] = None
  message: str = ''


@dataclasses.dataclass(frozen=True)
class Context:
  """Names the rewritten file uses for what the rules emit."""
  train_state: str = 'train_state'   # the flax.training.train_state module
  jax_utils: str = 'jax_utils'       # the flax.jax_utils module


@dataclasses.dataclass
class ObjectPlan:
  """What the analysis decided for one optimizer object, which its sites' rules read.

  ``creates``: its create sites; ``multis``: ``{id(create site): groups}`` of a MultiOptimizer
  or ``create(focus=...)``; ``calls``: ``{id(create site): DefCall}`` of the other creates;
  ``overrides``: ``{id(apply site): the learning_rate= expression or None}``; ``pmeans``:
  ``{id(apply site): the pmap axis its gradients are averaged over}``; ``mode`` / ``schedule``:
  the learning-rate mode (``_learning_rate``); ``keep_layout``: the optimizer is a field of the
  user's own train state, saved with its siblings; ``averaged_here``: ids of the apply sites of
  a replicated object whose pmapped step averages its grads itself (``_plan._replication``);
  ``shared_layout``: why its learning rate is injected whatever its sites do
  (``_shared_layout``).
  """
  project: object
  files: Dict[str, FilePlan]
  records: List[Record]
  conversions: List[Conversion]
  plain_optax: bool
  creates: list
  multis: dict
  calls: dict
  overrides: dict
  pmeans: dict
  mode: str
  schedule: Optional[str]
  keep_layout: bool
  group_lrs: dict = dataclasses.field(default_factory=dict)
  averaged_here: set = dataclasses.field(default_factory=set)
  shared_layout: str = ''

  def lr_sources(self, create, default=None) -> set:
    """The learning-rate source texts of a create site's def (one per branch)."""
    if self.multis.get(id(create)):
      return {call.sources.get('learning_rate', default) for *_, call in self.multis[id(create)]}
    if create.branches is not None:   # a branch's DefCall, or a MultiOptimizer's groups
      return {c.sources.get('learning_rate', default) for _, _, call in create.branches
              for c in ([g[-1] for g in call] if isinstance(call, list) else [call])}
    if id(create) in self.calls:
      return {self.calls[id(create)].sources.get('learning_rate', default)}
    return set()

  def multi_groups(self) -> Optional[list]:
    """The groups of the object's MultiOptimizer (or ``create(focus=...)``) create, or of the
    first MultiOptimizer one of its creates' branches is, or None."""
    branches = (call for c in self.creates for _, _, call in c.branches or ()
                if isinstance(call, list))
    return next((self.multis[id(c)] for c in self.creates if self.multis.get(id(c))),
                next(branches, None))

  def create_lr_texts(self) -> set:
    """The learning rates the object's creates set (one text per def)."""
    return {lr for c in self.creates for lr in self.lr_sources(c)}

  def literal_rate(self) -> bool:
    """Whether its creates set one learning rate, a literal: what an injected update that
    sets none can write at its site (``rules.fom004_apply``)."""
    lrs = self.create_lr_texts()
    return len(lrs) == 1 and None not in lrs and _optax_text.is_literal(next(iter(lrs)))


class Rule:
  """One rewrite. A rule module defines a subclass and ``RULE``, an instance of it."""
  code = ''
  title = ''
  kind = ''                   # ``Site.kind`` of the sites it rewrites
  rebuilds_statement = False  # rewrites a whole statement, rebuilt from its rewritten parts
  returns_optimizer = False   # its call's result is the optimizer, followed where it goes
  covers_its_node = False     # its node is read as a whole, never as an optimizer value
  # Planned only in a second pass over every file, made once a flax.optim use of the project is
  # rewritten (any rule, any file: ``_plan.make_plan``): FOM014, FOM018.
  after_the_project = False

  def match(self, unit: SourceFile, node: cst.CSTNode) -> Optional[Match]:
    """The site of the optimizer value ``node``'s use, when this rule rewrites it."""
    del unit, node
    return None

  def claims(self, site, plan: ObjectPlan) -> bool:
    """Whether this rule plans ``site`` (a site it matched, or one the analysis found)."""
    del plan
    return site.kind == self.kind

  def refusal(self, site, plan: ObjectPlan) -> Optional[Tuple[_refusals.Refusal, str]]:
    """Why this rule cannot rewrite ``site`` of this object (the refusal and its message), or
    None. Asked once per site the rule claims, after the analysis settled the object's own
    refusals and before any ``plan``: for a rewrite that depends on the whole object (its defs,
    its learning-rate mode), decided in the rule's module."""
    del site, plan
    return None

  def plan(self, site, plan: ObjectPlan) -> None:
    """Plans one site of an object that is rewritten: edits, imports, report record."""
    raise NotImplementedError(self.code)

  def plan_name(self, unit: SourceFile, node: cst.CSTNode, plan: FilePlan,
                records: List[Record]) -> bool:
    """Plans a legacy name (or import) no optimizer object covers; False if not its own."""
    del unit, node, plan, records
    return False

  def rewrite(self, updated: cst.CSTNode, data, context: Context) -> cst.CSTNode:
    """The new node for ``updated`` (the original with its children already rewritten)."""
    raise NotImplementedError(self.code)


def unshadowed(name: str, text: str) -> str:
  """``name``, with ``_`` appended until ``text`` does not mention it: a lambda parameter that
  shadows no name of the code written inside that lambda."""
  while re.search(rf'\b{name}\b', text):
    name += '_'
  return name


def text_of(node: cst.CSTNode) -> str:
  """The source text of a node of any tree (new nodes included)."""
  return cst.Module([]).code_for_node(node)


def member_of(unit: SourceFile, node: cst.CSTNode, name: str) -> Optional[cst.Attribute]:
  """``node.<name>`` when ``node``'s parent reads that attribute of it, else None."""
  parent = unit.parent(node)
  if isinstance(parent, cst.Attribute) and parent.value is node and parent.attr.value == name:
    return parent
  return None


def called_member(unit: SourceFile, node: cst.CSTNode, name: str) -> Optional[cst.Call]:
  """The call ``node.<name>(...)``, else None."""
  attribute = member_of(unit, node, name)
  call = unit.parent(attribute) if attribute is not None else None
  if isinstance(call, cst.Call) and call.func is attribute:
    return call
  return None
