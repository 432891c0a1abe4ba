"""Single-step golden values of the legacy unit tests (flax 0.5.3's tests/optim_test.py) and hand-math
checks of where our optimizers deliberately differ from the natural optax chain.

Every expected value is either the legacy test's number (re-run against flax 0.5.3) or computed
here in float64 from the legacy formula.
"""
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import flax_optim_compat as optim
from flax_optim_compat.adabelief import _AdaBeliefParamState
from flax_optim_compat.adadelta import _AdadeltaParamState
from flax_optim_compat.adagrad import _AdagradParamState
from flax_optim_compat.rmsprop import _RMSPropParamState

# float32 results vs values printed with 7 digits: a few ulps.
RTOL = 2e-6


def _arr(*values):
  return np.array(values, np.float32)


def _apply(opt_def, params, step, param_state, grads, **overrides):
  hyper_params = opt_def.update_hyper_params(**overrides)
  return opt_def.apply_gradient(hyper_params, params, optim.OptimizerState(step, param_state),
                                grads)


# ----------------------------------------------------------------------------- legacy unit-test goldens

# (optimizer, state in, grad, expected param, expected state out) for params [1.] at step 1.
GOLDENS = {
    'AdaBelief': (lambda: optim.AdaBelief(0.1, 0.2, 0.9, 0.01, 0.0),
                  _AdaBeliefParamState(_arr(0.1), _arr(0.9)), _arr(4.),
                  _arr(0.8449397), _AdaBeliefParamState(_arr(3.22), _arr(0.88084))),
    'Adadelta': (lambda: optim.Adadelta(0.1, 0.9, 1e-6, 0.1),
                 _AdadeltaParamState(_arr(0.), _arr(0.)), _arr(1.),
                 _arr(0.9896838), _AdadeltaParamState(_arr(0.1), _arr(9.999902e-7))),
    'Adagrad': (lambda: optim.Adagrad(0.1, 0.01), _AdagradParamState(_arr(0.1)), _arr(4.),
                _arr(0.9005588), _AdagradParamState(_arr(16.1))),
    'RMSProp': (lambda: optim.RMSProp(0.1, 0.9, 0.01), _RMSPropParamState(_arr(0.1), None),
                _arr(4.), _arr(0.6946565), _RMSPropParamState(_arr(1.69), None)),
    'RMSProp-centered': (lambda: optim.RMSProp(0.1, 0.9, 0.01, centered=True),
                         _RMSPropParamState(_arr(0.1), _arr(0.1)), _arr(4.),
                         _arr(0.670543), _RMSPropParamState(_arr(1.69), _arr(0.49))),
}


@pytest.mark.parametrize('name', list(GOLDENS))
def test_single_step_matches_legacy_unit_test(name):
  make, state_in, grad, expected_param, expected_state = GOLDENS[name]
  new_param, new_state = _apply(make(), _arr(1.), 1, state_in, grad)
  assert int(new_state.step) == 2
  np.testing.assert_allclose(new_param, expected_param, rtol=RTOL)
  assert type(new_state.param_states) is type(expected_state)
  for field, expected in vars(expected_state).items():
    actual = getattr(new_state.param_states, field)
    if expected is None:
      assert actual is None, f'{field}: {actual!r}'
    else:
      np.testing.assert_allclose(actual, expected, rtol=RTOL, err_msg=field)


def test_golden_inputs_are_hand_checkable():
  # Adagrad: G' = 0.1 + 16; p' = 1 - 0.1 * 4 / (sqrt(16.1) + 0.01)
  assert abs((1 - 0.4 / (np.sqrt(16.1) + 0.01)) - 0.9005588) < 1e-7
  # RMSProp centered: v' = 0.09 + 1.6, mg' = 0.01 + 0.4, p' = 1 - 0.4 / (sqrt(1.69 - 0.49^2) + 0.01)
  assert abs((1 - 0.4 / (np.sqrt(1.69 - 0.49 ** 2) + 0.01)) - 0.670543) < 1e-6


# ----------------------------------------------------------------------------- Adagrad

def test_adagrad_eps_outside_sqrt_unlike_optax():
  # Tiny gradients make G' comparable to eps, where the placement of eps matters most.
  p, g, lr, eps = _arr(1., -2.), _arr(0.01, -0.003), 0.1, 0.01
  opt_def = optim.Adagrad(lr, eps)
  new_p, new_state = _apply(opt_def, p, 0, opt_def.init_state(p).param_states, g)
  g64 = g.astype(np.float64)
  legacy = p - lr * g64 / (np.sqrt(0.0 + g64 ** 2) + eps)  # accumulator starts at 0
  np.testing.assert_allclose(new_p, legacy, rtol=RTOL)
  np.testing.assert_allclose(new_state.param_states.G, g64 ** 2, rtol=RTOL)
  # optax.adagrad: eps inside the root; the difference is a large fraction of the step.
  tx = optax.adagrad(lr, initial_accumulator_value=0.0, eps=eps)
  updates, _ = tx.update(jnp.asarray(g), tx.init(jnp.asarray(p)))
  assert np.max(np.abs((p + updates) - legacy)) > 0.3 * np.max(np.abs(legacy - p))


