"""FOM006: ``optim.Optimizer`` annotations and dataclass fields -> ``train_state.TrainState``."""
import libcst as cst

from .. import _edits
from .. import _rule
from .._report import Record
from .._unit import annotation_head


class Annotation(_rule.Rule):
  code = 'FOM006'
  title = 'optim.Optimizer annotations and dataclass fields -> train_state.TrainState'
  kind = 'annotation'   # the analysis finds these sites by the annotation's name

  def plan(self, site, plan):
    file_plan = plan.files[site.unit.path]
    file_plan.edits[id(site.node)] = _rule.Edit(self)
    file_plan.needs.add(_edits.TRAIN_STATE)
    plan.records.append(Record.of(site, 'rewritten', code=self.code,
                                  message=site.unit.code(site.node.annotation)))

  def rewrite(self, updated, data, context):
    head = annotation_head(updated.annotation)
    new = cst.parse_expression(f'{context.train_state}.TrainState')
    if head is updated.annotation:
      return updated.with_changes(annotation=new)
    return updated.deep_replace(head, new)


RULE = Annotation()
