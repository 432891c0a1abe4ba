"""FOM003: ``optimizer.state.step`` -> ``state.step``."""
import libcst as cst

from .. import _rule
from .._report import Record


class Step(_rule.Rule):
  code = 'FOM003'
  title = 'optimizer.state.step -> state.step'
  kind = 'step'
  covers_its_node = True   # ``optimizer.state.step`` is read as a whole, never as a value

  def match(self, unit, node):
    state = _rule.member_of(unit, node, 'state')
    step = _rule.member_of(unit, state, 'step') if state is not None else None
    return _rule.Match(self.kind, step) if step is not None else None

  def plan(self, site, plan):
    plan.files[site.unit.path].edits[id(site.node)] = _rule.Edit(self)
    plan.records.append(Record.of(site, 'rewritten', code=self.code,
                                  message=site.unit.code(site.node)))

  def rewrite(self, updated, data, context):
    return cst.Attribute(value=updated.value.value, attr=cst.Name('step'))


RULE = Step()
