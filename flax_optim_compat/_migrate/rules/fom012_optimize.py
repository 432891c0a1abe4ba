"""FOM012: ``new, loss[, aux] = optimizer.optimize(loss_fn, learning_rate=...)`` ->
``loss, grads = jax.value_and_grad(loss_fn)(state.params)`` (``has_aux=True`` for three
targets), then ``new = state.apply_gradients(grads=grads)`` as FOM004 writes it.

``optimize(loss_fn, **overrides)`` applies the gradient as ``apply_gradient`` does: the same
overrides, learning-rate mode and gradient average. Another shape of the call is refused
(FOM113) with what is wrong with it.
"""
import dataclasses
from typing import Optional

import libcst as cst

from .. import _edits
from .. import _refusals
from .. import _rule
from .. import _unit
from .._report import Record
from .._unit import SourceFile
from .fom004_apply import apply_data, apply_gradients, exactness, how


class Optimize(_rule.Rule):
  code = 'FOM012'
  title = ('new, loss = optimizer.optimize(loss_fn, learning_rate=...) -> loss, grads = '
           'jax.value_and_grad(loss_fn)(state.params) (has_aux=True for three targets), then '
           'new = state.apply_gradients(grads=grads) as FOM004 writes it')
  kind = 'optimize'
  rebuilds_statement = True

  def match(self, unit, node):
    attribute = _rule.member_of(unit, node, 'optimize')
    if attribute is None:
      return None
    grand = unit.parent(attribute)
    call = grand if isinstance(grand, cst.Call) and grand.func is attribute else attribute
    why = optimize_shape(unit, call)
    if why:
      return _rule.Match(self.kind, call, _refusals.OPTIMIZE, why)
    return _rule.Match(self.kind, call)

  def plan(self, site, plan):
    data = dataclasses.replace(apply_data(site, plan),
                               grads=_fresh_name(site.unit, site.node, 'grads'))
    file_plan = plan.files[site.unit.path]
    file_plan.edits[id(_edits.statement_of(site.unit, site.node))] = _rule.Edit(self, data)
    file_plan.needs.add(_edits.JAX)
    exact, note = exactness(site, plan)
    plan.records.append(Record.of(site, 'rewritten', code=self.code, exact=exact,
                                  message='optimize -> jax.value_and_grad, then apply_gradients'
                                  + how(plan.mode) + note))

  def rewrite(self, updated, data, context):
    """The statement line ``new, loss[, aux] = opt.optimize(f, **overrides)`` -> two."""
    text_of = _rule.text_of
    assign = updated.body[0]
    call = assign.value
    new, *outputs = [text_of(e.value) for e in assign.targets[0].target.elements]
    grads = data.grads
    receiver = call.func.value
    fn = text_of(call.args[0].value)
    if len(outputs) == 1:
      gradient = f'{outputs[0]}, {grads} = jax.value_and_grad({fn})({text_of(receiver)}.params)'
    else:
      gradient = (f'({outputs[0]}, {outputs[1]}), {grads} = jax.value_and_grad({fn}, '
                  f'has_aux=True)({text_of(receiver)}.params)')
    apply_gradient = call.with_changes(
        func=call.func.with_changes(attr=cst.Name('apply_gradient')),
        args=[cst.Arg(cst.Name(grads)), *call.args[1:]])
    apply = f'{new} = {text_of(apply_gradients(apply_gradient, data))}'
    return cst.FlattenSentinel([
        cst.parse_statement(gradient + '\n').with_changes(leading_lines=updated.leading_lines),
        cst.parse_statement(apply + '\n').with_changes(
            trailing_whitespace=updated.trailing_whitespace)])


RULE = Optimize()


def optimize_shape(unit: SourceFile, call: cst.CSTNode) -> Optional[str]:
  """Why ``call`` (an ``opt.optimize`` use) cannot be rewritten; None when it can.

  The rewrite splits ``new, loss[, aux] = opt.optimize(loss_fn, **overrides)`` into a
  ``jax.value_and_grad`` statement and an ``apply_gradients`` statement, so the call must be the
  whole value of a statement of its own, its first target a place for the new optimizer, and
  the second statement must not read what the first one assigns.
  """
  code = unit.code(call)
  if not isinstance(call, cst.Call):
    return f'{code} is not called'
  receiver = call.func.value
  args = call.args
  if not args or args[0].keyword is not None or any(a.star for a in args) or any(
      a.keyword is None for a in args[1:]):
    return f'{code}: not optimize(loss_fn[, name=value...])'
  if not _unit.plain_reference(receiver):
    return f'{code}: the optimizer is not a name or attribute'
  assign = unit.parent(call)
  line = unit.parent(assign)
  target = _unit.sole_target(assign)
  if not (isinstance(target, (cst.Tuple, cst.List))
          and isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1):
    return f'{code}: not the value of a statement new, loss[, aux] = ... of its own'
  elements = target.elements
  if any(isinstance(e, cst.StarredElement) for e in elements):
    return f'{code}: assigned to starred targets, not new, loss[, aux]'
  if len(elements) not in (2, 3):
    return f'{code}: assigned to {len(elements)} targets, not new, loss[, aux]'
  if not isinstance(elements[0].value, (cst.Name, cst.Attribute)) or _unit.is_module_like(
      unit, elements[0].value):
    return f'{code}: the new optimizer goes to {unit.code(elements[0].value)}'
  assigned = set().union(*(_unit.mentioned_names(unit, e.value) for e in elements[1:]))
  read = _unit.mentioned_names(unit, receiver).union(
      *(_unit.mentioned_names(unit, a.value) for a in args[1:]))
  if assigned & read:
    return (f'{code}: the optimizer or an override reads {", ".join(sorted(assigned & read))}, '
            'which the gradient statement would assign first')
  return None


def _fresh_name(unit, node, base) -> str:
  """``base``, or ``base_1``, ...: a variable name that nothing in ``node``'s scope mentions.

  The scope is the enclosing function (nested functions and comprehensions included, so no
  closure sees the new variable), or the whole module at module level.
  """
  scope = unit.enclosing(node, (cst.FunctionDef,)) or unit.module
  used = _unit.mentioned_names(unit, scope)
  name, i = base, 0
  while name in used:
    i += 1
    name = f'{base}_{i}'
  return name
