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
  jax_utils: str = 'jax_utils'       # the flax.jax_utils module


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


def _multi(original, updated, data, ctx):
  if 'filter' in data:   # a traversal variable's value: ``t = optim.ModelParamTraversal(f)``
    return cst.parse_expression(data['filter'])
  if 'def_tx' in data:   # ``opt_def = optim.MultiOptimizer(...)``
    return cst.parse_expression(data['def_tx'])
  params = next((a.value for a in updated.args if a.keyword is None),
                None) or next(a.value for a in updated.args if a.keyword.value == 'target')
  return cst.parse_expression(
      f'{ctx.train_state}.TrainState.create(apply_fn=None, params={_code(params)}, '
      f'tx={data["tx"]})')


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
  grads = data['grads']
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


def _dynamic_scale(original, updated, data, ctx):
  return cst.parse_expression('dynamic_scale_lib.DynamicScale')


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
  if data.get('pmean'):
    grads = f'jax.lax.pmean({grads}, axis_name={data["pmean"]!r})'
  call = f'apply_gradients(grads={grads})'
  if data['mode'] == 'inject':
    lr = next((a.value for a in updated.args if a.keyword and a.keyword.value == 'learning_rate'),
              None)
    lr_text = _code(lr) if lr is not None else data['lr_text']
    return cst.parse_expression(
        f'{receiver}.replace(opt_state={receiver}.opt_state._replace(hyperparams=dict('
        f'{receiver}.opt_state.hyperparams, learning_rate={lr_text}))).{call}')
  return cst.parse_expression(f'{receiver}.{call}')


def _replicate(original, updated, data, ctx):
  receiver = _code(updated.func.value)
  rest = ''
  devices = next((a.value for a in updated.args if (a.keyword and a.keyword.value == 'devices')
                  or (a.keyword is None and a is updated.args[0])), None)
  if data['kind'] == 'replicate' and devices is not None:
    rest = f', devices={_code(devices)}'
  return cst.parse_expression(f'{ctx.jax_utils}.{data["kind"]}({receiver}{rest})')


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


_CREATE_ADAMW = Example(
    'create_adamw',
    before='''\
import json

import jax
import jax.numpy as jnp
from flax import optim


def loss_fn(params):
  return jnp.sum((params['w'] - 1.0) ** 2) + jnp.sum(params['b'] ** 2)


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
  optimizer = optim.Adam(0.05, beta2=0.99, weight_decay=1e-3).create(params)
  losses = []
  for _ in range(20):
    loss, grads = jax.value_and_grad(loss_fn)(optimizer.target)
    optimizer = optimizer.apply_gradient(grads)
    losses.append(float(loss))
  print(json.dumps(losses))


if __name__ == '__main__':
  main()
''',
    after='''\
import json

import jax
import jax.numpy as jnp
import optax
from flax.training import train_state


def loss_fn(params):
  return jnp.sum((params['w'] - 1.0) ** 2) + jnp.sum(params['b'] ** 2)


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
  optimizer = train_state.TrainState.create(apply_fn=None, params=params, tx=optax.adamw(learning_rate=0.05, b1=0.9, b2=0.99, eps=1e-08, weight_decay=1e-3))
  losses = []
  for _ in range(20):
    loss, grads = jax.value_and_grad(loss_fn)(optimizer.params)
    optimizer = optimizer.apply_gradients(grads=grads)
    losses.append(float(loss))
  print(json.dumps(losses))


if __name__ == '__main__':
  main()
''',
    exact='1e-6')

_DEF_VARIABLE_JIT = Example(
    'def_variable_jit',
    before='''\
import json

import jax
import jax.numpy as jnp
from flax import optim


def loss_fn(params):
  return jnp.sum((params['w'] - 1.0) ** 2) + jnp.sum(params['b'] ** 2)


def create_optimizer(params, learning_rate):
  optimizer_def = optim.Momentum(learning_rate, nesterov=True)
  return optimizer_def.create(params)


@jax.jit
def train_step(optimizer):
  loss, grads = jax.value_and_grad(loss_fn)(optimizer.target)
  optimizer = optimizer.apply_gradient(grads)
  return optimizer, loss


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
  optimizer = create_optimizer(params, 0.05)
  losses = []
  for _ in range(20):
    optimizer, loss = train_step(optimizer)
    losses.append(float(loss))
  print(json.dumps(losses))


if __name__ == '__main__':
  main()
''',
    after='''\
import json

import jax
import jax.numpy as jnp
import optax
from flax.training import train_state


def loss_fn(params):
  return jnp.sum((params['w'] - 1.0) ** 2) + jnp.sum(params['b'] ** 2)


def create_optimizer(params, learning_rate):
  optimizer_def = optax.sgd(learning_rate=learning_rate, momentum=0.9, nesterov=True)
  return train_state.TrainState.create(apply_fn=None, params=params, tx=optimizer_def)


@jax.jit
def train_step(optimizer):
  loss, grads = jax.value_and_grad(loss_fn)(optimizer.params)
  optimizer = optimizer.apply_gradients(grads=grads)
  return optimizer, loss


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
  optimizer = create_optimizer(params, 0.05)
  losses = []
  for _ in range(20):
    optimizer, loss = train_step(optimizer)
    losses.append(float(loss))
  print(json.dumps(losses))


if __name__ == '__main__':
  main()
''',
    exact='bit-exact')

