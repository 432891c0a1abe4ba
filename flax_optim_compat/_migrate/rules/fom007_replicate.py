"""FOM007: ``optimizer.replicate()`` / ``.unreplicate()`` -> ``jax_utils.replicate`` /
``unreplicate``; the gradient average moves to the apply site under pmap (FOM004's
``pmean``, decided per object by the plan)."""
import dataclasses

import libcst as cst

from .. import _edits
from .. import _rule
from .._report import Record


@dataclasses.dataclass(frozen=True)
class ReplicateData:
  kind: str   # 'replicate' or 'unreplicate'


class Replicate(_rule.Rule):
  code = 'FOM007'
  title = ('optimizer.replicate() / .unreplicate() -> jax_utils.replicate / unreplicate, the '
           'gradient average moved to the apply site under pmap')
  kind = 'replicate'
  kinds = ('replicate', 'unreplicate')
  returns_optimizer = True

  def match(self, unit, node):
    for kind in self.kinds:
      call = _rule.called_member(unit, node, kind)
      if call is not None:
        return _rule.Match(kind, call)
    return None

  def claims(self, site, plan):
    return site.kind in self.kinds

  def plan(self, site, plan):
    file_plan = plan.files[site.unit.path]
    file_plan.edits[id(site.node)] = _rule.Edit(self, ReplicateData(site.kind))
    file_plan.needs.add(_edits.JAX_UTILS)
    plan.records.append(Record.of(site, 'rewritten', code=self.code,
                                  message=f'{site.unit.code(site.node)} -> '
                                          f'jax_utils.{site.kind}(...)'))

  def rewrite(self, updated, data, context):
    receiver = _rule.text_of(updated.func.value)
    rest = ''
    devices = next((a.value for a in updated.args if (a.keyword and a.keyword.value == 'devices')
                    or (a.keyword is None and a is updated.args[0])), None)
    if data.kind == 'replicate' and devices is not None:
      rest = f', devices={_rule.text_of(devices)}'
    return cst.parse_expression(f'{context.jax_utils}.{data.kind}({receiver}{rest})')


RULE = Replicate()
