"""WeightNorm: legacy unit-test goldens, gradients by hand, state layouts, overrides.

Expected values are the legacy flax.optim unit-test goldens (flax 0.5.3's tests/optim_test.py),
values printed by the legacy oracle (flax 0.5.3; cited where used) or hand math in the test.
Whole trajectories against the oracle are in tests/fixtures/trajectories/WeightNorm.
"""
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import serialization

import flax_optim_compat as optim
from flax_optim_compat.momentum import _MomentumHyperParams
from flax_optim_compat.weight_norm import _WeightNormHyperParams
from flax_optim_compat.weight_norm import _WeightNormParamState
from tests import _utils

pytestmark = pytest.mark.filterwarnings('ignore::flax_optim_compat.FlaxOptimDeprecationWarning')


def _shapes(tree):
  return jax.tree_util.tree_map(np.shape, tree)


def test_weight_norm_legacy_golden_momentum():
  # legacy unit test: WeightNorm(Momentum(0.1)), 2 * ones(2, 2), fresh state, grads ones
  opt_def = optim.WeightNorm(optim.Momentum(0.1))
  params = 2 * jnp.ones((2, 2))
  state = opt_def.init_state(params)
  new_params, new_state = opt_def.apply_gradient(
      opt_def.hyper_params, params, state, jnp.ones((2, 2)))
  np.testing.assert_allclose(new_params, 1.9 * np.ones((2, 2)), rtol=1e-6)
  ps = new_state.param_states
  assert isinstance(ps, _WeightNormParamState)
  np.testing.assert_allclose(ps.direction, 2 ** -0.5 * np.ones((2, 2)), rtol=1e-6)
  np.testing.assert_allclose(ps.scale, np.sqrt(2 * 1.9 ** 2) * np.ones((1, 2)), rtol=1e-6)
  assert ps.direction_state.momentum.shape == (2, 2)
  assert ps.scale_state.momentum.shape == (1, 2)
  assert int(new_state.step) == 1


def _weight_norm_grads_by_hand(v, s, g, eps):
  """Legacy WeightNorm gradients: r = (sum v**2 + eps)**-1/2; ds = sum g v r; dv = g s r - v (sum g v) s r**3."""
  axes = tuple(range(v.ndim - 1))
  r = (np.sum(v * v, axes, keepdims=True) + eps) ** -0.5
  gv = np.sum(g * v, axes, keepdims=True)
  return g * s * r - v * gv * s * r ** 3, gv * r