CREATE = Rule('FOM001', 'optim.X(...).create(params) -> TrainState.create(apply_fn=None, '
              'params=params, tx=<optax>)', _create,
              (_CREATE_ADAMW, _DEF_VARIABLE_JIT,))
_REPLACE_TARGET = Example(
    'replace_target',
    before='''\
import json

import jax
import jax.numpy as jnp
from flax import optim


def loss_fn(params):
  return jnp.sum((params['w'] - 1.0) ** 2) + jnp.sum(params['b'] ** 2)


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
  optimizer = optim.Adam(learning_rate=0.05).create(params)
  losses = []
  for step in range(20):
    if step == 10:
      optimizer = optimizer.replace(
          target=jax.tree_util.tree_map(lambda p: 0.5 * p, optimizer.target))
    loss, grads = jax.value_and_grad(loss_fn)(optimizer.target)
    optimizer = optimizer.apply_gradient(grads)
    losses.append(float(loss))
  print(json.dumps(losses))


if __name__ == '__main__':
  main()
''',
    after='''\
import json

import jax
import jax.numpy as jnp
import optax
from flax.training import train_state


def loss_fn(params):
  return jnp.sum((params['w'] - 1.0) ** 2) + jnp.sum(params['b'] ** 2)


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
  optimizer = train_state.TrainState.create(apply_fn=None, params=params, tx=optax.adam(learning_rate=0.05, b1=0.9, b2=0.999, eps=1e-08))
  losses = []
  for step in range(20):
    if step == 10:
      optimizer = optimizer.replace(
          params=jax.tree_util.tree_map(lambda p: 0.5 * p, optimizer.params))
    loss, grads = jax.value_and_grad(loss_fn)(optimizer.params)
    optimizer = optimizer.apply_gradients(grads=grads)
    losses.append(float(loss))
  print(json.dumps(losses))


if __name__ == '__main__':
  main()
''',
    exact='1e-6')

TARGET = Rule('FOM002', 'optimizer.target -> state.params', _target,
              (_REPLACE_TARGET,))
_STEP_READ = Example(
    'step_read',
    before='''\
import json

import jax
import jax.numpy as jnp
from flax import optim


def loss_fn(params):
  return jnp.sum((params['w'] - 1.0) ** 2) + jnp.sum(params['b'] ** 2)


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
  optimizer = optim.GradientDescent(learning_rate=0.1).create(params)
  trajectory = []
  while optimizer.state.step < 20:
    loss, grads = jax.value_and_grad(loss_fn)(optimizer.target)
    optimizer = optimizer.apply_gradient(grads)
    trajectory.extend([float(loss), float(optimizer.state.step)])
  print(json.dumps(trajectory))


if __name__ == '__main__':
  main()
''',
    after='''\
import json

import jax
import jax.numpy as jnp
import optax
from flax.training import train_state


def loss_fn(params):
  return jnp.sum((params['w'] - 1.0) ** 2) + jnp.sum(params['b'] ** 2)


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
  optimizer = train_state.TrainState.create(apply_fn=None, params=params, tx=optax.sgd(learning_rate=0.1))
  trajectory = []
  while optimizer.step < 20:
    loss, grads = jax.value_and_grad(loss_fn)(optimizer.params)
    optimizer = optimizer.apply_gradients(grads=grads)
    trajectory.extend([float(loss), float(optimizer.step)])
  print(json.dumps(trajectory))


if __name__ == '__main__':
  main()
''',
    exact='1e-6')

STEP = Rule('FOM003', 'optimizer.state.step -> state.step', _step,
            (_STEP_READ,))
