"""Adafactor: legacy unit-test goldens, state layouts, the factoring rule, overrides.

Expected values are the legacy flax.optim unit-test goldens (flax 0.5.3's tests/optim_test.py),
values printed by the legacy oracle (flax 0.5.3; cited where used) or hand math in the test.
Whole trajectories against the oracle are in tests/fixtures/trajectories/{Adafactor,
Adafactor_threshold}.
"""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import serialization

import flax_optim_compat as optim
from flax_optim_compat.adafactor import _AdafactorHyperParams
from flax_optim_compat.adafactor import _AdafactorParamState
from tests import _utils

pytestmark = pytest.mark.filterwarnings('ignore::flax_optim_compat.FlaxOptimDeprecationWarning')

# 1 - 2 ** -0.8: the second-moment decay at step 1 with the default decay_rate 0.8.
RHO_1 = 1.0 - 2.0 ** -0.8


def _shapes(tree):
  return jax.tree_util.tree_map(np.shape, tree)


def test_adafactor_signature_and_hyper_params_are_legacy():
  opt_def = optim.Adafactor()
  assert [f.name for f in dataclasses.fields(_AdafactorHyperParams)] == [
      'learning_rate', 'factored', 'multiply_by_parameter_scale', 'beta1', 'decay_rate',
      'step_offset', 'clipping_threshold', 'weight_decay_rate', 'min_dim_size_to_factor',
      'epsilon1', 'epsilon2']
  assert opt_def.hyper_params == _AdafactorHyperParams(
      None, True, True, None, 0.8, 0, 1.0, None, 128, 1e-30, 1e-3)
  assert [f.name for f in dataclasses.fields(_AdafactorParamState)] == ['v_row', 'v_col', 'v', 'm']
  # dtype_momentum is an attribute, not a hyper-param (so not overridable per call)
  assert opt_def.dtype_momentum == np.dtype('float32')
  assert optim.Adafactor(dtype_momentum=jnp.bfloat16).dtype_momentum == jnp.bfloat16
  opt = optim.Adafactor(0.1).create({'w': jnp.ones(2)})
  with pytest.raises(TypeError, match='dtype_momentum'):
    opt.apply_gradient({'w': jnp.ones(2)}, dtype_momentum=jnp.bfloat16)


def test_adafactor_legacy_golden_factored():
  # legacy unit test: Adafactor(0.1, decay_rate=0.8, min_dim_size_to_factor=0), ones(3, 2), step 1
  opt_def = optim.Adafactor(0.1, decay_rate=0.8, min_dim_size_to_factor=0)
  state = optim.OptimizerState(jnp.asarray(1, jnp.int32), _AdafactorParamState(
      jnp.array([0.9, 0.9]), jnp.array([0.1, 0.1, 0.1]), jnp.zeros((1,)), jnp.zeros((1,))))
  params, new_state = opt_def.apply_gradient(
      opt_def.hyper_params, jnp.ones((3, 2)), state, jnp.ones((3, 2)))
  np.testing.assert_allclose(params, 0.9 * np.ones((3, 2)), rtol=1e-6)
  ps = new_state.param_states
  np.testing.assert_allclose(ps.v_row, [0.9574349] * 2, rtol=1e-6)
  np.testing.assert_allclose(ps.v_col, [0.6169143] * 3, rtol=1e-6)
  # the same by hand: rho * old + (1 - rho) * mean(g**2 + 1e-30)
  np.testing.assert_allclose(ps.v_row, RHO_1 * 0.9 + (1 - RHO_1), rtol=1e-6)
  np.testing.assert_allclose(ps.v_col, RHO_1 * 0.1 + (1 - RHO_1), rtol=1e-6)
  assert ps.v.shape == (1,) and ps.m.shape == (1,)
  assert int(new_state.step) == 2


def test_adafactor_legacy_golden_unfactored_with_momentum():
  # legacy unit test: Adafactor(0.1, beta1=0.0, decay_rate=0.8, min_dim_size_to_factor=32)
  opt_def = optim.Adafactor(0.1, beta1=0.0, decay_rate=0.8, min_dim_size_to_factor=32)
  state = optim.OptimizerState(jnp.asarray(1, jnp.int32), _AdafactorParamState(
      jnp.zeros((1,)), jnp.zeros((1,)), 0.5 * jnp.ones((3, 2)), jnp.zeros((3, 2))))
  params, new_state = opt_def.apply_gradient(
      opt_def.hyper_params, jnp.ones((3, 2)), state, jnp.ones((3, 2)))
  ps = new_state.param_states
  np.testing.assert_allclose(params, 0.9 * np.ones((3, 2)), rtol=1e-6)
  np.testing.assert_allclose(ps.v, 0.787174 * np.ones((3, 2)), rtol=1e-6)
  np.testing.assert_allclose(ps.v, RHO_1 * 0.5 + (1 - RHO_1), rtol=1e-6)
  np.testing.assert_allclose(ps.m, 0.1 * np.ones((3, 2)), rtol=1e-6)
  assert ps.v_row.shape == (1,) and ps.v_col.shape == (1,)


