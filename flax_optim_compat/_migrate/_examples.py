"""The rules' examples: complete scripts before and after a rule, and how closely they agree.

Each ``before`` runs on this package (legacy ``flax.optim`` code), each ``after`` is what
``migrate`` writes for it and runs on plain optax; the last line either prints is its
trajectory (tests/migrate/test_migrate_equivalence.py runs both ways and compares them within
``exact``; tests/migrate/test_migrate.py checks that ``migrate`` turns ``before`` into ``after``).
"""
from typing import NamedTuple


class Example(NamedTuple):
  """A complete script before and after the rule, and how closely their numbers agree."""
  name: str
  before: str
  after: str
  exact: str      # 'bit-exact' / '1e-6' / 'not exact'


CREATE_ADAMW = Example(
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


DEF_VARIABLE_JIT = Example(
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


REPLACE_TARGET = Example(
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


STEP_READ = Example(
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


LR_SCHEDULE_OFFSET = Example(
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


LR_INJECTED = Example(
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


DATACLASS_FIELD = Example(
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


REPLICATE_PMAP = Example(
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
REPLICATE_CHAINED = Example(
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


MULTI_OPTIMIZER = Example(
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


FOCUS = Example(
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


DYNAMIC_SCALE = Example(
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


COMPUTE_GRADIENT = Example(
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


OPTIMIZE = Example(
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


OPTIMIZE_INJECTED_LR = Example(
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