_LR_SCHEDULE_OFFSET = Example(
    'lr_schedule_offset',
    before='''\
import json

import jax
import jax.numpy as jnp
from flax import optim


def loss_fn(params):
  return jnp.sum((params['w'] - 1.0) ** 2) + jnp.sum(params['b'] ** 2)


def learning_rate_fn(step):
  return 0.1 * jnp.minimum(1.0, step / 5.0)


@jax.jit
def train_step(optimizer):
  loss, grads = jax.value_and_grad(loss_fn)(optimizer.target)
  lr = learning_rate_fn(optimizer.state.step + 1)
  optimizer = optimizer.apply_gradient(grads, learning_rate=lr)
  return optimizer, loss


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
  optimizer = optim.Adam(learning_rate=0.1).create(params)
  losses = []
  for _ in range(20):
    optimizer, loss = train_step(optimizer)
    losses.append(float(loss))
  print(json.dumps(losses))


if __name__ == '__main__':
  main()
''',
    after='''\
import json

import jax
import jax.numpy as jnp
import optax
from flax.training import train_state


def loss_fn(params):
  return jnp.sum((params['w'] - 1.0) ** 2) + jnp.sum(params['b'] ** 2)


def learning_rate_fn(step):
  return 0.1 * jnp.minimum(1.0, step / 5.0)


@jax.jit
def train_step(optimizer):
  loss, grads = jax.value_and_grad(loss_fn)(optimizer.params)
  lr = learning_rate_fn(optimizer.step + 1)
  optimizer = optimizer.apply_gradients(grads=grads)
  return optimizer, loss


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
  optimizer = train_state.TrainState.create(apply_fn=None, params=params, tx=optax.adam(learning_rate=lambda count: learning_rate_fn(count + 1), b1=0.9, b2=0.999, eps=1e-08))
  losses = []
  for _ in range(20):
    optimizer, loss = train_step(optimizer)
    losses.append(float(loss))
  print(json.dumps(losses))


if __name__ == '__main__':
  main()
''',
    exact='bit-exact')

_LR_INJECTED = Example(
    'lr_injected',
    before='''\
import json

import jax
import jax.numpy as jnp
from flax import optim


def loss_fn(params):
  return jnp.sum((params['w'] - 1.0) ** 2) + jnp.sum(params['b'] ** 2)


@jax.jit
def train_step(optimizer, lr):
  loss, grads = jax.value_and_grad(loss_fn)(optimizer.target)
  optimizer = optimizer.apply_gradient(grads, learning_rate=lr)
  return optimizer, loss


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
  optimizer = optim.Momentum(beta=0.8).create(params)
  losses = []
  for epoch in range(4):
    for _ in range(5):
      optimizer, loss = train_step(optimizer, 0.1 * 0.5 ** epoch)
      losses.append(float(loss))
  print(json.dumps(losses))


if __name__ == '__main__':
  main()
''',
    after='''\
import json

import jax
import jax.numpy as jnp
import optax
from flax.training import train_state


def loss_fn(params):
  return jnp.sum((params['w'] - 1.0) ** 2) + jnp.sum(params['b'] ** 2)


@jax.jit
def train_step(optimizer, lr):
  loss, grads = jax.value_and_grad(loss_fn)(optimizer.params)
  optimizer = optimizer.replace(opt_state=optimizer.opt_state._replace(hyperparams=dict(optimizer.opt_state.hyperparams, learning_rate=lr))).apply_gradients(grads=grads)
  return optimizer, loss


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
  optimizer = train_state.TrainState.create(apply_fn=None, params=params, tx=optax.inject_hyperparams(optax.sgd, hyperparam_dtype=jnp.float32)(learning_rate=0.0, momentum=0.8, nesterov=False))
  losses = []
  for epoch in range(4):
    for _ in range(5):
      optimizer, loss = train_step(optimizer, 0.1 * 0.5 ** epoch)
      losses.append(float(loss))
  print(json.dumps(losses))


if __name__ == '__main__':
  main()
''',
    exact='bit-exact')

APPLY = Rule('FOM004', 'optimizer.apply_gradient(g, learning_rate=...) -> '
             'state.apply_gradients(grads=g), the learning rate as a schedule of the step or '
             'injected per step', _apply,
             (_LR_SCHEDULE_OFFSET, _LR_INJECTED,))
REPLACE = Rule('FOM005', 'optimizer.replace(target=p) -> state.replace(params=p)', _replace,
               (_REPLACE_TARGET,))
