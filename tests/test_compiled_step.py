"""An un-traced step through ``flax_optim_compat._compiled_step``: same numbers, no recompile per
value.

Every expected value here is the def's own step: called op by op (the un-cached eager path), the
fast path matches it to float rounding (see ``_assert_close``); jitted with the same
hyper-params, bit for bit.
"""
import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import struct

import flax_optim_compat as optim
from flax_optim_compat import _compiled_step
from flax_optim_compat import _hyper
from tests import catalogue

pytestmark = pytest.mark.filterwarnings('ignore::flax_optim_compat.FlaxOptimDeprecationWarning')


def _defs():
  """``(name, def factory, a float hyper-param to override, two values for it)``: the
  catalogue's generic cases, with two of their override values that are none of the def's own
  values (an own value stays a static constant of the compiled step)."""
  def own(hp, name):  # the values of field `name` in (nested) hyper-params
    if isinstance(hp, (list, tuple)):
      return {v for h in hp for v in own(h, name)}
    if not dataclasses.is_dataclass(hp):
      return set()
    return {v for f in dataclasses.fields(hp)
            for v in ({getattr(hp, name)} if f.name == name else own(getattr(hp, f.name), name))}

  out = []
  for case in catalogue.GENERIC:
    taken = own(case.make(optim).hyper_params, case.override)
    values = tuple(v for v in case.override_values if v not in taken)[:2]
    assert len(values) == 2, case
    out.append((case.name, functools.partial(case.make, optim), case.override, values))
  return out


DEFS = _defs()


def _tree(dtype=jnp.float32, seed=0):
  rng = np.random.RandomState(seed)
  return jax.tree_util.tree_map(lambda x: jnp.asarray(x, dtype), {
      'dense': {'kernel': rng.standard_normal((4, 3)), 'bias': rng.standard_normal(3)},
      'out': rng.standard_normal((3, 2))})


def _assert_close(actual, expected, ulps=16):
  """Same trees, types and dtypes; values within ``ulps`` float ulps of each leaf's largest value.

  Compiled, XLA contracts ``p + lr * u``-style expressions into fused multiply-adds (one
  rounding instead of two), so compiled and op-by-op steps differ by about one rounding of
  the operands; where the result nearly cancels that is many ulps of the result itself, hence
  the leaf's scale.
  """
  assert jax.tree_util.tree_structure(actual) == jax.tree_util.tree_structure(expected)
  expected_leaves = jax.tree_util.tree_leaves(expected)
  for (path, a), e in zip(jax.tree_util.tree_flatten_with_path(actual)[0], expected_leaves):
    where = jax.tree_util.keystr(path)
    assert isinstance(a, jax.Array), (where, type(a))
    assert a.dtype == e.dtype and a.shape == e.shape, (where, a.dtype, e.dtype)
    a64, e64 = np.asarray(a, np.float64), np.asarray(e, np.float64)
    if not jnp.issubdtype(a.dtype, jnp.floating):
      np.testing.assert_array_equal(a64, e64, err_msg=where)
      continue
    bound = ulps * float(jnp.finfo(a.dtype).eps) * np.abs(e64).max(initial=0.0)
    assert np.abs(a64 - e64).max(initial=0.0) <= bound, (where, a, e)


def _assert_identical(actual, expected):
  assert jax.tree_util.tree_structure(actual) == jax.tree_util.tree_structure(expected)
  for a, e in zip(jax.tree_util.tree_leaves(actual), jax.tree_util.tree_leaves(expected)):
    assert a.dtype == e.dtype
    np.testing.assert_array_equal(np.asarray(a, np.float64), np.asarray(e, np.float64))


def _fast(opt_def, hp, params, state, grads):
  return _compiled_step.apply_gradient(opt_def, hp, params, state, grads)


@pytest.fixture(autouse=True)
def _fresh_cache():
  _compiled_step.cache_clear()
  yield
  _compiled_step.cache_clear()


@pytest.mark.parametrize('dtype', [jnp.float32, jnp.bfloat16], ids=['float32', 'bfloat16'])
@pytest.mark.parametrize('name,make,override,values', DEFS, ids=[d[0] for d in DEFS])
def test_same_numbers_as_the_uncached_step(name, make, override, values, dtype):
  del name
  opt_def = make()
  params = _tree(dtype)
  state = opt_def.init_state(params)
  fast_params, fast_state = params, state
  for step, overrides in enumerate([{}, {override: values[0]}, {override: values[1]}, {}]):
    grads = _tree(dtype, seed=step + 1)
    hp = opt_def.update_hyper_params(**overrides)
    params, state = opt_def.apply_gradient(hp, params, state, grads)
    fast_params, fast_state = _fast(opt_def, hp, fast_params, fast_state, grads)
    _assert_close((fast_params, fast_state), (params, state))
  # one compiled step without overrides, one for the override's values
  assert _compiled_step.cache_info()['traces'] == 2


