"""Checkpoint cases and the drivers shared by tools/gen_checkpoints.py and tests/test_checkpoints.py.

Each case trains an optimizer (bare, inside a user's train-state dataclass with a model state
and a ``DynamicScale``, or replicated over two devices) for ``STEPS_BEFORE`` steps, saves it with
``flax.training.checkpoints.save_checkpoint``, restores it into a freshly created template and
trains ``STEPS_AFTER`` more steps. The generator runs this against the real legacy
``flax.optim`` (oracle venv) and keeps the files it wrote; the tests run the same functions
against ``flax_optim_compat`` on those files. Only the modules passed in differ.

This module must import on both sides (numpy 1.24 + jax 0.4.13 and today's) and imports neither
library itself.
"""
import re

import numpy as np

try:  # the suite imports the package; the generator puts the repo root on sys.path too
  from tests import oracle_specs
except ImportError:  # pragma: no cover - fallback for a tests/-only sys.path
  import oracle_specs

STEPS_BEFORE = 3   # steps before the checkpoint (the file is `checkpoint_3`)
STEPS_AFTER = 3    # steps after restoring it
N_DEVICES = 2      # devices of the replicated cases

# Scalar, 1-D, 2-D and 4-D leaves; keys deliberately not in sorted order.
SHAPES = {'dense': {'kernel': (3, 4), 'bias': (4,)}, 'conv': {'kernel': (2, 2, 3, 2)},
          'scale': ()}
SHAPES_NO_SCALAR = {'dense': {'kernel': (3, 4), 'bias': (4,)}, 'conv': {'kernel': (2, 2, 3, 2)}}
TRAIN_STATE_SHAPES = {'dense': {'kernel': (3, 4), 'bias': (4,)}}


def _spec(name, **kwargs):
  return {'name': name, 'kwargs': kwargs}


_ADAM = _spec('Adam', learning_rate=0.01, beta1=0.85, beta2=0.99, eps=1e-6, weight_decay=0.01)
_MOMENTUM = _spec('Momentum', learning_rate=0.05, beta=0.8, weight_decay=0.01, nesterov=True)

# case name -> (optimizer spec, options). Options: 'kind' ('plain' | 'train_state' |
# 'replicated'), 'shapes', 'container' ('dict' | 'frozen'). One line per optimizer.
CASES = {
    'GradientDescent': (_spec('GradientDescent', learning_rate=0.1), {}),
    'Momentum': (_MOMENTUM, {}),
    'Adam': (_ADAM, {}),
    'AdaBelief': (_spec('AdaBelief', learning_rate=0.01, beta1=0.85, beta2=0.99, eps=1e-10,
                        weight_decay=0.01), {}),
    'Adadelta': (_spec('Adadelta', learning_rate=0.5, rho=0.85, eps=1e-5, weight_decay=0.01), {}),
    'Adafactor': (_spec('Adafactor', learning_rate=0.05, beta1=0.9, decay_rate=0.7,
                        min_dim_size_to_factor=2, weight_decay_rate=1e-3), {}),
    'Adafactor-defaults': (_spec('Adafactor', learning_rate=0.05), {}),
    'Adagrad': (_spec('Adagrad', learning_rate=0.1, eps=0.01), {}),
    'LAMB': (_spec('LAMB', learning_rate=0.01, beta1=0.85, beta2=0.99, weight_decay=0.01,
                   eps=1e-5), {}),
    'LARS': (_spec('LARS', learning_rate=0.1, beta=0.8, weight_decay=0.01, trust_coefficient=0.01,
                   eps=1e-6, nesterov=True), {}),
    'RMSProp': (_spec('RMSProp', learning_rate=0.01, beta2=0.85), {}),
    'RMSProp-centered': (_spec('RMSProp', learning_rate=0.01, beta2=0.85, eps=1e-3,
                               centered=True), {}),
    'WeightNorm-Momentum': ({'name': 'WeightNorm', 'kwargs': {'wn_decay': 1e-3},
                             'wrapped': _spec('Momentum', learning_rate=0.05, beta=0.8)},
                            {'shapes': SHAPES_NO_SCALAR}),
    'WeightNorm-Adam': ({'name': 'WeightNorm', 'kwargs': {}, 'wrapped': _ADAM},
                        {'shapes': SHAPES_NO_SCALAR}),
    # Kernels with Adam, biases with Momentum, the scalar leaf unoptimized (state None).
    'MultiOptimizer': ({'name': 'MultiOptimizer',
                        'parts': [['/kernel$', _ADAM], ['/bias$', _MOMENTUM]]}, {}),
    # GradientDescent's `()` states next to `None` states.
    'MultiOptimizer-GradientDescent': ({'name': 'MultiOptimizer',
                                        'parts': [['^/dense/', _spec('GradientDescent',
                                                                     learning_rate=0.1)]]}, {}),
    'Adam-focus': ({'name': 'focus', 'regex': '/kernel$', 'wrapped': _ADAM}, {}),
    'Adam-frozen': (_ADAM, {'container': 'frozen'}),
    'custom-SignMomentum': (_spec('custom:SignMomentum', learning_rate=0.01, beta=0.8), {}),
    'TrainState-Adam': (_ADAM, {'kind': 'train_state', 'shapes': TRAIN_STATE_SHAPES}),
    'TrainState-MultiOptimizer': ({'name': 'MultiOptimizer',
                                   'parts': [['/kernel$', _MOMENTUM]]},
                                  {'kind': 'train_state', 'shapes': TRAIN_STATE_SHAPES}),
    'Replicated-Adam': (_ADAM, {'kind': 'replicated'}),
    'Replicated-Momentum': (_MOMENTUM, {'kind': 'replicated'}),
}


