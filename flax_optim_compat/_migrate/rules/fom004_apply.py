"""FOM004: ``optimizer.apply_gradient(g, learning_rate=...)`` -> ``state.apply_gradients(grads=g)``.

The learning rate is the object's (``ObjectPlan.mode``): the def's own, a schedule of the step
in the transform, or injected (``opt_state.hyperparams``) and set at each apply site; under a
pmap of a replicated optimizer the gradients are averaged first (``ObjectPlan.pmeans``).
"""
import dataclasses
from typing import Optional, Tuple

import libcst as cst

from .. import _edits
from .._unit import accesses
from .. import _rule
from .._report import Record
from .fom015_group_hyper_params import key as group_key, lr_texts as group_lr_texts
from .fom015_group_hyper_params import without_groups as group_without_groups


@dataclasses.dataclass(frozen=True)
class ApplyData:
  """How the apply site sets the learning rate and averages the gradients.

  ``mode``: the object's learning-rate mode (``_learning_rate``: none / schedule / inject);
  ``lr_text``: the learning rate an ``inject`` site without an override sets (the create's);
  ``pmean``: the pmap axis the gradients are averaged over, or None; ``grads`` (FOM012 only):
  the fresh variable name of the gradient statement; ``groups`` (a MultiOptimizer whose
  learning rates are injected, one per group): each group's own learning rate, which a site
  that does not override it sets.
  """
  mode: str
  pmean: Optional[str] = None
  lr_text: Optional[str] = None
  grads: Optional[str] = None
  groups: Tuple[Optional[str], ...] = ()
  every_key: bool = False


_HOW = {'schedule': ' (learning rate from the schedule in tx)',
        'inject': ' (learning rate set in opt_state.hyperparams)'}


def apply_data(site, plan) -> ApplyData:
  """The data of an apply (or optimize) site, and the imports its rewrite needs."""
  lr_text, groups, every_key = None, (), False
  multi = plan.multi_groups()
  if plan.mode == 'inject' and plan.group_lrs and multi is not None:
    groups = tuple(call.sources.get('learning_rate') for *_, call in multi)
    every_key = group_without_groups(plan)
  elif plan.mode == 'inject' and plan.overrides[id(site)] is None:
    lr_text = next(iter(plan.create_lr_texts()))
  data = ApplyData(plan.mode, pmean=plan.pmeans.get(id(site)), lr_text=lr_text, groups=groups,
                   every_key=every_key)
  needs = plan.files[site.unit.path].needs
  if data.pmean:
    needs.add(_edits.JAX)
  if plan.mode != 'none':
    needs.add(_edits.JNP if plan.mode == 'inject' else _edits.OPTAX)
  return data


def how(mode: str) -> str:
  """How the rewritten site sets the learning rate, for the report."""
  return _HOW.get(mode, '')


# Measured by the rules' examples: under jit / pmap the update compiles to the same numbers
# (bit-exact); run eagerly, optax's update runs op by op while legacy's step runs as one
# compiled function, and XLA's fusion rounds a few ops differently (up to 4.8e-7 over 20 steps
# of values of order 1). The claim is per update: run both ways on real programs, one eager
# update differed by 1 ulp, and training carried it further (td3-jax: 1e-5 relative on one
# parameter after 2 steps; an adaptive ODE solver's loss: 7.9e-3 after 5;
# tools/corpus/results/both_ways-2026-11-29.md), so the note says so.
# What the analysis saw is what the note says: a step compiled where it cannot see (through a
# gin parameter, as dycheck's) is taken as run eagerly, the weaker claim.
EAGER = ('1e-6', '; taken as run eagerly (the given files do not reach this step only through '
         'jax.jit or jax.pmap): optax updates op by op where legacy compiled its step, so each '
         'update agrees within a relative 1e-6 (the last bits may differ) and later steps can '
         'amplify that as training amplifies any rounding (compiled, the two agree bit for bit)')


# A replicated optimizer's step that averages its grads itself: no second pmean is written
# (the plain optimizer's step, legacy averaged once), so where the replicated optimizer reaches
# it the update is legacy's but for the last bits (the rule FOM007's example
# replicate_step_averages: 1.9e-6 over 20 Adam steps of losses near 30).
AVERAGED_HERE = ('1e-6', '; this step averages its grads itself and the optimizer is '
                 'replicate()d: where the replicated optimizer takes this step legacy averaged '
                 'them again, which only moves the last bits')


def exactness(site, plan):
  """(the exactness the examples measured for this site's shape, a note for the report)."""
  if id(site) in plan.averaged_here:
    return AVERAGED_HERE
  if plan.project.is_compiled(site.unit, site.node):
    return 'bit-exact', ''
  return EAGER