@pytest.mark.parametrize('jit', [False, True], ids=['eager', 'jit'])
def test_weight_norm_gradients_by_hand(jit):
  rng = np.random.RandomState(0)
  params = {'k': rng.standard_normal((3, 2, 4)).astype(np.float32),
            'row': rng.standard_normal((1, 3)).astype(np.float32),
            'b': rng.standard_normal(4).astype(np.float32)}
  grads = jax.tree_util.tree_map(lambda p: rng.standard_normal(p.shape).astype(np.float32), params)
  lr, decay, eps = 0.1, 0.05, 1e-3
  opt = optim.WeightNorm(optim.GradientDescent(lr), wn_decay=decay, wn_eps=eps).create(
      jax.tree_util.tree_map(jnp.asarray, params))
  step = lambda o: o.apply_gradient(jax.tree_util.tree_map(jnp.asarray, grads))
  new = (jax.jit(step) if jit else step)(opt)
  # init: s = sqrt(sum over all axes but the last of p**2 + eps), v = p / s
  p = params['k'].astype(np.float64)
  s = np.sqrt(np.sum(p * p, (0, 1), keepdims=True) + eps)
  v = p / s
  ps = opt.state.param_states['k']
  np.testing.assert_allclose(ps.scale, s, rtol=1e-6)
  np.testing.assert_allclose(ps.direction, v, rtol=1e-6)
  dv, ds = _weight_norm_grads_by_hand(v, s, grads['k'].astype(np.float64), eps)
  v_new, s_new = v - lr * (dv + decay * v), s - lr * ds
  nps = new.state.param_states['k']
  np.testing.assert_allclose(nps.direction, v_new, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(nps.scale, s_new, rtol=1e-5)
  w_new = v_new * s_new / np.sqrt(np.sum(v_new * v_new, (0, 1), keepdims=True) + eps)
  np.testing.assert_allclose(new.target['k'], w_new, rtol=1e-5, atol=1e-6)
  # not normalised ((1, n) and 1-D): a plain inner step, no decay, no scale
  for name in ('row', 'b'):
    np.testing.assert_allclose(new.target[name], params[name] - lr * grads[name], rtol=1e-6)
    assert new.state.param_states[name].scale == ()
    assert new.state.param_states[name].scale_state == ()


def test_weight_norm_state_dict_layouts():
  # the legacy msgpack keys: direction_state/scale_state/direction/scale per leaf
  params = {'a': {'kernel': jnp.ones((2, 3)), 'bias': jnp.ones(3)}}
  sd = serialization.to_state_dict(optim.WeightNorm(optim.Momentum(0.1)).create(params))
  assert _shapes(sd['state']['param_states']) == {'a': {
      'kernel': {'direction_state': {'momentum': (2, 3)}, 'scale_state': {'momentum': (1, 3)},
                 'direction': (2, 3), 'scale': (1, 3)},
      'bias': {'direction_state': {'momentum': (3,)}, 'scale_state': {}, 'direction': (3,),
               'scale': {}}}}
  sd = serialization.to_state_dict(optim.WeightNorm(optim.Adam(0.1)).create(params))
  assert _shapes(sd['state']['param_states']) == {'a': {
      'kernel': {'direction_state': {'grad_ema': (2, 3), 'grad_sq_ema': (2, 3)},
                 'scale_state': {'grad_ema': (1, 3), 'grad_sq_ema': (1, 3)},
                 'direction': (2, 3), 'scale': (1, 3)},
      'bias': {'direction_state': {'grad_ema': (3,), 'grad_sq_ema': (3,)}, 'scale_state': {},
               'direction': (3,), 'scale': {}}}}
  assert _shapes(sd['target']) == {'a': {'kernel': (2, 3), 'bias': (3,)}}


def test_weight_norm_reads_direction_and_scale_from_the_state():
  # legacy (verified): the target's values are ignored, only its structure is used
  params = {'k': jnp.arange(1.0, 7.0).reshape(3, 2)}
  grads = {'k': jnp.ones((3, 2))}
  opt = optim.WeightNorm(optim.Adam(0.1)).create(params)
  tampered = opt.replace(target={'k': jnp.zeros((3, 2))})
  _utils.assert_trees_close(tampered.apply_gradient(grads).target,
                            opt.apply_gradient(grads).target, rtol=0)


def test_weight_norm_update_hyper_params():
  wn = optim.WeightNorm(optim.Momentum(0.1, beta=0.9), wn_decay=0.1)
  assert wn.hyper_params == _WeightNormHyperParams(
      _MomentumHyperParams(0.1, 0.9, 0, False), 0.1, 1e-8)
  hp = wn.update_hyper_params(learning_rate=0.5, wn_eps=1e-3)
  assert hp == _WeightNormHyperParams(_MomentumHyperParams(0.5, 0.9, 0, False), 0.1, 1e-3)
  assert wn.hyper_params.inner.learning_rate == 0.1  # per call only
  # hyper_params= is forwarded to the wrapped def: it replaces the *inner* hyper-params
  inner = _MomentumHyperParams(0.2, 0.5, 0, False)
  hp = wn.update_hyper_params(hyper_params=inner, wn_decay=0.0)
  assert hp == _WeightNormHyperParams(inner, 0.0, 1e-8)
  with pytest.raises(TypeError, match='foo'):
    wn.update_hyper_params(foo=1.0)


def test_weight_norm_traced_overrides_do_not_retrace():
  params = {'k': jnp.arange(1.0, 7.0).reshape(3, 2)}
  opt = optim.WeightNorm(optim.Momentum(0.1)).create(params)

  def step(opt, wn_decay, lr):
    return opt.apply_gradient({'k': jnp.ones((3, 2))}, wn_decay=wn_decay, learning_rate=lr)

  counter = _utils.TraceCounter(step)
  jitted = jax.jit(counter)
  results = [jitted(opt, d, 0.1).target['k'] for d in (0.0, 0.5, 1.0)]
  assert counter.count == 1
  assert not np.allclose(results[0], results[1]) and not np.allclose(results[1], results[2])


def test_weight_norm_wraps_adam_and_counts_one_step():
  params = {'k': jnp.arange(1.0, 7.0).reshape(3, 2), 'b': jnp.ones(2)}
  grads = {'k': jnp.arange(6.0).reshape(3, 2) - 2.0, 'b': jnp.ones(2)}
  created = optim.WeightNorm(optim.Adam(0.1)).create(params)
  opt = created.apply_gradient(grads)
  assert int(opt.state.step) == 1
  # 1-D leaf: one plain Adam step (-lr * g / |g| at the first step)
  np.testing.assert_allclose(opt.target['b'], [0.9, 0.9], rtol=1e-6)
  np.testing.assert_allclose(opt.state.param_states['b'].direction_state.grad_ema, [0.1, 0.1],
                             rtol=1e-6)
  # one inner Adam step over (direction, scale): grad_ema = (1 - beta1) * (dv, ds)
  v = np.asarray(created.state.param_states['k'].direction, np.float64)
  s = np.asarray(created.state.param_states['k'].scale, np.float64)
  dv, ds = _weight_norm_grads_by_hand(v, s, np.asarray(grads['k'], np.float64), 1e-8)
  ps = opt.state.param_states['k']
  np.testing.assert_allclose(ps.scale_state.grad_ema, 0.1 * ds, rtol=1e-5)
  np.testing.assert_allclose(ps.direction_state.grad_ema, 0.1 * dv, rtol=1e-4, atol=1e-7)
  np.testing.assert_allclose(ps.scale, s - 0.1 * np.sign(ds), rtol=1e-5)


def test_weight_norm_rejects_scalar_and_integer_params():
  # legacy: IndexError: tuple index out of range
  with pytest.raises(ValueError, match="'/a/s'.*scalar|scalar.*'/a/s'"):
    optim.WeightNorm(optim.Adam(0.1)).create({'a': {'k': jnp.ones((2, 2)), 's': jnp.ones(())}})
  # legacy: TypeError (float0 cotangent) at the first update
  with pytest.raises(TypeError, match="'/k'.*int32"):
    optim.WeightNorm(optim.Momentum(0.1)).create({'k': jnp.ones((2, 2), jnp.int32)})


def test_weight_norm_bad_grads_name_the_path():
  opt = optim.WeightNorm(optim.Momentum(0.1)).create({'k': jnp.ones((2, 3))})
  with pytest.raises(ValueError, match="'/k'"):
    opt.apply_gradient({'k': jnp.ones((3, 2))})


def test_weight_norm_has_no_per_leaf_protocol():
  # legacy: NotImplementedError (so it cannot be a MultiOptimizer sub-optimizer)
  wn = optim.WeightNorm(optim.Momentum(0.1))
  with pytest.raises(NotImplementedError):
    wn.init_param_state(jnp.ones((2, 2)))


def test_weight_norm_warns_twice_like_legacy():
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter('always')
    optim.WeightNorm(optim.Adam(0.1))
  assert [w.category for w in caught] == [optim.FlaxOptimDeprecationWarning] * 2