_DATACLASS_FIELD = Example(
    'dataclass_field',
    before='''\
import json
from typing import Any

import flax
import jax
import jax.numpy as jnp
from flax import optim


@flax.struct.dataclass
class TrainState:
  step: int
  optimizer: optim.Optimizer
  model_state: Any


def loss_fn(params):
  return jnp.sum((params['w'] - 1.0) ** 2) + jnp.sum(params['b'] ** 2)


@jax.jit
def train_step(state: TrainState):
  optimizer = state.optimizer
  loss, grads = jax.value_and_grad(loss_fn)(optimizer.target)
  new_optimizer = optimizer.apply_gradient(grads)
  return state.replace(step=state.step + 1, optimizer=new_optimizer), loss


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
  optimizer = optim.RMSProp(learning_rate=0.01, beta2=0.9).create(params)
  state = TrainState(step=0, optimizer=optimizer, model_state={})
  losses = []
  for _ in range(20):
    state, loss = train_step(state)
    losses.append(float(loss))
  print(json.dumps(losses))


if __name__ == '__main__':
  main()
''',
    after='''\
import json
from typing import Any

import flax
import jax
import jax.numpy as jnp
import optax
from flax.training import train_state


@flax.struct.dataclass
class TrainState:
  step: int
  optimizer: train_state.TrainState
  model_state: Any


def loss_fn(params):
  return jnp.sum((params['w'] - 1.0) ** 2) + jnp.sum(params['b'] ** 2)


@jax.jit
def train_step(state: TrainState):
  optimizer = state.optimizer
  loss, grads = jax.value_and_grad(loss_fn)(optimizer.params)
  new_optimizer = optimizer.apply_gradients(grads=grads)
  return state.replace(step=state.step + 1, optimizer=new_optimizer), loss


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
  optimizer = train_state.TrainState.create(apply_fn=None, params=params, tx=optax.rmsprop(learning_rate=0.01, decay=0.9, eps=1e-08, centered=False, eps_in_sqrt=False))
  state = TrainState(step=0, optimizer=optimizer, model_state={})
  losses = []
  for _ in range(20):
    state, loss = train_step(state)
    losses.append(float(loss))
  print(json.dumps(losses))


if __name__ == '__main__':
  main()
''',
    exact='bit-exact')

ANNOTATION = Rule('FOM006', 'optim.Optimizer annotations and dataclass fields -> '
                  'train_state.TrainState', _annotation,
                  (_DATACLASS_FIELD,))

_REPLICATE_PMAP = Example(
    'replicate_pmap',
    before='''\
import json

import jax
import jax.numpy as jnp
from flax import optim


def loss_fn(params, x):
  return jnp.sum((params['w'] * x - 1.0) ** 2) + jnp.sum(params['b'] ** 2)


def train_step(optimizer, x):
  loss, grads = jax.value_and_grad(loss_fn)(optimizer.target, x)
  optimizer = optimizer.apply_gradient(grads)
  return optimizer, jax.lax.pmean(loss, axis_name='batch')


p_train_step = jax.pmap(train_step, axis_name='batch')


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
  devices = jax.local_device_count()
  x = 1.0 + 0.25 * jnp.arange(devices * 3, dtype=jnp.float32).reshape(devices, 3)
  optimizer = optim.Adam(learning_rate=0.05).create(params)
  optimizer = optimizer.replicate()
  losses = []
  for _ in range(20):
    optimizer, loss = p_train_step(optimizer, x)
    losses.append(float(loss[0]))
  optimizer = optimizer.unreplicate()
  print(json.dumps(losses + [float(v) for v in optimizer.target['w']]))


if __name__ == '__main__':
  main()
''',
    after='''\
import json

import jax
import jax.numpy as jnp
from flax import jax_utils
import optax
from flax.training import train_state


def loss_fn(params, x):
  return jnp.sum((params['w'] * x - 1.0) ** 2) + jnp.sum(params['b'] ** 2)


def train_step(optimizer, x):
  loss, grads = jax.value_and_grad(loss_fn)(optimizer.params, x)
  optimizer = optimizer.apply_gradients(grads=jax.lax.pmean(grads, axis_name='batch'))
  return optimizer, jax.lax.pmean(loss, axis_name='batch')


p_train_step = jax.pmap(train_step, axis_name='batch')


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
  devices = jax.local_device_count()
  x = 1.0 + 0.25 * jnp.arange(devices * 3, dtype=jnp.float32).reshape(devices, 3)
  optimizer = train_state.TrainState.create(apply_fn=None, params=params, tx=optax.adam(learning_rate=0.05, b1=0.9, b2=0.999, eps=1e-08))
  optimizer = jax_utils.replicate(optimizer)
  losses = []
  for _ in range(20):
    optimizer, loss = p_train_step(optimizer, x)
    losses.append(float(loss[0]))
  optimizer = jax_utils.unreplicate(optimizer)
  print(json.dumps(losses + [float(v) for v in optimizer.params['w']]))


if __name__ == '__main__':
  main()
''',
    exact='bit-exact')

