"""FOM005: ``optimizer.replace(target=p)`` -> ``state.replace(params=p)``."""
import libcst as cst

from .. import _rule
from .._report import Record


class Replace(_rule.Rule):
  code = 'FOM005'
  title = 'optimizer.replace(target=p) -> state.replace(params=p)'
  kind = 'replace'
  returns_optimizer = True

  def match(self, unit, node):
    call = _rule.called_member(unit, node, 'replace')
    return _rule.Match(self.kind, call) if call is not None else None

  def plan(self, site, plan):
    plan.files[site.unit.path].edits[id(site.node)] = _rule.Edit(self)
    plan.records.append(Record.of(site, 'rewritten', code=self.code,
                                  message=site.unit.code(site.node)))

  def rewrite(self, updated, data, context):
    args = [a.with_changes(keyword=cst.Name('params'))
            if a.keyword is not None and a.keyword.value == 'target' else a for a in updated.args]
    return updated.with_changes(args=args)


RULE = Replace()
