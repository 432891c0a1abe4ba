"""The rewrite rules: each a small object with its code, what it does, and its examples.

The analysis (``_plan``) decides, per optimizer object, which original node each rule rewrites;
each rule then turns that node into its new form from the already-rewritten children (so a
``state.step`` inside a learning rate is rewritten before the ``apply_gradient`` around it).
Every rule's ``examples`` are complete scripts, before and after: the unit tests check that
``migrate`` turns each ``before`` into its ``after`` exactly, and the run-both-ways tests run
``before`` on this package and ``after`` on plain optax and compare the trajectories within
``exact``.
"""
import dataclasses
from typing import Callable, NamedTuple, Tuple

import libcst as cst

from ._project import annotation_head


@dataclasses.dataclass(frozen=True)
class Context:
  """Names the rewritten file uses for what the rules emit."""
  train_state: str = 'train_state'   # the flax.training.train_state module


class Example(NamedTuple):
  """A complete script before and after the rule, and how closely their numbers agree."""
  name: str
  before: str
  after: str
  exact: str      # 'bit-exact' / '1e-6' / 'not exact'


@dataclasses.dataclass(frozen=True)
class Rule:
  """One rewrite: ``rewrite(original, updated, data, context) -> new node``."""
  code: str
  title: str
  rewrite: Callable
  examples: Tuple[Example, ...] = ()


def _code(node: cst.CSTNode) -> str:
  return cst.Module([]).code_for_node(node)


def _create(original, updated, data, ctx):
  if 'def_tx' in data:   # the def variable's value: ``opt_def = optim.Adam(...)``
    return cst.parse_expression(data['def_tx'])
  positional = [a for a in updated.args if a.keyword is None]
  params = positional[0].value if positional else next(
      a.value for a in updated.args if a.keyword.value == 'target')
  tx = data['tx'] if data['tx'] is not None else _code(updated.func.value)
  return cst.parse_expression(
      f'{ctx.train_state}.TrainState.create(apply_fn=None, params={_code(params)}, tx={tx})')


def _target(original, updated, data, ctx):
  return updated.with_changes(attr=cst.Name('params'))


def _step(original, updated, data, ctx):
  return cst.Attribute(value=updated.value.value, attr=cst.Name('step'))


def _apply(original, updated, data, ctx):
  receiver = _code(updated.func.value)
  grads = next((a.value for a in updated.args if a.keyword is None), None)
  if grads is None:
    grads = next(a.value for a in updated.args if a.keyword.value == 'grads')
  call = f'apply_gradients(grads={_code(grads)})'
  if data['mode'] == 'inject':
    lr = next((a.value for a in updated.args if a.keyword and a.keyword.value == 'learning_rate'),
              None)
    lr_text = _code(lr) if lr is not None else data['lr_text']
    return cst.parse_expression(
        f'{receiver}.replace(opt_state={receiver}.opt_state._replace(hyperparams=dict('
        f'{receiver}.opt_state.hyperparams, learning_rate={lr_text}))).{call}')
  return cst.parse_expression(f'{receiver}.{call}')


def _replace(original, updated, data, ctx):
  args = [a.with_changes(keyword=cst.Name('params'))
          if a.keyword is not None and a.keyword.value == 'target' else a for a in updated.args]
  return updated.with_changes(args=args)


def _annotation(original, updated, data, ctx):
  from ._project import _annotation_head  # pylint: disable=g-import-not-at-top
  head = _annotation_head(updated.annotation)
  new = cst.parse_expression(f'{ctx.train_state}.TrainState')
  if head is updated.annotation:
    return updated.with_changes(annotation=new)
  return updated.deep_replace(head, new)


CREATE = Rule('FOM001', 'optim.X(...).create(params) -> TrainState.create(apply_fn=None, '
              'params=params, tx=<optax>)', _create)
TARGET = Rule('FOM002', 'optimizer.target -> state.params', _target)
STEP = Rule('FOM003', 'optimizer.state.step -> state.step', _step)
APPLY = Rule('FOM004', 'optimizer.apply_gradient(g, learning_rate=...) -> '
             'state.apply_gradients(grads=g), the learning rate as a schedule of the step or '
             'injected per step', _apply)
REPLACE = Rule('FOM005', 'optimizer.replace(target=p) -> state.replace(params=p)', _replace)
ANNOTATION = Rule('FOM006', 'optim.Optimizer annotations and dataclass fields -> '
                  'train_state.TrainState', _annotation)

all_rules = (CREATE, TARGET, STEP, APPLY, REPLACE, ANNOTATION)
by_code = {rule.code: rule for rule in all_rules}