# (shape, v_row shape, v_col shape, v shape) from the legacy oracle (the first four are
# also the legacy docstring's examples). Ties go to np.argsort's order: (128, 128) -> (d1, d0) = (0, 1).
FACTORING = [
    ((200, 160), (160,), (200,), (1,)),
    ((4, 200, 160), (4, 160), (4, 200), (1,)),
    ((130, 5, 129), (5, 129), (130, 5), (1,)),
    ((127, 500), (1,), (1,), (127, 500)),
    ((128, 128), (128,), (128,), (1,)),
    ((128, 3, 128), (128, 3), (3, 128), (1,)),
    ((129, 128), (128,), (129,), (1,)),
    ((128, 127), (1,), (1,), (128, 127)),
    ((5,), (1,), (1,), (5,)),
    ((), (1,), (1,), ()),
]


@pytest.mark.parametrize('shape,v_row,v_col,v', FACTORING, ids=str)
def test_adafactor_factoring_rule(shape, v_row, v_col, v):
  state = optim.Adafactor(0.1).init_state({'w': jnp.zeros(shape)}).param_states['w']
  assert _shapes(state) == _AdafactorParamState(v_row, v_col, v, (1,))
  for x in (state.v_row, state.v_col, state.v, state.m):
    assert x.dtype == jnp.float32 and not np.any(x)


def test_adafactor_factoring_flags_and_small_threshold():
  leaf = {'w': jnp.zeros((3, 4, 5))}
  st = optim.Adafactor(0.1, min_dim_size_to_factor=4).init_state(leaf).param_states['w']
  assert _shapes(st) == _AdafactorParamState((3, 4), (3, 5), (1,), (1,))
  st = optim.Adafactor(0.1, min_dim_size_to_factor=5).init_state(leaf).param_states['w']
  assert _shapes(st) == _AdafactorParamState((1,), (1,), (3, 4, 5), (1,))
  st = optim.Adafactor(0.1, factored=False, min_dim_size_to_factor=1).init_state(
      leaf).param_states['w']
  assert _shapes(st) == _AdafactorParamState((1,), (1,), (3, 4, 5), (1,))


def test_adafactor_state_dict_layouts():
  # the legacy msgpack keys: v_row/v_col/v/m per leaf, placeholders (1,) where unused
  params = {'a': {'kernel': jnp.ones((2, 3)), 'bias': jnp.ones(3)}}
  sd = serialization.to_state_dict(optim.Adafactor(0.1).create(params))
  assert _shapes(sd['state']['param_states']) == {'a': {
      'kernel': {'v_row': (1,), 'v_col': (1,), 'v': (2, 3), 'm': (1,)},
      'bias': {'v_row': (1,), 'v_col': (1,), 'v': (3,), 'm': (1,)}}}
  sd = serialization.to_state_dict(
      optim.Adafactor(0.1, beta1=0.9, min_dim_size_to_factor=2).create(params))
  assert _shapes(sd['state']['param_states']) == {'a': {
      'kernel': {'v_row': (2,), 'v_col': (3,), 'v': (1,), 'm': (2, 3)},
      'bias': {'v_row': (1,), 'v_col': (1,), 'v': (3,), 'm': (3,)}}}


@pytest.mark.parametrize('jit', [False, True], ids=['eager', 'jit'])
def test_adafactor_placeholders_survive_updates(jit):
  params = {'k': jnp.ones((3, 4)), 'b': jnp.ones(4)}
  opt = optim.Adafactor(0.1, min_dim_size_to_factor=3).create(params)
  step = lambda o, g: o.apply_gradient(g)
  step = jax.jit(step) if jit else step
  for _ in range(2):
    opt = step(opt, jax.tree_util.tree_map(jnp.ones_like, params))
  ps = opt.state.param_states
  assert _shapes(ps['k']) == _AdafactorParamState((3,), (4,), (1,), (1,))
  assert _shapes(ps['b']) == _AdafactorParamState((1,), (1,), (4,), (1,))
  for placeholder in (ps['k'].v, ps['k'].m, ps['b'].v_row, ps['b'].v_col, ps['b'].m):
    assert placeholder.dtype == jnp.float32 and not np.any(placeholder)


def test_adafactor_state_is_float32_for_bfloat16_params():
  params = {'k': jnp.ones((3, 4), jnp.bfloat16), 'b': jnp.ones(4, jnp.bfloat16)}
  opt = optim.Adafactor(0.1, beta1=0.9, min_dim_size_to_factor=3,
                        dtype_momentum=jnp.bfloat16).create(params)
  opt = opt.apply_gradient(jax.tree_util.tree_map(jnp.ones_like, params))
  ps = opt.state.param_states
  assert opt.target['k'].dtype == jnp.bfloat16
  assert {ps['k'].v_row.dtype, ps['k'].v_col.dtype, ps['b'].v.dtype} == {np.dtype('float32')}
  assert ps['k'].m.dtype == jnp.bfloat16 and ps['b'].m.dtype == jnp.bfloat16
  # first step: v = g**2 = 1, y = 1, scale = 0.1 * rms(1) = 0.1, m = 0.1 * 0.1
  np.testing.assert_allclose(np.float32(ps['b'].m), 0.01, rtol=1e-2)
  np.testing.assert_allclose(np.float32(opt.target['b']), 0.99, rtol=1e-2)


