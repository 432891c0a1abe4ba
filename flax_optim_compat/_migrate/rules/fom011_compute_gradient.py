"""FOM011: ``loss, grad = optimizer.compute_gradient(loss_fn)`` ->
``loss, grad = jax.value_and_grad(loss_fn)(state.params)`` (``has_aux=True`` for three targets).

Only the statement ``a, b[, c] = opt.compute_gradient(loss_fn)`` matches; another use of
``compute_gradient`` is one the analysis cannot follow (FOM107).
"""
import libcst as cst

from .. import _edits
from .. import _rule
from .. import _unit
from .._report import Record


class ComputeGradient(_rule.Rule):
  code = 'FOM011'
  title = ('loss, grad = optimizer.compute_gradient(loss_fn) -> '
           'jax.value_and_grad(loss_fn)(state.params) (has_aux=True for three targets)')
  kind = 'compute_gradient'
  rebuilds_statement = True

  def match(self, unit, node):
    call = _rule.called_member(unit, node, 'compute_gradient')
    if call is None:
      return None
    assign = unit.parent(call)
    target = _unit.sole_target(assign)
    if (isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) in (2, 3)
        and len(call.args) == 1 and call.args[0].keyword is None):
      return _rule.Match(self.kind, call)
    return None

  def plan(self, site, plan):
    file_plan = plan.files[site.unit.path]
    file_plan.edits[id(site.unit.parent(site.node))] = _rule.Edit(self)
    file_plan.needs.add(_edits.JAX)
    plan.records.append(Record.of(site, 'rewritten', code=self.code,
                                  message='compute_gradient -> jax.value_and_grad'))

  def rewrite(self, updated, data, context):
    """``loss, grad = opt.compute_gradient(f)`` / ``loss, aux, grad = ...`` (an Assign)."""
    text_of = _rule.text_of
    call = updated.value
    receiver = text_of(call.func.value)
    fn = text_of(call.args[0].value)
    names = [text_of(e.value) for e in updated.targets[0].target.elements]
    if len(names) == 2:
      return cst.parse_statement(
          f'{names[0]}, {names[1]} = jax.value_and_grad({fn})({receiver}.params)\n').body[0]
    return cst.parse_statement(
        f'({names[0]}, {names[1]}), {names[2]} = jax.value_and_grad({fn}, has_aux=True)'
        f'({receiver}.params)\n').body[0]


RULE = ComputeGradient()
