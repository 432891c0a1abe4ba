"""Case descriptions and the trajectory driver shared by the fixture generator and the tests.

The same driver runs against the real legacy ``flax.optim`` (in the oracle venv, by
``tools/gen_trajectories.py``, which stores the results as golden fixtures) and against
``flax_optim_compat`` (in the tests, which compare with those fixtures). Only the ``optim``
module passed in differs, so a passing test means: same calls, same numbers.

This module must import on both sides: Python 3.11, numpy 1.24 + jax 0.4.13 (oracle) and
today's numpy/jax; it imports neither flax.optim nor flax_optim_compat itself.
"""
import numpy as np

# ----------------------------------------------------------------------------- targets


def make_target(rng, shapes, zero=()):
  """A nested dict of float32 arrays ~ N(0, 0.5^2) (leaves named in ``zero`` are zeros).

  Args:
    rng: a ``np.random.RandomState``.
    shapes: nested dict: leaf name -> shape tuple.
    zero: leaf names whose value is all zeros (zero-norm corner cases).
  """
  out = {}
  for key, value in shapes.items():
    if isinstance(value, dict):
      out[key] = make_target(rng, value, zero)
    else:
      arr = (0.5 * rng.standard_normal(value)).astype(np.float32)
      out[key] = np.zeros_like(arr) if key in zero else arr
  return out


def like(rng, tree):
  """Fresh N(0, 1) float32 values with the structure and shapes of ``tree``."""
  if isinstance(tree, dict):
    return {k: like(rng, v) for k, v in tree.items()}
  return rng.standard_normal(np.shape(tree)).astype(np.float32)


# Scalar, 1-D, 2-D, 3-D and 4-D leaves, nested, keys deliberately not in sorted order.
DEFAULT_SHAPES = {
    'dense': {'kernel': (3, 4), 'bias': (4,)},
    'conv': {'kernel': (2, 2, 3, 2)},
    'scale': (),
    'embed': {'table': (5, 3, 2)},
}

# ----------------------------------------------------------------------------- optimizers


def _custom_sign_momentum(optim):
  """A user-written legacy-style OptimizerDef (per-leaf protocol), defined against ``optim``."""
  from flax import struct  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top

  @struct.dataclass
  class _SignMomentumHyperParams:
    learning_rate: float
    beta: float

  @struct.dataclass
  class _SignMomentumParamState:
    velocity: np.ndarray

  class SignMomentum(optim.OptimizerDef):

    def __init__(self, learning_rate=None, beta=0.9):
      super().__init__(_SignMomentumHyperParams(learning_rate, beta))

    def init_param_state(self, param):
      return _SignMomentumParamState(jnp.zeros_like(param))

    def apply_param_gradient(self, step, hyper_params, param, state, grad):
      velocity = hyper_params.beta * state.velocity + jnp.sign(grad) * (1.0 + 0.1 * step)
      return param - hyper_params.learning_rate * velocity, _SignMomentumParamState(velocity)

  return SignMomentum


CUSTOM_OPTIMIZERS = {'custom:SignMomentum': _custom_sign_momentum}


def build_def(optim, spec):
  """Builds an OptimizerDef of ``optim`` from a JSON-like spec.

  ``{'name': 'Adam', 'kwargs': {...}}``; ``{'name': 'WeightNorm', 'kwargs': {...},
  'wrapped': spec}``; ``{'name': 'custom:SignMomentum', ...}``;
  ``{'name': 'MultiOptimizer', 'groups': [[traversal_spec, spec], ...]}`` (see
  :func:`build_traversal`). Any spec may add ``'focus': traversal_spec``, which the driver
  passes to ``create(target, focus=...)``.
  """
  name, kwargs = spec['name'], dict(spec.get('kwargs', {}))
  if name == 'MultiOptimizer':
    return optim.MultiOptimizer(*[(build_traversal(t), build_def(optim, o))
                                  for t, o in spec['groups']])
  if name in CUSTOM_OPTIMIZERS:
    return CUSTOM_OPTIMIZERS[name](optim)(**kwargs)
  if 'wrapped' in spec:
    return getattr(optim, name)(build_def(optim, spec['wrapped']), **kwargs)
  return getattr(optim, name)(**kwargs)