# The optimizer replicated where it is created, and unreplicated where it is read: each call
# on a create(...) or on a method's result is rewritten as on a name.
_REPLICATE_CHAINED = Example(
    'replicate_chained',
    before='''\
import json

import jax
import jax.numpy as jnp
from flax import optim


def loss_fn(params, x):
  return jnp.sum((params['w'] * x - 1.0) ** 2) + jnp.sum(params['b'] ** 2)


def train_step(optimizer, x):
  loss, grads = jax.value_and_grad(loss_fn)(optimizer.target, x)
  optimizer = optimizer.apply_gradient(grads)
  return optimizer, jax.lax.pmean(loss, axis_name='batch')


p_train_step = jax.pmap(train_step, axis_name='batch')


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
  devices = jax.local_device_count()
  x = 1.0 + 0.25 * jnp.arange(devices * 3, dtype=jnp.float32).reshape(devices, 3)
  optimizer = optim.Adam(learning_rate=0.05).create(params).replicate()
  losses = []
  for _ in range(20):
    optimizer, loss = p_train_step(optimizer, x)
    losses.append(float(loss[0]))
  print(json.dumps(losses + [float(v) for v in optimizer.unreplicate().target['w']]))


if __name__ == '__main__':
  main()
''',
    after='''\
import json

import jax
import jax.numpy as jnp
from flax import jax_utils
import optax
from flax.training import train_state


def loss_fn(params, x):
  return jnp.sum((params['w'] * x - 1.0) ** 2) + jnp.sum(params['b'] ** 2)


def train_step(optimizer, x):
  loss, grads = jax.value_and_grad(loss_fn)(optimizer.params, x)
  optimizer = optimizer.apply_gradients(grads=jax.lax.pmean(grads, axis_name='batch'))
  return optimizer, jax.lax.pmean(loss, axis_name='batch')


p_train_step = jax.pmap(train_step, axis_name='batch')


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
  devices = jax.local_device_count()
  x = 1.0 + 0.25 * jnp.arange(devices * 3, dtype=jnp.float32).reshape(devices, 3)
  optimizer = jax_utils.replicate(train_state.TrainState.create(apply_fn=None, params=params, tx=optax.adam(learning_rate=0.05, b1=0.9, b2=0.999, eps=1e-08)))
  losses = []
  for _ in range(20):
    optimizer, loss = p_train_step(optimizer, x)
    losses.append(float(loss[0]))
  print(json.dumps(losses + [float(v) for v in jax_utils.unreplicate(optimizer).params['w']]))


if __name__ == '__main__':
  main()
''',
    exact='bit-exact')

REPLICATE = Rule('FOM007', 'optimizer.replicate() / .unreplicate() -> jax_utils.replicate / '
                 'unreplicate, the gradient average moved to the apply site under pmap',
                 _replicate, (_REPLICATE_PMAP, _REPLICATE_CHAINED))

_MULTI_OPTIMIZER = Example(
    'multi_optimizer',
    before='''\
import json

import jax
import jax.numpy as jnp
from flax import linen as nn
from flax import optim


class MLP(nn.Module):

  @nn.compact
  def __call__(self, x):
    x = nn.tanh(nn.Dense(4)(x))
    scale = self.param('scale', nn.initializers.ones, (1,))
    return nn.Dense(1)(x) * scale


def main():
  model = MLP()
  x = jnp.linspace(-1.0, 1.0, 12, dtype=jnp.float32).reshape(6, 2)
  y = jnp.sin(3.0 * x[:, :1])
  params = model.init(jax.random.PRNGKey(0), x)['params']

  def loss_fn(params):
    return jnp.mean((model.apply({'params': params}, x) - y) ** 2)

  kernels = optim.ModelParamTraversal(lambda path, _: path.endswith('/kernel'))
  biases = optim.ModelParamTraversal(lambda path, _: path.endswith('/bias'))
  optimizer_def = optim.MultiOptimizer(
      (kernels, optim.Adam(learning_rate=0.05)),
      (biases, optim.Momentum(learning_rate=0.1, beta=0.8)))
  optimizer = optimizer_def.create(params)
  losses = []
  for _ in range(20):
    loss, grads = jax.value_and_grad(loss_fn)(optimizer.target)
    optimizer = optimizer.apply_gradient(grads)
    losses.append(float(loss))
  print(json.dumps(losses + [float(optimizer.target['scale'][0])]))


if __name__ == '__main__':
  main()
''',
    after='''\
import json

import jax
import jax.numpy as jnp
from flax import traverse_util, linen as nn
import optax
from flax.training import train_state


class MLP(nn.Module):

  @nn.compact
  def __call__(self, x):
    x = nn.tanh(nn.Dense(4)(x))
    scale = self.param('scale', nn.initializers.ones, (1,))
    return nn.Dense(1)(x) * scale


def main():
  model = MLP()
  x = jnp.linspace(-1.0, 1.0, 12, dtype=jnp.float32).reshape(6, 2)
  y = jnp.sin(3.0 * x[:, :1])
  params = model.init(jax.random.PRNGKey(0), x)['params']

  def loss_fn(params):
    return jnp.mean((model.apply({'params': params}, x) - y) ** 2)

  kernels = lambda path, _: path.endswith('/kernel')
  biases = lambda path, _: path.endswith('/bias')
  optimizer_def = optax.multi_transform({'0': optax.adam(learning_rate=0.05, b1=0.9, b2=0.999, eps=1e-08), '1': optax.sgd(learning_rate=0.1, momentum=0.8, nesterov=False), 'unmatched': optax.set_to_zero()}, lambda params: traverse_util.path_aware_map(lambda path, value: '0' if kernels('/' + '/'.join(path), value) else '1' if biases('/' + '/'.join(path), value) else 'unmatched', params))
  optimizer = train_state.TrainState.create(apply_fn=None, params=params, tx=optimizer_def)
  losses = []
  for _ in range(20):
    loss, grads = jax.value_and_grad(loss_fn)(optimizer.params)
    optimizer = optimizer.apply_gradients(grads=grads)
    losses.append(float(loss))
  print(json.dumps(losses + [float(optimizer.params['scale'][0])]))


if __name__ == '__main__':
  main()
''',
    exact='1e-6')