def test_adagrad_zero_eps_and_zero_grad_is_nan_like_legacy():
  opt_def = optim.Adagrad(0.1, eps=0.0)
  p = _arr(1.)
  new_p, _ = _apply(opt_def, p, 0, opt_def.init_state(p).param_states, _arr(0.))
  assert np.isnan(np.asarray(new_p)).all()


# ----------------------------------------------------------------------------- LAMB

def _lamb_first_step(p, g, lr, eps, wd):
  """Legacy LAMB at step 0 in float64: m_hat = g, v_hat = g^2."""
  u = g / (np.abs(g) + eps) + wd * p
  pn, un = np.linalg.norm(p), np.linalg.norm(u)
  ratio = pn / un if pn + un > 0 else 1.0
  return p - ratio * lr * u


@pytest.mark.parametrize('wd', [0.0, 0.01])
def test_lamb_zero_param_never_moves_unlike_optax(wd):
  params = {'w': _arr(3., 4.), 'b': _arr(0., 0.)}
  grads = {'w': _arr(1., -2.), 'b': _arr(0.5, -1.)}
  opt_def = optim.LAMB(0.1, weight_decay=wd, eps=1e-6)
  new, state = _apply(opt_def, params, 0, opt_def.init_state(params).param_states, grads)
  for k in params:
    expected = _lamb_first_step(params[k].astype(np.float64), grads[k].astype(np.float64),
                                0.1, 1e-6, wd)
    np.testing.assert_allclose(new[k], expected, rtol=RTOL, atol=0, err_msg=k)
  np.testing.assert_array_equal(new['b'], 0.0)  # ||p|| = 0 < ||u||: ratio 0
  np.testing.assert_allclose(state.param_states['b'].grad_ema, 0.1 * grads['b'], rtol=RTOL)
  # optax.lamb uses ratio 1 there, so the zero bias moves by lr * u.
  tx = optax.lamb(0.1, eps=1e-6, weight_decay=wd)
  updates, _ = tx.update(grads, tx.init(params), params)
  assert np.min(np.abs(updates['b'])) > 0.05


def test_lamb_zero_update_with_nonzero_param_is_nan_like_legacy():
  params = {'w': _arr(3., 4.)}
  opt_def = optim.LAMB(0.1)
  new, _ = _apply(opt_def, params, 0, opt_def.init_state(params).param_states,
                  {'w': _arr(0., 0.)})
  assert np.isnan(np.asarray(new['w'])).all()  # ||u|| = 0 < ||p||: ratio inf, inf * 0


def test_lamb_traced_weight_decay_override_works_under_jit():
  # Legacy raised ConcretizationTypeError (Python `if weight_decay != 0`); we keep the term.
  opt = optim.LAMB(0.1, weight_decay=0.0).create({'w': jnp.array([3., 4.])})
  grads = {'w': jnp.array([1., -2.])}
  jitted = jax.jit(lambda o, wd: o.apply_gradient(grads, weight_decay=wd))(opt, 0.5)
  expected = _lamb_first_step(np.array([3., 4.]), np.array([1., -2.]), 0.1, 1e-6, 0.5)
  np.testing.assert_allclose(jitted.target['w'], expected, rtol=RTOL)


# ----------------------------------------------------------------------------- LARS

def _lars_step(p, g, m, lr, beta, wd, tc, eps, nesterov):
  """Legacy LARS in float64."""
  pn, gn = np.linalg.norm(p), np.linalg.norm(g)
  ratio = 1.0 if pn == 0 or gn == 0 else tc * pn / (gn + wd * pn + eps)
  s = (lr * ratio) * (g + wd * p)
  new_m = beta * m + s
  return p - (s + beta * new_m if nesterov else new_m), new_m


def test_lars_weight_decay_trust_ratio_unlike_optax():
  p, g, lr, wd, tc = _arr(3., 4.), _arr(0., 2.), 0.5, 0.1, 0.1
  opt_def = optim.LARS(lr, beta=0.9, weight_decay=wd, trust_coefficient=tc)
  new_p, state = _apply(opt_def, p, 0, opt_def.init_state(p).param_states, g)
  # r = 0.1 * 5 / (2 + 0.1 * 5) = 0.2; s = 0.5 * 0.2 * (g + 0.1 * p) = [0.03, 0.24]
  np.testing.assert_allclose(new_p, [2.97, 3.76], rtol=RTOL)
  np.testing.assert_allclose(state.param_states.momentum, [0.03, 0.24], rtol=RTOL)
  # optax.lars divides by ||g + wd * p|| = 2.4187 instead of 2.5.
  tx = optax.lars(lr, weight_decay=wd, trust_coefficient=tc, momentum=0.9)
  updates, _ = tx.update(jnp.asarray(g), tx.init(jnp.asarray(p)), jnp.asarray(p))
  assert np.max(np.abs((p + updates) - np.array([2.97, 3.76]))) > 1e-3