def make_case(name):
  """Everything a side needs to run case ``name``: spec, options, target, grads or batches."""
  spec, options = CASES[name]
  case = {'name': name, 'optimizer': spec, 'kind': options.get('kind', 'plain'),
          'container': options.get('container', 'dict')}
  rng = np.random.RandomState(sum(map(ord, name)))
  target = oracle_specs.make_target(rng, options.get('shapes', SHAPES))
  case['target'] = target
  steps = STEPS_BEFORE + STEPS_AFTER
  if case['kind'] == 'train_state':
    case['batches'] = {str(i): {'x': rng.standard_normal((5, 3)).astype(np.float32),
                                'y': rng.standard_normal((5, 4)).astype(np.float32)}
                       for i in range(steps)}
  elif case['kind'] == 'replicated':
    case['grads'] = {str(i): _stack([oracle_specs.like(rng, target) for _ in range(N_DEVICES)])
                     for i in range(steps)}
  else:
    case['grads'] = {str(i): oracle_specs.like(rng, target) for i in range(steps)}
  return case


def _stack(trees):
  if isinstance(trees[0], dict):
    return {k: _stack([t[k] for t in trees]) for k in trees[0]}
  return np.stack(trees)


# ----------------------------------------------------------------------------- building


def _traversal(optim, regex):
  return optim.ModelParamTraversal(lambda path, _: re.search(regex, path) is not None)


def build_def(optim, spec):
  """``oracle_specs.build_def`` plus ``{'name': 'MultiOptimizer', 'parts': [[regex, spec]...]}``."""
  if spec['name'] == 'MultiOptimizer':
    return optim.MultiOptimizer(*[(_traversal(optim, regex), build_def(optim, part))
                                  for regex, part in spec['parts']])
  return oracle_specs.build_def(optim, spec)


def create_optimizer(optim, case, *, jax, freeze):
  """The freshly created optimizer of ``case`` (replicated for 'replicated' cases)."""
  target = jax.tree_util.tree_map(jax.numpy.asarray, case['target'])
  if case['container'] == 'frozen':
    target = freeze(target)
  spec = case['optimizer']
  if spec['name'] == 'focus':
    optimizer = build_def(optim, spec['wrapped']).create(
        target, focus=_traversal(optim, spec['regex']))
  else:
    optimizer = build_def(optim, spec).create(target)
  if case['kind'] == 'replicated':
    optimizer = optimizer.replicate(devices=jax.local_devices()[:N_DEVICES])
  return optimizer


_TRAIN_STATE_CLASSES = {}


def train_state_class(struct):
  """A user's train state as legacy code wrote it (one class per ``flax.struct`` module)."""
  if id(struct) not in _TRAIN_STATE_CLASSES:

    @struct.dataclass
    class TrainState:
      step: object
      optimizer: object
      model_state: object
      dynamic_scale: object

    _TRAIN_STATE_CLASSES[id(struct)] = TrainState
  return _TRAIN_STATE_CLASSES[id(struct)]