_FOCUS = Example(
    'focus',
    before='''\
import json

import jax
import jax.numpy as jnp
from flax import optim


def loss_fn(params):
  return jnp.sum((params['dense']['kernel'] - 1.0) ** 2) + jnp.sum(params['head'] ** 2)


def main():
  params = {'dense': {'kernel': jnp.array([0.5, -1.0, 2.0])}, 'head': jnp.array([0.3])}
  optimizer = optim.Adam(learning_rate=0.05).create(
      params, focus=optim.ModelParamTraversal(lambda path, _: path.startswith('/dense')))
  losses = []
  for _ in range(20):
    loss, grads = jax.value_and_grad(loss_fn)(optimizer.target)
    optimizer = optimizer.apply_gradient(grads)
    losses.append(float(loss))
  print(json.dumps(losses))


if __name__ == '__main__':
  main()
''',
    after='''\
import json

import jax
import jax.numpy as jnp
from flax import traverse_util
import optax
from flax.training import train_state


def loss_fn(params):
  return jnp.sum((params['dense']['kernel'] - 1.0) ** 2) + jnp.sum(params['head'] ** 2)


def main():
  params = {'dense': {'kernel': jnp.array([0.5, -1.0, 2.0])}, 'head': jnp.array([0.3])}
  optimizer = train_state.TrainState.create(apply_fn=None, params=params, tx=optax.multi_transform({'0': optax.adam(learning_rate=0.05, b1=0.9, b2=0.999, eps=1e-08), 'unmatched': optax.set_to_zero()}, lambda params: traverse_util.path_aware_map(lambda path, value: '0' if (lambda path, _: path.startswith('/dense'))('/' + '/'.join(path), value) else 'unmatched', params)))
  losses = []
  for _ in range(20):
    loss, grads = jax.value_and_grad(loss_fn)(optimizer.params)
    optimizer = optimizer.apply_gradients(grads=grads)
    losses.append(float(loss))
  print(json.dumps(losses))


if __name__ == '__main__':
  main()
''',
    exact='1e-6')

MULTI = Rule('FOM008', 'optim.MultiOptimizer((traversal, def), ...) / create(focus=traversal) '
             '-> optax.multi_transform with labels from the traversals, unselected params '
             'optax.set_to_zero()', _multi, (_MULTI_OPTIMIZER, _FOCUS))

