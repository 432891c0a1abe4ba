"""The trajectory driver shared by the fixture generator and the tests.

The same driver runs the cases of ``catalogue.TRAJECTORY_FAMILIES`` against the real legacy
``flax.optim`` (in the oracle venv, by ``python -m tools.oracle.gen_trajectories``, which stores
the results as golden fixtures) and against ``flax_optim_compat`` (in the tests, which compare
with those fixtures). Only the ``optim`` module passed in differs, so a passing test means: same
calls, same numbers.

This module must import on both sides: Python 3.11, numpy 1.24 + jax 0.4.13 (oracle) and
today's numpy/jax; it imports neither flax.optim nor flax_optim_compat itself.
"""
import numpy as np

from tests import catalogue
from tests.catalogue import build_def
from tests.catalogue import build_traversal

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


def make_cases(family):
  """The cases of trajectory family ``family`` (catalogue.TRAJECTORY_FAMILIES): each run x
  container x jit (or the run's own variants), with targets and gradients seeded from the
  family name and the run's position in it."""
  spec = catalogue.TRAJECTORY_FAMILIES[family]
  seed = sum(map(ord, family))
  cases = {}
  for n, run in enumerate(spec.runs):
    rng = np.random.RandomState(seed + n)
    target = make_target(rng, run.shapes or spec.shapes, spec.zero)
    grads = {str(i): like(rng, target) for i in range(spec.steps)}
    overrides = {str(i): dict(run.overrides.get(i, {})) for i in range(spec.steps)}
    variants = run.variants or [(c, j) for c in spec.containers for j in spec.jits]
    for container, jit in variants:
      case = {'optimizer': run.spec, 'container': container, 'jit': jit,
              'target': target, 'grads': grads, 'overrides': overrides}
      if run.oracle is not None:
        case['oracle'] = run.oracle
      cases[f'{run.name}-{container}-{"jit" if jit else "eager"}'] = case
  return cases