def create(optim, case, *, jax, freeze, struct, dynamic_scale_cls):
  """What ``case`` checkpoints: an optimizer, or a train state holding one."""
  optimizer = create_optimizer(optim, case, jax=jax, freeze=freeze)
  if case['kind'] != 'train_state':
    return optimizer
  jnp = jax.numpy
  return train_state_class(struct)(
      step=jnp.asarray(0, jnp.int32), optimizer=optimizer,
      model_state={'batch_stats': {'mean': jnp.zeros((4,), jnp.float32)}},
      dynamic_scale=dynamic_scale_cls(growth_interval=2))


# ----------------------------------------------------------------------------- training


def _train_state_step(jax):
  """A mixed-precision step: float16 loss, dynamic loss scaling, update skipped if not finite."""
  jnp = jax.numpy

  def step(state, batch):
    def loss_fn(params):
      pred = batch['x'] @ params['dense']['kernel'] + params['dense']['bias']
      return jnp.mean((pred - batch['y']) ** 2).astype(jnp.float16)

    dynamic_scale, finite, _, grads = state.dynamic_scale.value_and_grad(loss_fn)(
        state.optimizer.target)
    updated = state.optimizer.apply_gradient(grads)
    optimizer = jax.tree_util.tree_map(
        lambda new, old: jnp.where(finite, new, old), updated, state.optimizer)
    features = batch['x'] @ optimizer.target['dense']['kernel']
    mean = 0.9 * state.model_state['batch_stats']['mean'] + 0.1 * jnp.mean(features, axis=0)
    return state.replace(step=state.step + 1, optimizer=optimizer,
                         model_state={'batch_stats': {'mean': mean}},
                         dynamic_scale=dynamic_scale)

  return jax.jit(step)


_STEP_FUNCTIONS = {}


def _apply(optimizer, grads):
  return optimizer.apply_gradient(grads)


def _step_function(kind, jax):
  """One jitted/pmapped function per kind and side: jax caches compilations per optimizer def."""
  key = (kind, id(jax))
  if key not in _STEP_FUNCTIONS:
    if kind == 'train_state':
      _STEP_FUNCTIONS[key] = _train_state_step(jax)
    elif kind == 'replicated':
      _STEP_FUNCTIONS[key] = jax.pmap(_apply, axis_name='batch',
                                      devices=jax.local_devices()[:N_DEVICES])
    else:
      _STEP_FUNCTIONS[key] = jax.jit(_apply)
  return _STEP_FUNCTIONS[key]


def make_step(case, *, jax, freeze, jit=True):
  """``step(obj, i) -> obj`` applying step ``i`` of ``case`` (its grads or its batch)."""
  kind = case['kind']
  assert jit or kind == 'plain', 'train-state and replicated cases run jitted/pmapped only'
  if kind == 'train_state':
    step = _step_function(kind, jax)
    return lambda state, i: step(state, case['batches'][str(i)])
  wrap = freeze if case['container'] == 'frozen' else (lambda t: t)
  apply = _step_function(kind, jax) if jit else _apply
  return lambda opt, i: apply(opt, wrap(jax.tree_util.tree_map(jax.numpy.asarray,
                                                               case['grads'][str(i)])))


# Bare-optimizer cases also continued eagerly (legacy then runs parts of the step in NumPy and
# stores an int64 step, spec 13.9); eager steps are slow, so only a representative few.
EAGER_CASES = ('GradientDescent', 'Momentum', 'Adam', 'RMSProp', 'MultiOptimizer',
               'custom-SignMomentum')


def modes(case):
  """Ways of continuing after the restore: 'jit' always, 'eager' for ``EAGER_CASES``."""
  return ('jit', 'eager') if case['name'] in EAGER_CASES else ('jit',)


def run(obj, case, steps, *, jax, freeze, to_state_dict, jit=True):
  """Applies steps ``steps`` of ``case`` to ``obj``; returns (obj, [state dict after each])."""
  step = make_step(case, jax=jax, freeze=freeze, jit=jit)
  out = []
  for i in steps:
    obj = step(obj, i)
    out.append(to_state_dict(obj))
  return obj, out


BEFORE = range(STEPS_BEFORE)
AFTER = range(STEPS_BEFORE, STEPS_BEFORE + STEPS_AFTER)
