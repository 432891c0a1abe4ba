"""FOM005: ``optimizer.replace(target=p)`` -> ``state.replace(params=p)``."""
import libcst as cst

from .. import _refusals
from .. import _rule
from .._report import Record


class Replace(_rule.Rule):
  code = 'FOM005'
  title = 'optimizer.replace(target=p) -> state.replace(params=p)'
  kind = 'replace'
  returns_optimizer = True

  def match(self, unit, node):
    call = _rule.called_member(unit, node, 'replace')
    if call is None:
      return None
    # Legacy's Optimizer is a dataclass of ``optimizer_def``, ``state`` and ``target``; only the
    # target has a TrainState field to go to (``TrainState.replace(state=...)`` raises).
    internal = [f'{a.keyword.value}=...' if a.keyword is not None else
                f'{a.star}{unit.code(a.value)}' for a in call.args
                if a.keyword is None or a.keyword.value != 'target']
    if internal:
      return _rule.Match(self.kind, call, _refusals.READ,
                         f'replace({", ".join(internal)}) sets legacy internals a TrainState '
                         'does not have')
    return _rule.Match(self.kind, call)

  def plan(self, site, plan):
    plan.files[site.unit.path].edits[id(site.node)] = _rule.Edit(self)
    plan.records.append(Record.of(site, 'rewritten', code=self.code,
                                  message=site.unit.code(site.node)))

  def rewrite(self, updated, data, context):
    args = [a.with_changes(keyword=cst.Name('params'))
            if a.keyword is not None and a.keyword.value == 'target' else a for a in updated.args]
    return updated.with_changes(args=args)


RULE = Replace()
