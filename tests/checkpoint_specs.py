"""The checkpoint driver shared by the fixture generator and tests/test_checkpoints.py.

Each case of ``catalogue.CHECKPOINTS`` trains an optimizer (bare, inside a user's train-state
dataclass with a model state and a ``DynamicScale``, or replicated over two devices) for
``STEPS_BEFORE`` steps, saves it with ``flax.training.checkpoints.save_checkpoint``, restores it
into a freshly created template and trains ``STEPS_AFTER`` more steps. The generator
(``python -m tools.oracle.gen_checkpoints``) runs this against the real legacy ``flax.optim``
(oracle venv) and keeps the files it wrote; the tests run the same functions against
``flax_optim_compat`` on those files. Only the modules passed in differ.

This module must import on both sides (numpy 1.24 + jax 0.4.13 and today's) and imports neither
library itself.
"""
import numpy as np

from tests import catalogue
from tests import oracle_specs

STEPS_BEFORE = 3   # steps before the checkpoint (the file is `checkpoint_3`)
STEPS_AFTER = 3    # steps after restoring it
N_DEVICES = 2      # devices of the replicated cases

# Scalar, 1-D, 2-D and 4-D leaves; keys deliberately not in sorted order.
SHAPES = {'dense': {'kernel': (3, 4), 'bias': (4,)}, 'conv': {'kernel': (2, 2, 3, 2)},
          'scale': ()}


def make_case(name):
  """Everything a side needs to run checkpoint case ``name``: spec, kind, target, grads or
  batches."""
  entry = catalogue.CHECKPOINTS[name]
  case = {'name': name, 'optimizer': entry.spec, 'kind': entry.kind, 'container': entry.container}
  rng = np.random.RandomState(sum(map(ord, name)))
  target = oracle_specs.make_target(rng, entry.shapes or SHAPES)
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


def create_optimizer(optim, case, *, jax, freeze):
  """The freshly created optimizer of ``case`` (replicated for 'replicated' cases)."""
  target = jax.tree_util.tree_map(jax.numpy.asarray, case['target'])
  if case['container'] == 'frozen':
    target = freeze(target)
  spec = case['optimizer']
  focus = {'focus': catalogue.build_traversal(spec['focus'])} if 'focus' in spec else {}
  optimizer = catalogue.build_def(optim, spec).create(target, **focus)
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


def modes(case):
  """Ways of continuing after the restore: 'jit' always, 'eager' for the catalogue's few
  ``eager=True`` cases (legacy then runs parts of the step in NumPy and stores an int64 step)."""
  return ('jit', 'eager') if catalogue.CHECKPOINTS[case['name']].eager else ('jit',)


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
