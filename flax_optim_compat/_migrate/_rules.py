"""The rewrite rules: each a small object with its code, what it does, and its examples.

The analysis (``_plan``) decides, per optimizer object, which original node each rule rewrites;
each rule then turns that node into its new form from the already-rewritten children (so a
``state.step`` inside a learning rate is rewritten before the ``apply_gradient`` around it).
What a rule needs to know about its node beyond the node itself is a small frozen dataclass
(``CreateData``, ``ApplyData``, ...), filled by the plan. Each rule's examples (complete
scripts before and after it, run both ways) live with the tests, outside the installed package.
"""
import dataclasses
from typing import Callable, Optional

import libcst as cst

from ._unit import annotation_head


@dataclasses.dataclass(frozen=True)
class NoData:
  """A rule that needs nothing but its node (FOM002, FOM003, FOM005, FOM006, FOM010, FOM011)."""


@dataclasses.dataclass(frozen=True)
class CreateData:
  """FOM001 / FOM008 on a create call, or on the def (or traversal) variable's value.

  Exactly one is set: ``tx`` (the optax expression of the create's ``tx=``; None keeps the
  receiver's own text, a variable that now holds the transform), ``def_tx`` (the def
  variable's new value), ``filter`` (a traversal variable's new value: its filter function).
  """
  tx: Optional[str] = None
  def_tx: Optional[str] = None
  filter: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class ApplyData:
  """FOM004 / FOM012: how the apply site sets the learning rate and averages the gradients.

  ``mode``: the object's learning-rate mode (``_learning_rate``: none / schedule / inject);
  ``lr_text``: the learning rate an ``inject`` site without an override sets (the create's);
  ``pmean``: the pmap axis the gradients are averaged over, or None; ``grads`` (FOM012 only):
  the fresh variable name of the gradient statement.
  """
  mode: str
  pmean: Optional[str] = None
  lr_text: Optional[str] = None
  grads: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class ReplicateData:
  """FOM007: ``'replicate'`` or ``'unreplicate'``."""
  kind: str


@dataclasses.dataclass(frozen=True)
class Context:
  """Names the rewritten file uses for what the rules emit."""
  train_state: str = 'train_state'   # the flax.training.train_state module
  jax_utils: str = 'jax_utils'       # the flax.jax_utils module


@dataclasses.dataclass(frozen=True)
class Rule:
  """One rewrite: ``rewrite(original, updated, data, context) -> new node``."""
  code: str
  title: str
  rewrite: Callable


def _code(node: cst.CSTNode) -> str:
  return cst.Module([]).code_for_node(node)


def _create(original, updated, data, ctx):
  if data.def_tx is not None:   # the def variable's value: ``opt_def = optim.Adam(...)``
    return cst.parse_expression(data.def_tx)
  positional = [a for a in updated.args if a.keyword is None]
  params = positional[0].value if positional else next(
      a.value for a in updated.args if a.keyword.value == 'target')
  tx = data.tx if data.tx is not None else _code(updated.func.value)
  return cst.parse_expression(
      f'{ctx.train_state}.TrainState.create(apply_fn=None, params={_code(params)}, tx={tx})')


def _multi(original, updated, data, ctx):
  if data.filter is not None:   # a traversal variable's value: ``t = ModelParamTraversal(f)``
    return cst.parse_expression(data.filter)
  if data.def_tx is not None:   # ``opt_def = optim.MultiOptimizer(...)``
    return cst.parse_expression(data.def_tx)
  params = next((a.value for a in updated.args if a.keyword is None),
                None) or next(a.value for a in updated.args if a.keyword.value == 'target')
  return cst.parse_expression(
      f'{ctx.train_state}.TrainState.create(apply_fn=None, params={_code(params)}, '
      f'tx={data.tx})')


def _compute_gradient(original, updated, data, ctx):
  """``loss, grad = opt.compute_gradient(f)`` / ``loss, aux, grad = ...`` (an Assign)."""
  call = updated.value
  receiver = _code(call.func.value)
  fn = _code(call.args[0].value)
  names = [_code(e.value) for e in updated.targets[0].target.elements]
  if len(names) == 2:
    return cst.parse_statement(
        f'{names[0]}, {names[1]} = jax.value_and_grad({fn})({receiver}.params)\n').body[0]
  return cst.parse_statement(
      f'({names[0]}, {names[1]}), {names[2]} = jax.value_and_grad({fn}, has_aux=True)'
      f'({receiver}.params)\n').body[0]