def test_lars_momentum_holds_lr_scaled_steps_with_nesterov_and_lr_override():
  p64, m64 = np.array([0.5, -1.0, 2.0]), np.zeros(3)
  grads = [np.array([0.3, 0.1, -0.2]), np.array([-0.1, 0.4, 0.2]), np.array([0.2, 0.2, 0.1])]
  lrs = [0.5, 0.1, 0.3]  # per-step overrides change what enters the buffer
  kw = dict(beta=0.8, weight_decay=0.01, trust_coefficient=0.05, eps=1e-3, nesterov=True)
  opt_def = optim.LARS(0.5, **kw)
  p = p64.astype(np.float32)
  param_state = opt_def.init_state(p).param_states
  for step, (g, lr) in enumerate(zip(grads, lrs)):
    p, state = _apply(opt_def, p, step, param_state, g.astype(np.float32), learning_rate=lr)
    param_state = state.param_states
    p64, m64 = _lars_step(p64, g, m64, lr, kw['beta'], kw['weight_decay'],
                          kw['trust_coefficient'], kw['eps'], True)
    np.testing.assert_allclose(p, p64, rtol=RTOL)
    # same sign as legacy; tolerance relative to the leaf's largest element (m[2] cancels)
    np.testing.assert_allclose(param_state.momentum, m64, rtol=RTOL,
                               atol=RTOL * np.max(np.abs(m64)))


def test_lars_zero_norms_use_ratio_one():
  opt_def = optim.LARS(0.1, beta=0.9, weight_decay=0.5)
  params = {'zero_p': _arr(0., 0.), 'zero_g': _arr(1., 2.)}
  grads = {'zero_p': _arr(1., -2.), 'zero_g': _arr(0., 0.)}
  new, _ = _apply(opt_def, params, 0, opt_def.init_state(params).param_states, grads)
  np.testing.assert_allclose(new['zero_p'], [-0.1, 0.2], rtol=RTOL)  # p - lr * g
  np.testing.assert_allclose(new['zero_g'], [0.95, 1.9], rtol=RTOL)  # p - lr * wd * p


def test_lars_traced_weight_decay_override_works_under_jit():
  opt = optim.LARS(0.5, weight_decay=0, trust_coefficient=0.1).create({'w': jnp.array([3., 4.])})
  g = {'w': jnp.array([0., 2.])}
  new = jax.jit(lambda o, wd: o.apply_gradient(g, weight_decay=wd))(opt, 0.1)
  np.testing.assert_allclose(new.target['w'], [2.97, 3.76], rtol=RTOL)


def test_lars_missing_learning_rate_fails_at_update_like_legacy():
  opt = optim.LARS().create({'w': jnp.ones(2)})
  with pytest.raises(AssertionError, match='no learning rate provided'):
    opt.apply_gradient({'w': jnp.ones(2)})
  assert opt.apply_gradient({'w': jnp.ones(2)}, learning_rate=0.1).target['w'].shape == (2,)


# ----------------------------------------------------------------------------- RMSProp

def test_rmsprop_centered_is_a_construction_time_choice():
  opt = optim.RMSProp(0.1).create({'w': jnp.ones(2)})
  assert opt.state.param_states['w'].mg is None
  with pytest.raises(ValueError, match="no 'mg'"):
    opt.apply_gradient({'w': jnp.ones(2)}, centered=True)
  centered = optim.RMSProp(0.1, centered=True).create({'w': jnp.ones(2)})
  with pytest.raises(TypeError, match='centered'):
    jax.jit(lambda o, c: o.apply_gradient({'w': jnp.ones(2)}, centered=c))(centered, True)


def test_rmsprop_eps_outside_sqrt_unlike_optax_default():
  p, g = _arr(1.), _arr(0.01)
  opt_def = optim.RMSProp(0.1, beta2=0.9, eps=1e-3)
  new_p, _ = _apply(opt_def, p, 0, opt_def.init_state(p).param_states, g)
  expected = 1 - 0.1 * 0.01 / (np.sqrt(0.1 * 0.01 ** 2) + 1e-3)
  np.testing.assert_allclose(new_p, [expected], rtol=RTOL)
  tx = optax.rmsprop(0.1, decay=0.9, eps=1e-3)  # eps_in_sqrt=True by default
  updates, _ = tx.update(jnp.asarray(g), tx.init(jnp.asarray(p)))
  assert abs(float((p + updates)[0]) - expected) > 1e-2