def test_adafactor_integer_params_are_truncated_back():
  # legacy oracle: Adafactor(0.01) on int32 ones, grads ones -> int32 zeros (0.99 truncated),
  # float32 state
  opt = optim.Adafactor(0.01).create({'a': jnp.ones(3, jnp.int32)})
  opt = opt.apply_gradient({'a': jnp.ones(3, jnp.int32)})
  assert opt.target['a'].dtype == jnp.int32
  np.testing.assert_array_equal(opt.target['a'], [0, 0, 0])
  assert opt.state.param_states['a'].v.dtype == jnp.float32


@pytest.mark.parametrize('jit', [False, True], ids=['eager', 'jit'])
def test_adafactor_ignores_overrides_of_constructor_only_fields(jit):
  params = {'k': 1.5 * jnp.ones((3, 4)), 'b': jnp.arange(4.0)}
  grads = {'k': jnp.linspace(-1, 1, 12).reshape(3, 4), 'b': jnp.array([1.0, -2.0, 3.0, 0.5])}
  opt = optim.Adafactor(0.1, min_dim_size_to_factor=3).create(params)
  step = lambda o, kw: o.apply_gradient(grads, **kw)
  step = jax.jit(step) if jit else step
  plain = step(opt, {})
  ignored = step(opt, {'factored': False, 'min_dim_size_to_factor': 1000,
                       'multiply_by_parameter_scale': False})
  _utils.assert_trees_close(ignored.target, plain.target, rtol=0)
  assert _shapes(ignored.state.param_states) == _shapes(plain.state.param_states)
  # ... while a real hyper-param override does change the result
  other = step(opt, {'learning_rate': 0.2})
  assert not np.allclose(other.target['b'], plain.target['b'])


def test_adafactor_beta1_none_then_override():
  # legacy oracle: Adafactor(0.1) then beta1=0.9 for one step: the (1,) placeholder
  # `m` broadcasts; a = [0.99, 0.99], m = [0.01, 0.01]; next plain step: a = 0.891, m = [0.].
  params = {'a': jnp.ones(2), 's': jnp.ones(())}
  grads = jax.tree_util.tree_map(jnp.ones_like, params)
  opt = optim.Adafactor(0.1).create(params)
  opt = opt.apply_gradient(grads, beta1=0.9)
  np.testing.assert_allclose(opt.target['a'], [0.99, 0.99], rtol=1e-6)
  np.testing.assert_allclose(opt.state.param_states['a'].m, [0.01, 0.01], rtol=1e-6)
  # Divergence: legacy's broadcast turned the 0-d parameter 's' (and its m) into shape (1,)
  # (oracle: s = [0.99]), and the next step's shape check would then fail; we keep shape ().
  assert opt.target['s'].shape == () and opt.state.param_states['s'].m.shape == ()
  np.testing.assert_allclose(opt.target['s'], 0.99, rtol=1e-6)
  opt = opt.apply_gradient(grads)
  np.testing.assert_allclose(opt.target['a'], [0.891, 0.891], rtol=1e-6)
  assert _shapes(opt.state.param_states['a'].m) == (1,)
  assert not np.any(opt.state.param_states['a'].m)


def test_adafactor_missing_learning_rate():
  opt = optim.Adafactor().create({'w': jnp.ones(2)})
  with pytest.raises(AssertionError, match='no learning rate provided'):
    opt.apply_gradient({'w': jnp.ones(2)})
  # ... and a per-call rate works
  assert opt.apply_gradient({'w': jnp.ones(2)}, learning_rate=0.1).target['w'][0] == pytest.approx(0.9)


def test_adafactor_step_offset_beyond_step_is_nan_like_legacy():
  # legacy (checked in the oracle): step_offset=1 at step 0 -> 0 ** -0.8 -> NaN parameters
  opt = optim.Adafactor(0.1, step_offset=1).create({'w': jnp.ones(2)})
  assert np.all(np.isnan(opt.apply_gradient({'w': jnp.ones(2)}).target['w']))


def test_adafactor_weight_decay_is_not_scaled_by_learning_rate():
  # p' = (1 - w) * p - u with u = lr * rms(p) * y; zero grads -> y = 0, so p' = (1 - w) * p
  opt = optim.Adafactor(0.5, weight_decay_rate=0.1, epsilon1=1.0).create({'w': 2 * jnp.ones(3)})
  opt = opt.apply_gradient({'w': jnp.zeros(3)})
  np.testing.assert_allclose(opt.target['w'], 1.8 * np.ones(3), rtol=1e-6)