def _optimize(original, updated, data, ctx):
  """``new, loss[, aux] = opt.optimize(f, **overrides)`` (a statement line) -> two statements.

  The gradient statement is FOM011's; the apply statement is FOM004's rewrite of
  ``opt.apply_gradient(<grads>, **overrides)``, so a learning-rate override becomes the same
  schedule or injected value as it would there.
  """
  assign = updated.body[0]
  call = assign.value
  new, *outputs = [_code(e.value) for e in assign.targets[0].target.elements]
  grads = data.grads
  receiver = call.func.value
  fn = _code(call.args[0].value)
  if len(outputs) == 1:
    gradient = f'{outputs[0]}, {grads} = jax.value_and_grad({fn})({_code(receiver)}.params)'
  else:
    gradient = (f'({outputs[0]}, {outputs[1]}), {grads} = jax.value_and_grad({fn}, '
                f'has_aux=True)({_code(receiver)}.params)')
  apply_gradient = call.with_changes(
      func=call.func.with_changes(attr=cst.Name('apply_gradient')),
      args=[cst.Arg(cst.Name(grads)), *call.args[1:]])
  apply = f'{new} = {_code(_apply(None, apply_gradient, data, ctx))}'
  return cst.FlattenSentinel([
      cst.parse_statement(gradient + '\n').with_changes(leading_lines=updated.leading_lines),
      cst.parse_statement(apply + '\n').with_changes(
          trailing_whitespace=updated.trailing_whitespace)])


DYNAMIC_SCALE_ALIAS = 'dynamic_scale_lib'


def _dynamic_scale(original, updated, data, ctx):
  if isinstance(updated, cst.ImportFrom):   # the module under the alias the rule writes
    return updated.with_changes(module=cst.parse_expression('flax.training'))
  return cst.parse_expression(f'{DYNAMIC_SCALE_ALIAS}.DynamicScale')


def _target(original, updated, data, ctx):
  return updated.with_changes(attr=cst.Name('params'))


def _step(original, updated, data, ctx):
  return cst.Attribute(value=updated.value.value, attr=cst.Name('step'))


def _apply(original, updated, data, ctx):
  receiver = _code(updated.func.value)
  grads = next((a.value for a in updated.args if a.keyword is None), None)
  if grads is None:
    grads = next(a.value for a in updated.args if a.keyword.value == 'grads')
  grads = _code(grads)
  if data.pmean:
    grads = f'jax.lax.pmean({grads}, axis_name={data.pmean!r})'
  call = f'apply_gradients(grads={grads})'
  if data.mode == 'inject':
    lr = next((a.value for a in updated.args if a.keyword and a.keyword.value == 'learning_rate'),
              None)
    lr_text = _code(lr) if lr is not None else data.lr_text
    return cst.parse_expression(
        f'{receiver}.replace(opt_state={receiver}.opt_state._replace(hyperparams=dict('
        f'{receiver}.opt_state.hyperparams, learning_rate={lr_text}))).{call}')
  return cst.parse_expression(f'{receiver}.{call}')


def _replicate(original, updated, data, ctx):
  receiver = _code(updated.func.value)
  rest = ''
  devices = next((a.value for a in updated.args if (a.keyword and a.keyword.value == 'devices')
                  or (a.keyword is None and a is updated.args[0])), None)
  if data.kind == 'replicate' and devices is not None:
    rest = f', devices={_code(devices)}'
  return cst.parse_expression(f'{ctx.jax_utils}.{data.kind}({receiver}{rest})')


def _replace(original, updated, data, ctx):
  args = [a.with_changes(keyword=cst.Name('params'))
          if a.keyword is not None and a.keyword.value == 'target' else a for a in updated.args]
  return updated.with_changes(args=args)


def _annotation(original, updated, data, ctx):
  head = annotation_head(updated.annotation)
  new = cst.parse_expression(f'{ctx.train_state}.TrainState')
  if head is updated.annotation:
    return updated.with_changes(annotation=new)
  return updated.deep_replace(head, new)


def _isinstance(original, updated, data, ctx):
  return cst.parse_expression(f'{ctx.train_state}.TrainState')


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


REPLICATE = Rule('FOM007', 'optimizer.replicate() / .unreplicate() -> jax_utils.replicate / '
                 'unreplicate, the gradient average moved to the apply site under pmap',
                 _replicate)


MULTI = Rule('FOM008', 'optim.MultiOptimizer((traversal, def), ...) / create(focus=traversal) '
             '-> optax.multi_transform with labels from the traversals, unselected params '
             'optax.set_to_zero()', _multi)


DYNAMIC_SCALE = Rule('FOM010', 'optim.DynamicScale -> flax.training.dynamic_scale.DynamicScale '
                     '(imported as dynamic_scale_lib, as flax\'s examples do)', _dynamic_scale)


COMPUTE_GRADIENT = Rule('FOM011', 'loss, grad = optimizer.compute_gradient(loss_fn) -> '
                        'jax.value_and_grad(loss_fn)(state.params) (has_aux=True for three '
                        'targets)', _compute_gradient)


OPTIMIZE = Rule('FOM012', 'new, loss = optimizer.optimize(loss_fn, learning_rate=...) -> '
                'loss, grads = jax.value_and_grad(loss_fn)(state.params) (has_aux=True for three '
                'targets), then new = state.apply_gradients(grads=grads) as FOM004 writes it',
                _optimize)

ISINSTANCE = Rule('FOM013', 'isinstance(optimizer, optim.Optimizer) -> '
                  'isinstance(state, train_state.TrainState)', _isinstance)

all_rules = (CREATE, TARGET, STEP, APPLY, REPLACE, ANNOTATION, REPLICATE, MULTI, DYNAMIC_SCALE,
             COMPUTE_GRADIENT, OPTIMIZE, ISINSTANCE)