_DYNAMIC_SCALE = Example(
    'dynamic_scale',
    before='''\
import json

import jax
import jax.numpy as jnp
from flax import optim


def loss_fn(params):
  return jnp.sum((params['w'] - 1.0) ** 2) + jnp.sum(params['b'] ** 2)


@jax.jit
def train_step(optimizer, dynamic_scale):
  grad_fn = dynamic_scale.value_and_grad(loss_fn)
  dynamic_scale, is_finite, loss, grads = grad_fn(optimizer.target)
  new_optimizer = optimizer.apply_gradient(grads)
  optimizer = jax.tree_util.tree_map(
      lambda new, old: jnp.where(is_finite, new, old), new_optimizer, optimizer)
  return optimizer, dynamic_scale, loss


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
  optimizer = optim.Momentum(learning_rate=0.05, beta=0.9).create(params)
  dynamic_scale = optim.DynamicScale(growth_interval=5)
  losses = []
  for _ in range(20):
    optimizer, dynamic_scale, loss = train_step(optimizer, dynamic_scale)
    losses.append(float(loss))
  print(json.dumps(losses + [float(dynamic_scale.scale)]))


if __name__ == '__main__':
  main()
''',
    after='''\
import json

import jax
import jax.numpy as jnp
import optax
from flax.training import dynamic_scale as dynamic_scale_lib, train_state


def loss_fn(params):
  return jnp.sum((params['w'] - 1.0) ** 2) + jnp.sum(params['b'] ** 2)


@jax.jit
def train_step(optimizer, dynamic_scale):
  grad_fn = dynamic_scale.value_and_grad(loss_fn)
  dynamic_scale, is_finite, loss, grads = grad_fn(optimizer.params)
  new_optimizer = optimizer.apply_gradients(grads=grads)
  optimizer = jax.tree_util.tree_map(
      lambda new, old: jnp.where(is_finite, new, old), new_optimizer, optimizer)
  return optimizer, dynamic_scale, loss


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
  optimizer = train_state.TrainState.create(apply_fn=None, params=params, tx=optax.sgd(learning_rate=0.05, momentum=0.9, nesterov=False))
  dynamic_scale = dynamic_scale_lib.DynamicScale(growth_interval=5)
  losses = []
  for _ in range(20):
    optimizer, dynamic_scale, loss = train_step(optimizer, dynamic_scale)
    losses.append(float(loss))
  print(json.dumps(losses + [float(dynamic_scale.scale)]))


if __name__ == '__main__':
  main()
''',
    exact='bit-exact')

DYNAMIC_SCALE = Rule('FOM010', 'optim.DynamicScale -> flax.training.dynamic_scale.DynamicScale '
                     '(imported as dynamic_scale_lib, as flax\'s examples do)', _dynamic_scale,
                     (_DYNAMIC_SCALE,))

_COMPUTE_GRADIENT = Example(
    'compute_gradient',
    before='''\
import json

import jax.numpy as jnp
from flax import optim


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
  optimizer = optim.Adam(learning_rate=0.05).create(params)

  def loss_fn(params):
    return jnp.sum((params['w'] - 1.0) ** 2) + jnp.sum(params['b'] ** 2)

  def loss_and_aux(params):
    loss = loss_fn(params)
    return loss, {'half': 0.5 * loss}

  losses = []
  for step in range(20):
    if step % 2:
      loss, grads = optimizer.compute_gradient(loss_fn)
    else:
      loss, aux, grads = optimizer.compute_gradient(loss_and_aux)
      loss = loss + 0.0 * aux['half']
    optimizer = optimizer.apply_gradient(grads)
    losses.append(float(loss))
  print(json.dumps(losses))


if __name__ == '__main__':
  main()
''',
    after='''\
import json

import jax.numpy as jnp
import jax
import optax
from flax.training import train_state


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
  optimizer = train_state.TrainState.create(apply_fn=None, params=params, tx=optax.adam(learning_rate=0.05, b1=0.9, b2=0.999, eps=1e-08))

  def loss_fn(params):
    return jnp.sum((params['w'] - 1.0) ** 2) + jnp.sum(params['b'] ** 2)

  def loss_and_aux(params):
    loss = loss_fn(params)
    return loss, {'half': 0.5 * loss}

  losses = []
  for step in range(20):
    if step % 2:
      loss, grads = jax.value_and_grad(loss_fn)(optimizer.params)
    else:
      (loss, aux), grads = jax.value_and_grad(loss_and_aux, has_aux=True)(optimizer.params)
      loss = loss + 0.0 * aux['half']
    optimizer = optimizer.apply_gradients(grads=grads)
    losses.append(float(loss))
  print(json.dumps(losses))


if __name__ == '__main__':
  main()
''',
    exact='1e-6')

COMPUTE_GRADIENT = Rule('FOM011', 'loss, grad = optimizer.compute_gradient(loss_fn) -> '
                        'jax.value_and_grad(loss_fn)(state.params) (has_aux=True for three '
                        'targets)', _compute_gradient, (_COMPUTE_GRADIENT,))

