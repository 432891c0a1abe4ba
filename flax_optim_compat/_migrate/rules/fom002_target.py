"""FOM002: ``optimizer.target`` -> ``state.params``."""
import libcst as cst

from .. import _rule
from .._report import Record


class Target(_rule.Rule):
  code = 'FOM002'
  title = 'optimizer.target -> state.params'
  kind = 'target'

  def match(self, unit, node):
    attribute = _rule.member_of(unit, node, 'target')
    return _rule.Match(self.kind, attribute) if attribute is not None else None

  def plan(self, site, plan):
    plan.files[site.unit.path].edits[id(site.node)] = _rule.Edit(self)
    plan.records.append(Record.of(site, 'rewritten', code=self.code,
                                  message=site.unit.code(site.node)))

  def rewrite(self, updated, data, context):
    return updated.with_changes(attr=cst.Name('params'))


RULE = Target()