def build_traversal(spec):
  """A ``flax.traverse_util`` traversal from a spec (same code in both venvs).

  ``{'kind': 'path_contains', 'value': 'kernel'}`` ->
  ``ModelParamTraversal(lambda path, _: 'kernel' in path)``;
  ``{'kind': 't_identity', 'key': 'a'}`` -> ``t_identity['a']`` (``'key'`` may be a list of
  keys: ``t_identity['a']['b']``).
  """
  import warnings  # pylint: disable=g-import-not-at-top
  from flax import traverse_util  # pylint: disable=g-import-not-at-top
  with warnings.catch_warnings():
    # flax (0.5.3 and today) deprecates constructing any Traversal; expected here.
    warnings.filterwarnings('ignore', message='`flax.traverse_util.Traversal` will be deprecated',
                            category=DeprecationWarning)
    if spec['kind'] == 'path_contains':
      value = spec['value']
      return traverse_util.ModelParamTraversal(lambda path, _: value in path)
    if spec['kind'] == 't_identity':
      keys = spec['key'] if isinstance(spec['key'], list) else [spec['key']]
      traversal = traverse_util.t_identity
      for key in keys:
        traversal = traversal[key]
      return traversal
  raise ValueError(f'unknown traversal spec {spec!r}')


def float32_overrides(raw):
  """Step overrides as float32; ``'hyper_params'`` maps a group index to field overrides."""
  out = {}
  for key, value in raw.items():
    if key == 'hyper_params':
      out[key] = {g: {f: np.float32(v) for f, v in fields.items()} for g, fields in value.items()}
    else:
      out[key] = np.float32(value)
  return out


def apply_overrides(opt, grads, overrides):
  """``opt.apply_gradient`` with ``overrides``; per-group ones become a ``hyper_params=`` list
  of ``hp.replace(...)`` of the MultiOptimizer's own hyper-params (the legacy idiom)."""
  overrides = dict(overrides)
  if 'hyper_params' in overrides:
    per_group = overrides.pop('hyper_params')
    overrides['hyper_params'] = [hp.replace(**per_group.get(str(i), {}))
                                 for i, hp in enumerate(opt.optimizer_def.hyper_params)]
  return opt.apply_gradient(grads, **overrides)


# ----------------------------------------------------------------------------- the driver


def run_trajectory(optim, case, *, jax, to_state_dict, freeze):
  """Creates the optimizer of ``case`` and applies its grads; returns every state dict.

  Args:
    optim: ``flax.optim`` or ``flax_optim_compat``.
    case: a dict with 'optimizer' (spec), 'container' ('dict' | 'frozen'), 'jit' (bool),
      'target' (nested dict of arrays), 'grads' ({'0': tree, ...}) and 'overrides'
      ({'0': {hyper-param: float}, ...}).
    jax, to_state_dict, freeze: the side's jax module, ``flax.serialization.to_state_dict``
      and ``flax.core.freeze``.

  Returns:
    ``{'created': state dict, '0': state dict after step 0, ...}``.
  """
  wrap = freeze if case['container'] == 'frozen' else (lambda t: t)
  as_jax = lambda tree: jax.tree_util.tree_map(jax.numpy.asarray, tree)
  focus = ({'focus': build_traversal(case['optimizer']['focus'])}
           if 'focus' in case['optimizer'] else {})
  optimizer = build_def(optim, case['optimizer']).create(wrap(as_jax(case['target'])), **focus)

  def step(opt, grads, overrides):
    return apply_overrides(opt, grads, overrides)

  if case['jit']:
    step = jax.jit(step)
  out = {'created': to_state_dict(optimizer)}
  for i in range(len(case['grads'])):
    overrides = float32_overrides(case['overrides'][str(i)])
    optimizer = step(optimizer, wrap(as_jax(case['grads'][str(i)])), overrides)
    out[str(i)] = to_state_dict(optimizer)
  return out


def make_cases(optimizer_specs, *, steps=12, seed=0, shapes=None, zero=(), containers=('dict', 'frozen'),
               jits=(True, False)):
  """Cases for each spec x container x jit, with seeded targets and gradients.

  Each ``optimizer_specs`` entry is ``(case_name, spec, overrides)`` where ``overrides`` maps
  a step number to the per-call hyper-param overrides of that step.
  """
  cases = {}
  for n, (case_name, spec, overrides) in enumerate(optimizer_specs):
    rng = np.random.RandomState(seed + n)
    target = make_target(rng, shapes or DEFAULT_SHAPES, zero)
    grads = {str(i): like(rng, target) for i in range(steps)}
    overrides = {str(i): dict(overrides.get(i, {})) for i in range(steps)}
    for container in containers:
      for jit in jits:
        cases[f'{case_name}-{container}-{"jit" if jit else "eager"}'] = {
            'optimizer': spec, 'container': container, 'jit': jit,
            'target': target, 'grads': grads, 'overrides': overrides}
  return cases