_OPTIMIZE = Example(
    'optimize',
    before='''\
import json

import jax.numpy as jnp
from flax import optim


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
  optimizer = optim.Adam(learning_rate=0.05, beta1=0.8).create(params)

  def loss_fn(params):
    return jnp.sum((params['w'] - 1.0) ** 2) + jnp.sum(params['b'] ** 2)

  def loss_and_aux(params):
    loss = loss_fn(params)
    return loss, {'half': 0.5 * loss}

  trajectory = []
  for step in range(20):
    if step % 2:
      new_optimizer, loss = optimizer.optimize(loss_fn)
    else:
      new_optimizer, loss, aux = optimizer.optimize(loss_and_aux)
      loss = loss + 0.0 * aux['half']
    optimizer = new_optimizer
    trajectory.append(float(loss))
  print(json.dumps(trajectory + [float(v) for v in optimizer.target['w']]))


if __name__ == '__main__':
  main()
''',
    after='''\
import json

import jax.numpy as jnp
import jax
import optax
from flax.training import train_state


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
  optimizer = train_state.TrainState.create(apply_fn=None, params=params, tx=optax.adam(learning_rate=0.05, b1=0.8, b2=0.999, eps=1e-08))

  def loss_fn(params):
    return jnp.sum((params['w'] - 1.0) ** 2) + jnp.sum(params['b'] ** 2)

  def loss_and_aux(params):
    loss = loss_fn(params)
    return loss, {'half': 0.5 * loss}

  trajectory = []
  for step in range(20):
    if step % 2:
      loss, grads = jax.value_and_grad(loss_fn)(optimizer.params)
      new_optimizer = optimizer.apply_gradients(grads=grads)
    else:
      (loss, aux), grads = jax.value_and_grad(loss_and_aux, has_aux=True)(optimizer.params)
      new_optimizer = optimizer.apply_gradients(grads=grads)
      loss = loss + 0.0 * aux['half']
    optimizer = new_optimizer
    trajectory.append(float(loss))
  print(json.dumps(trajectory + [float(v) for v in optimizer.params['w']]))


if __name__ == '__main__':
  main()
''',
    exact='1e-6')

_OPTIMIZE_INJECTED_LR = Example(
    'optimize_injected_lr',
    before='''\
import json

import jax
import jax.numpy as jnp
from flax import optim


def loss_fn(params):
  return jnp.sum((params['w'] - 1.0) ** 2) + jnp.sum(params['b'] ** 2)


@jax.jit
def train_step(optimizer, lr):
  optimizer, loss = optimizer.optimize(loss_fn, learning_rate=lr)
  return optimizer, loss


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
  optimizer = optim.Momentum(beta=0.8).create(params)
  trajectory = []
  for epoch in range(4):
    for _ in range(5):
      optimizer, loss = train_step(optimizer, 0.1 * 0.5 ** epoch)
      trajectory.append(float(loss))
  print(json.dumps(trajectory + [float(v) for v in optimizer.target['w']]))


if __name__ == '__main__':
  main()
''',
    after='''\
import json

import jax
import jax.numpy as jnp
import optax
from flax.training import train_state


def loss_fn(params):
  return jnp.sum((params['w'] - 1.0) ** 2) + jnp.sum(params['b'] ** 2)


@jax.jit
def train_step(optimizer, lr):
  loss, grads = jax.value_and_grad(loss_fn)(optimizer.params)
  optimizer = optimizer.replace(opt_state=optimizer.opt_state._replace(hyperparams=dict(optimizer.opt_state.hyperparams, learning_rate=lr))).apply_gradients(grads=grads)
  return optimizer, loss


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
  optimizer = train_state.TrainState.create(apply_fn=None, params=params, tx=optax.inject_hyperparams(optax.sgd, hyperparam_dtype=jnp.float32)(learning_rate=0.0, momentum=0.8, nesterov=False))
  trajectory = []
  for epoch in range(4):
    for _ in range(5):
      optimizer, loss = train_step(optimizer, 0.1 * 0.5 ** epoch)
      trajectory.append(float(loss))
  print(json.dumps(trajectory + [float(v) for v in optimizer.params['w']]))


if __name__ == '__main__':
  main()
''',
    exact='bit-exact')

OPTIMIZE = Rule('FOM012', 'new, loss = optimizer.optimize(loss_fn, learning_rate=...) -> '
                'loss, grads = jax.value_and_grad(loss_fn)(state.params) (has_aux=True for three '
                'targets), then new = state.apply_gradients(grads=grads) as FOM004 writes it',
                _optimize, (_OPTIMIZE, _OPTIMIZE_INJECTED_LR))

all_rules = (CREATE, TARGET, STEP, APPLY, REPLACE, ANNOTATION, REPLICATE, MULTI, DYNAMIC_SCALE,
             COMPUTE_GRADIENT, OPTIMIZE)
by_code = {rule.code: rule for rule in all_rules}