@pytest.mark.parametrize('name,make,override,values', DEFS, ids=[d[0] for d in DEFS])
def test_new_override_value_does_not_recompile(name, make, override, values):
  del name
  opt_def = make()
  params = _tree()
  state = opt_def.init_state(params)
  for value in values + (jnp.asarray(values[0], jnp.float32), jnp.asarray(values[1], jnp.float32)):
    params, state = _fast(opt_def, opt_def.update_hyper_params(**{override: value}), params,
                          state, _tree(seed=1))
  info = _compiled_step.cache_info()
  # a Python float override, then a jax array: one trace each, whatever the values
  assert info['traces'] == 2, info
  assert info['hits'] == 2, info


@pytest.mark.parametrize('name,make,override,values', DEFS, ids=[d[0] for d in DEFS])
def test_same_bits_as_the_jitted_step(name, make, override, values):
  """The compiled step is today's ``jax.jit`` of the def's step: the very same bits."""
  del name
  opt_def = make()
  params, grads = _tree(), _tree(seed=1)
  state = opt_def.init_state(params)
  hp = opt_def.hyper_params
  expected = jax.jit(lambda p, s, g: opt_def.apply_gradient(hp, p, s, g))(params, state, grads)
  _assert_identical(_fast(opt_def, hp, params, state, grads), expected)
  # an override is an argument of the compiled step, as in a jitted training step
  step = jax.jit(lambda v, p, s, g: opt_def.apply_gradient(
      opt_def.update_hyper_params(**{override: v}), p, s, g))
  expected = step(values[0], params, state, grads)
  hp = opt_def.update_hyper_params(**{override: values[0]})
  _assert_identical(_fast(opt_def, hp, params, state, grads), expected)


def test_static_hyper_params_are_part_of_the_key():
  opt_def = optim.Momentum(learning_rate=0.1, beta=0.9)
  params, grads = _tree(), _tree(seed=1)
  state = opt_def.init_state(params)
  for overrides in ({}, {'nesterov': True}, {'nesterov': True}, {'weight_decay': 0},
                    {'weight_decay': 1e-3}, {'weight_decay': 2e-3}, {'weight_decay': 0.0}):
    hp = opt_def.update_hyper_params(**overrides)
    expected = opt_def.apply_gradient(hp, params, state, grads)
    _assert_close(_fast(opt_def, hp, params, state, grads), expected)
  # {} (weight_decay=0 is the def's own value), nesterov=True, a float weight decay (2e-3
  # reuses 1e-3's step), and the float zero, static: it removes the decay term
  assert _compiled_step.cache_info()['traces'] == 4, _compiled_step.cache_info()


def test_new_shapes_retrace_and_the_cache_is_bounded(monkeypatch):
  monkeypatch.setattr(_compiled_step, 'MAX_ENTRIES', 3)
  opt_def = optim.GradientDescent(learning_rate=0.1)
  # same structure, five shapes: one entry, whose jax.jit traces once per shape
  for n in range(1, 6):
    params = {'w': jnp.ones(n)}
    new_params, _ = _fast(opt_def, opt_def.hyper_params, params, opt_def.init_state(params),
                          {'w': jnp.full(n, float(n))})
    np.testing.assert_allclose(new_params['w'], (1 - 0.1 * n) * np.ones(n), rtol=1e-6)
  info = _compiled_step.cache_info()
  assert info['traces'] == 5 and info['entries'] == 1, info
  # five structures: five entries, the oldest dropped past MAX_ENTRIES
  for n in range(5):
    params = {f'w{n}': jnp.ones(2)}
    _fast(opt_def, opt_def.hyper_params, params, opt_def.init_state(params), params)
  info = _compiled_step.cache_info()
  assert info['traces'] == 10 and info['entries'] == 3, info


class _SignSGD(optim.OptimizerDef):
  """A legacy per-leaf def that branches in Python on a concrete value."""

  def init_param_state(self, param):
    return ()

  def apply_param_gradient(self, step, hyper_params, param, state, grad):
    if float(jnp.sum(grad)) > 0:  # fails under tracing: must keep running eagerly
      return param - hyper_params.learning_rate, state
    return param + hyper_params.learning_rate, state


@struct.dataclass
class _HP:
  learning_rate: float


def test_user_per_leaf_def_keeps_running_eagerly():
  opt_def = _SignSGD(_HP(0.5))
  params = {'a': jnp.array([1.0]), 'b': jnp.array([1.0])}
  state = opt_def.init_state(params)
  new_params, new_state = _fast(opt_def, opt_def.hyper_params, params, state,
                                {'a': jnp.array([2.0]), 'b': jnp.array([-2.0])})
  assert float(new_params['a'][0]) == 0.5 and float(new_params['b'][0]) == 1.5
  assert int(new_state.step) == 1
  assert _compiled_step.cache_info()['traces'] == 0


def test_subclass_of_a_builtin_is_not_compiled():
  class MyAdam(optim.Adam):
    pass

  opt_def = MyAdam(learning_rate=0.1)
  params = _tree()
  _fast(opt_def, opt_def.hyper_params, params, opt_def.init_state(params), _tree(seed=1))
  assert _compiled_step.cache_info()['misses'] == 0


