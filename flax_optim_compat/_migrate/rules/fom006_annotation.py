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

  def plan_name(self, unit, node, plan, records):
    """``optim.Optimizer`` anywhere else in an annotation (``-> Tuple[optim.Optimizer,
    jnp.ndarray]``): a type the rewritten values have too."""
    if not (isinstance(node, (cst.Name, cst.Attribute)) and unit.legacy(node) == 'Optimizer'
            and unit.enclosing(node, (cst.Annotation,)) is not None):
      return False
    plan.edits[id(node)] = _rule.Edit(self)
    plan.needs.add(_edits.TRAIN_STATE)
    records.append(Record(unit.path, unit.line(node), self.code, 'rewritten', 'bit-exact',
                          unit.code(node)))
    return True

  def rewrite(self, updated, data, context):
    if not isinstance(updated, cst.Annotation):   # the class inside an annotation
      return cst.parse_expression(f'{context.train_state}.TrainState')
    head = annotation_head(updated.annotation)
    new = cst.parse_expression(f'{context.train_state}.TrainState')
    if head is updated.annotation:
      return updated.with_changes(annotation=new)
    return updated.deep_replace(head, new)


RULE = Annotation()
