"""Generic properties of every optimizer of the catalogue x float32/bfloat16 x jit/eager."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import flax_optim_compat as optim
from tests import _utils
from tests.catalogue import GENERIC

pytestmark = pytest.mark.filterwarnings('ignore::flax_optim_compat.FlaxOptimDeprecationWarning')

DTYPES = [jnp.float32, jnp.bfloat16]


@functools.lru_cache(maxsize=None)
def _quadratic_problem(dtype, scalar_params=True, start=0.0):
  """``(params, loss, grad)``: a problem is the same for every optimizer, so it is built once,
  its ``grad`` (jitted) compiled once per problem, not once per optimizer."""
  rng = np.random.RandomState(0)
  center = {'a': rng.standard_normal(3), 'b': {'k': rng.standard_normal((2, 2))},
            's': np.float32(rng.standard_normal())}
  if not scalar_params:
    del center['s']
  center = jax.tree_util.tree_map(lambda c: jnp.asarray(c, dtype), center)
  params = jax.tree_util.tree_map(lambda c: jnp.full_like(c, start), center)

  def loss(p):
    return sum(jnp.sum((x.astype(jnp.float32) - c.astype(jnp.float32)) ** 2)
               for x, c in zip(jax.tree_util.tree_leaves(p), jax.tree_util.tree_leaves(center)))

  return params, loss, jax.jit(jax.grad(loss))


def _step_fn(jit, grad):
  """One training step: jitted whole, or the optimizer's own step called eagerly (outside any
  jit) on gradients from the problem's jitted ``grad`` (computed op by op, the gradient alone
  cost most of an eager case, and it is not what is tested)."""
  if not jit:
    return lambda optimizer, loss: optimizer.apply_gradient(grad(optimizer.target))
  def step(optimizer, loss):
    return optimizer.apply_gradient(jax.grad(loss)(optimizer.target))
  return jax.jit(step, static_argnums=1)


@pytest.mark.parametrize('jit', [True, False], ids=['jit', 'eager'])
@pytest.mark.parametrize('dtype', DTYPES, ids=['float32', 'bfloat16'])
@pytest.mark.parametrize('entry', GENERIC, ids=repr)
def test_converges_on_quadratic_and_keeps_dtypes(entry, dtype, jit):
  params, loss, grad = _quadratic_problem(dtype, entry.scalar_params, entry.start)
  optimizer = entry.make(optim).create(params)
  created = optimizer
  step = _step_fn(jit, grad)
  for _ in range(entry.steps if jit else min(entry.steps, 40)):
    optimizer = step(optimizer, loss)
  # dtypes and container types of target and state never change
  _utils.assert_trees_equal_types(optimizer.target, created.target)
  _utils.assert_trees_equal_types(optimizer.state.param_states, created.state.param_states)
  assert optimizer.state.step.dtype == jnp.int32
  if jit:
    assert float(loss(optimizer.target)) < 0.05 * float(loss(params))
  else:
    assert float(loss(optimizer.target)) < 0.9 * float(loss(params))


@pytest.mark.parametrize('entry', GENERIC, ids=repr)
def test_override_value_change_does_not_retrace(entry):
  params, loss, _ = _quadratic_problem(jnp.float32, entry.scalar_params, entry.start)
  optimizer = entry.make(optim).create(params)

  def step(optimizer, value):
    return optimizer.apply_gradient(jax.grad(loss)(optimizer.target), **{entry.override: value})

  counter = _utils.TraceCounter(step)
  jitted = jax.jit(counter)
  results = []
  for value in entry.override_values:
    results.append(jitted(optimizer, value).target)
  assert counter.count == 1
  # ... and the traced value is really used: each value gives its own result
  firsts = [float(jax.tree_util.tree_leaves(r)[0][0]) for r in results]
  assert len(set(firsts)) == len(firsts), firsts