def test_traced_inputs_run_the_step_directly():
  opt_def = optim.Adam(learning_rate=0.1)
  params, grads = _tree(), _tree(seed=1)
  state = opt_def.init_state(params)

  @jax.jit
  def step(params, state, lr):
    return _fast(opt_def, opt_def.update_hyper_params(learning_rate=lr), params, state, grads)

  jitted = step(params, state, 0.1)
  _assert_close(jitted, opt_def.apply_gradient(opt_def.hyper_params, params, state, grads))
  assert _compiled_step.cache_info()['misses'] == 0


def test_bad_grads_raise_as_the_uncached_step_and_nothing_is_cached():
  opt_def = optim.Adam(learning_rate=0.1)
  params = _tree()
  state = opt_def.init_state(params)
  bad = {'dense': {'kernel': jnp.ones((4, 3)), 'bias': jnp.ones(4)}, 'out': jnp.ones((3, 2))}
  with pytest.raises(ValueError) as direct:
    opt_def.apply_gradient(opt_def.hyper_params, params, state, bad)
  with pytest.raises(ValueError) as fast:
    _fast(opt_def, opt_def.hyper_params, params, state, bad)
  assert str(fast.value) == str(direct.value)
  assert "'/dense/bias'" in str(fast.value)
  missing = {'dense': {'kernel': jnp.ones((4, 3))}, 'out': jnp.ones((3, 2))}
  with pytest.raises(ValueError, match='missing in the grads'):
    _fast(opt_def, opt_def.hyper_params, params, state, missing)
  assert _compiled_step.cache_info()['entries'] == 0


def test_bad_shapes_after_a_cached_step_raise_as_the_uncached_step():
  """Same structure, wrong shape: the cached entry's jax.jit retraces and the def's own check
  raises; the entry stays usable."""
  opt_def = optim.Adam(learning_rate=0.1)
  params = _tree()
  state = opt_def.init_state(params)
  _fast(opt_def, opt_def.hyper_params, params, state, _tree(seed=1))
  bad = jax.tree_util.tree_map(lambda x: jnp.ones(x.shape + (1,)), _tree(seed=1))
  with pytest.raises(ValueError) as direct:
    opt_def.apply_gradient(opt_def.hyper_params, params, state, bad)
  with pytest.raises(ValueError) as fast:
    _fast(opt_def, opt_def.hyper_params, params, state, bad)
  assert str(fast.value) == str(direct.value)
  _assert_close(_fast(opt_def, opt_def.hyper_params, params, state, _tree(seed=2)),
                opt_def.apply_gradient(opt_def.hyper_params, params, state, _tree(seed=2)))
  info = _compiled_step.cache_info()
  assert info['entries'] == 1 and info['hits'] == 2, info


def test_missing_learning_rate_raises_as_the_uncached_step():
  opt_def = optim.Momentum(beta=0.9)
  params = _tree()
  state = opt_def.init_state(params)
  with pytest.raises(_hyper.MissingLearningRateError) as direct:
    opt_def.apply_gradient(opt_def.hyper_params, params, state, _tree(seed=1))
  with pytest.raises(_hyper.MissingLearningRateError) as fast:
    _fast(opt_def, opt_def.hyper_params, params, state, _tree(seed=1))
  assert str(fast.value) == str(direct.value)
  assert _compiled_step.cache_info()['entries'] == 0
  # and a rate given per step works, without a recompile per value
  for lr in (0.1, 0.2, 0.3):
    _fast(opt_def, opt_def.update_hyper_params(learning_rate=lr), params, state, _tree(seed=1))
  assert _compiled_step.cache_info()['traces'] == 1


@pytest.mark.parametrize('make,cached', [
    (lambda: optim.Adam(learning_rate=0.1), True),
    (lambda: optim.WeightNorm(optim.Momentum(learning_rate=0.1)), True),
    (lambda: optim.WeightNorm(_SignSGD(_HP(0.5))), False),  # a part that is not declared pure
    (lambda: optim.from_optax(optax.sgd, learning_rate=0.1, momentum=0.9), True),
    (lambda: optim.from_optax(optax.MultiSteps(optax.sgd(0.1), 2)), True),  # takes no override
], ids=['Adam', 'WeightNorm-Momentum', 'WeightNorm-per-leaf', 'from_optax', 'MultiSteps'])
def test_optimizer_apply_gradient_takes_the_cache_only_for_pure_defs(make, cached):
  opt_def = make()
  assert opt_def.pure_jax_step == cached
  optimizer = opt_def.create(_tree())
  expected = optimizer
  for seed in (1, 2):
    # 0.3, 0.6: neither is the def's own 0.1, so both are arguments of one compiled step
    overrides = {} if opt_def.hyper_params == {} else {'learning_rate': 0.3 * seed}
    optimizer = optimizer.apply_gradient(_tree(seed=seed), **overrides)
    expected = expected.replace(**dict(zip(('target', 'state'), opt_def.apply_gradient(
        opt_def.update_hyper_params(**overrides), expected.target, expected.state,
        _tree(seed=seed)))))
  _assert_close((optimizer.target, optimizer.state), (expected.target, expected.state))
  assert _compiled_step.cache_info()['traces'] == (1 if cached else 0)
