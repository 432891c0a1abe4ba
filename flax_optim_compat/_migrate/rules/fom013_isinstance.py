"""FOM013: ``isinstance(optimizer, optim.Optimizer)`` -> ``isinstance(state,
train_state.TrainState)`` (the class argument is the site; the value is followed as any)."""
import libcst as cst

from .. import _edits
from .. import _rule
from .. import _unit
from .._report import Record


class IsInstance(_rule.Rule):
  code = 'FOM013'
  title = 'isinstance(optimizer, optim.Optimizer) -> isinstance(state, train_state.TrainState)'
  kind = 'isinstance'

  def match(self, unit, node):
    arg = unit.parent(node)
    call = unit.parent(arg) if isinstance(arg, cst.Arg) else None
    if (isinstance(call, cst.Call) and unit.names(call.func) & {'isinstance',
                                                                 'builtins.isinstance'}
        and len(call.args) == 2 and call.args[0] is arg
        and unit.legacy(call.args[1].value) in _unit.OPTIMIZER_CLASSES):
      return _rule.Match(self.kind, call.args[1].value)
    return None

  def plan(self, site, plan):
    file_plan = plan.files[site.unit.path]
    file_plan.edits[id(site.node)] = _rule.Edit(self)
    file_plan.needs.add(_edits.TRAIN_STATE)
    plan.records.append(Record.of(site, 'rewritten', code=self.code,
                                  message=site.unit.code(site.node)))

  def rewrite(self, updated, data, context):
    return cst.parse_expression(f'{context.train_state}.TrainState')


RULE = IsInstance()