class Apply(_rule.Rule):
  code = 'FOM004'
  title = ('optimizer.apply_gradient(g, learning_rate=...) -> state.apply_gradients(grads=g), '
           'the learning rate as a schedule of the step or injected per step')
  kind = 'apply'
  returns_optimizer = True

  def match(self, unit, node):
    call = _rule.called_member(unit, node, 'apply_gradient')
    return _rule.Match(self.kind, call) if call is not None else None

  def plan(self, site, plan):
    data = apply_data(site, plan)
    plan.files[site.unit.path].edits[id(site.node)] = _rule.Edit(self, data)
    if plan.mode == 'schedule':
      for statement in unused_lr_statements(site, plan):
        plan.files[site.unit.path].edits[id(statement)] = _rule.Edit(self, Dropped())
    exact, note = exactness(site, plan)
    if data.every_key and id(site) in plan.group_lrs:
      note += ('; where the optimizer is created from its def without groups, this update '
               'raises TypeError, as legacy raised at hyper_params[i]')
    plan.records.append(Record.of(site, 'rewritten', code=self.code, exact=exact,
                                  message='apply_gradient -> apply_gradients' + how(plan.mode)
                                  + note))

  def rewrite(self, updated, data, context):
    if isinstance(data, Dropped):
      return cst.RemoveFromParent()
    return apply_gradients(updated, data)


@dataclasses.dataclass(frozen=True)
class Dropped:
  """A statement that only computed a learning rate the schedule now computes: it goes."""


def unused_lr_statements(site, plan) -> list:
  """The statements ``name = value`` whose variable only the dropped ``learning_rate=`` of the
  object's apply sites read (directly, or through another such statement): a schedule in the
  transform computes the learning rate now, and the rewrite leaves no variable unused that it
  made unused (``lr = lr_fn(step)``, then ``step = optimizer.state.step`` feeding only it)."""
  unit, project = site.unit, plan.project
  dropped = [lr for lr in plan.overrides.values() if lr is not None]
  removed = {}

  def inside(node, roots) -> bool:
    while node is not None:
      if any(node is r for r in roots):
        return True
      node = unit.parent(node)
    return False

  def consider(name):
    values = project.assignment_values(unit, name)
    uses = accesses(unit, name)
    if not values or len(values) != 1 or not uses:
      return
    statement = unit.parent(unit.parent(values[0]))
    if not (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1):
      return
    if id(statement) in removed or not all(
        inside(u, dropped + list(removed.values())) for u in uses):
      return
    block = unit.parent(statement)
    if not isinstance(block, (cst.IndentedBlock, cst.Module)) or len(
        [s for s in block.body if id(s) not in removed]) < 2:
      return
    removed[id(statement)] = statement
    for node in _names_in(values[0]):
      consider(node)

  for arg in site.node.args:
    if arg.keyword is not None and arg.keyword.value == 'learning_rate':
      for node in _names_in(arg.value):
        consider(node)
  return list(removed.values())


def _names_in(node):
  if isinstance(node, cst.Name):
    yield node
  for child in node.children:
    yield from _names_in(child)


def apply_gradients(updated: cst.Call, data: ApplyData) -> cst.BaseExpression:
  """``receiver.apply_gradient(g, learning_rate=...)`` (rewritten children) as TrainState's."""
  text_of = _rule.text_of
  receiver = text_of(updated.func.value)
  grads = next((a.value for a in updated.args if a.keyword is None), None)
  if grads is None:
    grads = next(a.value for a in updated.args if a.keyword.value == 'grads')
  grads = text_of(grads)
  if data.pmean:
    grads = f'jax.lax.pmean({grads}, axis_name={data.pmean!r})'
  call = f'apply_gradients(grads={grads})'
  if data.mode == 'inject':
    lr = next((a.value for a in updated.args if a.keyword and a.keyword.value == 'learning_rate'),
              None)
    if not data.groups:
      sets = f'learning_rate={text_of(lr) if lr is not None else data.lr_text}'
    elif lr is not None and data.every_key:   # a def without groups injects learning_rate
      sets = f'**dict.fromkeys({receiver}.opt_state.hyperparams, {text_of(lr)})'
    elif lr is not None:   # legacy sets every group's learning rate
      keys = tuple(group_key(i) for i in range(len(data.groups)))
      sets = f'**dict.fromkeys({keys!r}, {text_of(lr)})'
    else:
      texts = group_lr_texts(updated, data.groups) or data.groups
      sets = ', '.join(f'{group_key(i)}={text}' for i, text in enumerate(texts))
    return cst.parse_expression(
        f'{receiver}.replace(opt_state={receiver}.opt_state._replace(hyperparams=dict('
        f'{receiver}.opt_state.hyperparams, {sets}))).{call}')
  return cst.parse_expression(f'{receiver}.{call}')


RULE = Apply()
