"""FOM016: ``optimizer.state_dict()`` -> legacy's state-dict layout, rebuilt from the TrainState.

Legacy's ``state_dict()`` is ``flax.serialization.to_state_dict(optimizer)``: ``{'target':
params, 'state': {'step': step, 'param_states': <one dict of the def's per-parameter fields per
parameter>}}`` (NeSF logs a histogram per flattened key). The same dict is built from the
TrainState: its params and step, and each per-parameter field from the optax state field that
holds it (Adam's ``grad_ema`` / ``grad_sq_ema`` are ``scale_by_adam``'s ``mu`` / ``nu``,
Momentum's ``momentum`` is ``trace``), found by name with ``optax.tree.get`` (one such field in
the state, wrapped in ``inject_hyperparams`` or chained with a weight decay alike). Only where
every def of the object is one of those (``fields_of``): any other def, a MultiOptimizer
(legacy's per-group tuple of states) or a create out of sight is refused at the read (FOM104).
An object made from defs of both kinds (NeSF's train state field, an Adam in training and a
Momentum in a test) gets the layout of the kind its state holds, told apart at run time by
the first optax field of each, which no other kind has (``optax.tree.get`` gives None where a
state has no such field).
"""
import dataclasses
from typing import Optional, Tuple

import libcst as cst

from .. import _edits
from .. import _refusals
from .. import _rule
from .. import _unit
from .._report import Record

# The legacy per-parameter fields of a def, in its state class's order, and the optax state
# field each is (the same accumulator: legacy and optax update it by the same formula).
FIELDS = {
    'Adam': (('grad_ema', 'mu'), ('grad_sq_ema', 'nu')),
    'Momentum': (('momentum', 'trace'),),
}
FLAX = _edits.Import('flax')
assert len({fields[0][1] for fields in FIELDS.values()}) == len(FIELDS)


@dataclasses.dataclass(frozen=True)
class Fields:
  kinds: tuple   # the ``FIELDS`` value of each kind of def the object is made from


def fields_of(project, creates) -> Tuple[Optional[tuple], str]:
  """``(kinds, '')`` where every create of the object (``creates``: its create sites) makes a
  def of a kind of ``FIELDS`` (``kinds``: their fields, one entry per kind), else
  ``(None, why)`` naming the def that blocks it."""
  if not creates:
    return None, 'the optimizer is created out of sight, so its def (and its fields) is unknown'
  found = set()
  for site in creates:
    if any(a.keyword is not None and a.keyword.value == 'focus' for a in site.node.args):
      return None, (f'its create at {_unit.at(site.unit, site.node)} has focus=, whose legacy '
                    'state holds one state per group')
    for unit, call in project.def_branches(site.unit, site.node.func.value) or ():
      name = unit.legacy(call.func)
      if name not in FIELDS:
        return None, (f'its def {unit.code(call.func)}(...) at {_unit.at(unit, call)} is '
                      'none of them')
      found.add(FIELDS[name])
  return tuple(sorted(found)), ''


class StateDict(_rule.Rule):
  code = 'FOM016'
  title = "optimizer.state_dict() -> {'target', 'state': {'step', 'param_states'}} rebuilt"
  kind = 'state_dict'

  def match(self, unit, node):
    call = _rule.called_member(unit, node, 'state_dict')
    if call is None or call.args:
      return None
    if not _unit.plain_reference(node):
      return _rule.Match(self.kind, call, _refusals.READ,
                         f'{unit.code(call)}: the rewrite reads the optimizer three times (its '
                         'params, step and optax state), so it needs a name or attribute')
    return _rule.Match(self.kind, call)

  def refusal(self, site, plan):
    """A read of legacy internals (FOM104) naming the def that blocks it, where some def of
    the object has no fields of ``FIELDS``."""
    fields, why = fields_of(plan.project, plan.creates)
    if fields is not None:
      return None
    return _refusals.READ, (
        f'reads {site.unit.code(site.node)} (legacy\'s state dict {{\'target\', \'state\': '
        f"{{'step', 'param_states'}}}} with its per-parameter names), which the rewrite rebuilds "
        f'from a TrainState only for {", ".join(sorted(FIELDS))}: {why}')

  def plan(self, site, plan):
    fields, _ = fields_of(plan.project, plan.creates)
    file_plan = plan.files[site.unit.path]
    file_plan.edits[id(site.node)] = _rule.Edit(self, Fields(fields))
    file_plan.needs.update({FLAX, _edits.JAX, _edits.OPTAX})
    plan.records.append(Record.of(site, 'rewritten', code=self.code,
                                  message=f'{site.unit.code(site.node)} -> legacy\'s state-dict '
                                          'layout, rebuilt from the TrainState'))

  def rewrite(self, updated, data, context):
    x = _rule.text_of(updated.func.value)

    def param_states(fields):
      names = [legacy for legacy, _ in fields]
      leaves = ', '.join(f"'{n}': {n}" for n in names)
      states = ', '.join(f"optax.tree.get({x}.opt_state, '{field}')" for _, field in fields)
      return f"jax.tree_util.tree_map(lambda {', '.join(names)}: {{{leaves}}}, {states})"
    *tried, last = data.kinds
    chosen = param_states(last)
    for fields in reversed(tried):
      chosen = (f"{param_states(fields)} if optax.tree.get({x}.opt_state, '{fields[0][1]}') "
                f"is not None else {chosen}")
    # Legacy's step is an int32 array from create on; a TrainState's is a Python int until a
    # compiled update returns one (an eager loop keeps it an int).
    text = (f"flax.serialization.to_state_dict({{'target': {x}.params, 'state': {{'step': "
            f"jax.numpy.asarray({x}.step, jax.numpy.int32), 'param_states': {chosen}}}}})")
    return cst.parse_expression(text)


RULE = StateDict()
