"""Legacy behaviour on odd inputs, and errors that name the culprit before anything changes.

Expected values: flax 0.5.3 (measured with the oracle, quoted where used) or hand math.
"""
import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import traverse_util

import flax_optim_compat as optim
from tests import _utils


def _traversal(key):
  with warnings.catch_warnings():
    warnings.simplefilter('ignore', DeprecationWarning)  # flax deprecates its traversals
    return traverse_util.t_identity[key]


# ----------------------------------------------------------------------------- integer params


@pytest.mark.parametrize('make, expected', [
    # flax 0.5.3: GradientDescent(.1) and Momentum(.1) on {'w': arange(4)} with grads 0.5.
    (lambda: optim.GradientDescent(0.1), [-0.05, 0.95, 1.95, 2.95]),
    (lambda: optim.Momentum(0.1), [-0.05, 0.95, 1.95, 2.95]),
    # flax 0.5.3, Adam(.1), same inputs (printed with 9 digits).
    (lambda: optim.Adam(0.1), [-0.09999934, 0.9000007, 1.9000007, 2.9000006]),
], ids=['GradientDescent', 'Momentum', 'Adam'])
@pytest.mark.parametrize('jit', [False, True], ids=['eager', 'jit'])
def test_integer_params_promote_to_float_as_legacy(make, expected, jit):
  optimizer = make().create({'w': jnp.arange(4)})
  step = lambda opt, g: opt.apply_gradient(g)
  step = jax.jit(step) if jit else step
  new = step(optimizer, {'w': jnp.full(4, 0.5)})
  assert new.target['w'].dtype == jnp.float32
  np.testing.assert_allclose(new.target['w'], expected, rtol=1e-6)
  # Legacy's states promote too (a float32 momentum after the first step).
  for leaf in jax.tree_util.tree_leaves(new.state.param_states):
    assert leaf.dtype == jnp.float32


# ----------------------------------------------------------------------------- bad grads


@pytest.mark.parametrize('grad, message', [
    (jnp.ones(3, bool), r"gradient at '/w' has dtype bool"),
    ('abc', r"gradient at '/w' is a str, not an array"),
    (jnp.ones(3, jnp.complex64), r"gradient at '/w' is complex but the parameter is real"),
], ids=['bool', 'str', 'complex'])
def test_bad_gradient_types_are_named_and_change_nothing(grad, message):
  optimizer = optim.Momentum(0.1).create({'w': jnp.ones(3)})
  before = jax.tree_util.tree_map(np.asarray, optimizer)
  with pytest.raises(TypeError, match=message):
    optimizer.apply_gradient({'w': grad})
  jax.tree_util.tree_map(np.testing.assert_array_equal, optimizer, before)


def test_integer_gradients_of_float_params_still_work():
  optimizer = optim.GradientDescent(0.5).create({'w': jnp.ones(2)})
  np.testing.assert_array_equal(optimizer.apply_gradient({'w': jnp.array([1, 2])}).target['w'],
                                [0.5, 0.0])


# ----------------------------------------------------------------------------- bad hyper-params


@pytest.mark.parametrize('override, error, message', [
    ({'learning_rate': jnp.ones(4)}, ValueError,
     r"Momentum hyper-parameter 'learning_rate' must be a scalar, got an array of shape \(4,\)"),
    ({'learning_rate': '0.1'}, TypeError,
     r"Momentum hyper-parameter 'learning_rate' must be a real number"),
    ({'beta': None}, TypeError, r"Momentum hyper-parameter 'beta' is None"),
    ({'hyper_params': optim.Adam(0.1).hyper_params}, TypeError,
     r'Momentum: hyper_params must be a _MomentumHyperParams, got '
     r'a _AdamHyperParams'),
], ids=['lr-shape', 'lr-str', 'beta-None', 'other-dataclass'])
def test_bad_overrides_name_the_hyper_parameter(override, error, message):
  optimizer = optim.Momentum(0.1).create({'w': jnp.ones(())})
  with pytest.raises(error, match=message):
    optimizer.apply_gradient({'w': jnp.ones(())}, **override)


def test_a_traced_flag_is_named():
  optimizer = optim.Momentum(0.1).create({'w': jnp.ones(3)})
  step = jax.jit(lambda opt, nesterov: opt.apply_gradient({'w': jnp.ones(3)}, nesterov=nesterov))
  with pytest.raises(TypeError, match="'nesterov' cannot be a traced value"):
    step(optimizer, True)


def test_eps_none_is_named():
  optimizer = optim.Adam(0.1).create({'w': jnp.ones(3)})
  with pytest.raises(TypeError, match="Adam hyper-parameter 'eps' is None"):
    optimizer.apply_gradient({'w': jnp.ones(3)}, eps=None)


# ----------------------------------------------------------------------------- MultiOptimizer


def test_legacy_overlap_message_regex():
  """flax's own last optim test matched this regex; legacy printed the nested index tree."""
  params = {'a': {'x': 0., 'y': 0.}, 'b': {'y': 0., 'z': 0.}}
  with warnings.catch_warnings():
    warnings.simplefilter('ignore', DeprecationWarning)
    t_a = traverse_util.t_identity['a']
    t_y = traverse_util.ModelParamTraversal(lambda path, _: 'y' in path)
  opt_def = optim.MultiOptimizer((t_a, optim.GradientDescent(1.)),
                                 (t_y, optim.GradientDescent(1.)))
  with pytest.raises(ValueError) as info:
    opt_def.create(params)
  message = str(info.value)
  assert re.search(r"Multiple optimizers match.*'y': \[0, 1\]", message)
  # Legacy's exact prefix and tree, then our path detail.
  assert message.startswith("Multiple optimizers match the same leaves : "
                            "{'a': {'x': [0], 'y': [0, 1]}, 'b': {'y': [1], 'z': []}}")
  assert "'/a/y': [0, 1]" in message


@pytest.mark.filterwarnings('ignore:`flax.traverse_util.Traversal` will be deprecated')
def test_a_group_that_selects_nothing_needs_no_learning_rate():
  # Legacy ran nothing for an empty group, so its missing learning rate never mattered.
  params = {'a': jnp.ones(2), 'b': jnp.ones(2)}
  opt_def = optim.MultiOptimizer((_traversal('a'), optim.GradientDescent(0.5)),
                                 (optim.ModelParamTraversal(lambda path, _: False), optim.Adam()))
  optimizer = opt_def.create(params).apply_gradient({'a': jnp.ones(2), 'b': jnp.ones(2)})
  np.testing.assert_array_equal(optimizer.target['a'], [0.5, 0.5])
  np.testing.assert_array_equal(optimizer.target['b'], [1.0, 1.0])


def test_missing_learning_rate_names_the_group():
  params = {'a': jnp.ones(2), 'b': jnp.ones(2)}
  opt_def = optim.MultiOptimizer((_traversal('a'), optim.GradientDescent(0.5)),
                                 (_traversal('b'), optim.Momentum()))
  optimizer = opt_def.create(params)
  with pytest.raises(AssertionError, match=r'no learning rate provided.*sub-optimizer 1 of the '
                                           r'MultiOptimizer, Momentum\(learning_rate=None'):
    optimizer.apply_gradient({'a': jnp.ones(2), 'b': jnp.ones(2)})


# ----------------------------------------------------------------------------- schedules


def _schedule():
  return optax.linear_schedule(0.1, 0.01, transition_steps=8)


@pytest.mark.parametrize('make, reference', [
    (lambda lr: optim.Adam(0.1, weight_decay=1e-2),
     lambda lr: optax.adamw(lr, b1=0.9, b2=0.999, eps=1e-8, weight_decay=1e-2)),
    (lambda lr: optim.Momentum(0.1, beta=0.9, nesterov=True),
     lambda lr: optax.sgd(lr, momentum=0.9, nesterov=True)),
], ids=['Adam', 'Momentum'])
def test_optax_transform_takes_a_schedule(make, reference):
  opt_def = make(None)
  tx = opt_def.optax_transform(opt_def.hyper_params.replace(learning_rate=_schedule()))
  ref = reference(_schedule())
  params = ref_params = {'w': jnp.array([1.0, -2.0, 3.0])}
  state, ref_state = tx.init(params), ref.init(params)
  for k in range(10):
    grads = {'w': jnp.array([0.5, -1.0, 0.25]) * (k + 1)}
    updates, state = tx.update(grads, state, params)
    params = optax.apply_updates(params, updates)
    ref_updates, ref_state = ref.update(grads, ref_state, ref_params)
    ref_params = optax.apply_updates(ref_params, ref_updates)
    np.testing.assert_allclose(params['w'], ref_params['w'], rtol=2e-7, atol=0)


def test_a_restored_legacy_state_continues_its_schedule_at_the_legacy_step():
  """The legacy loop fed schedule(step) as an override; the optax form does it itself."""
  schedule = _schedule()
  grads = [{'w': jnp.array([0.5, -1.0]) * (k + 1)} for k in range(8)]
  legacy = optim.Adam(0.1).create({'w': jnp.array([1.0, -2.0])})
  for k in range(4):
    legacy = legacy.apply_gradient(grads[k], learning_rate=schedule(k))
  hp = legacy.optimizer_def.hyper_params.replace(learning_rate=schedule)
  tx = legacy.optimizer_def.optax_transform(hp)
  params, state = legacy.target, legacy.optimizer_def.optax_state(legacy.target, legacy.state, hp)
  for k in range(4, 8):
    legacy = legacy.apply_gradient(grads[k], learning_rate=schedule(k))
    updates, state = tx.update(grads[k], state, params)
    params = optax.apply_updates(params, updates)
    np.testing.assert_allclose(params['w'], legacy.target['w'], rtol=1e-6)


def test_schedule_for_another_hyper_parameter():
  # Momentum's beta as a schedule: beta(step) = 0 then 1, by hand: u0 = g, u1 = g + g.
  opt_def = optim.Momentum(1.0, beta=0.0)
  tx = opt_def.optax_transform(opt_def.hyper_params.replace(
      beta=lambda count: jnp.where(count == 0, 0.0, 1.0)))
  params = {'w': jnp.zeros(1)}
  state = tx.init(params)
  updates, state = tx.update({'w': jnp.ones(1)}, state, params)
  np.testing.assert_array_equal(updates['w'], [-1.0])
  updates, state = tx.update({'w': jnp.ones(1)}, state, params)
  np.testing.assert_array_equal(updates['w'], [-2.0])


def test_a_callable_that_is_not_a_schedule_is_named():
  opt_def = optim.Momentum(1.0)
  tx = opt_def.optax_transform(opt_def.hyper_params.replace(beta=lambda: 0.5))
  with pytest.raises(TypeError, match="'beta' is a callable but not a schedule"):
    tx.init({'w': jnp.zeros(1)})


def test_a_flag_or_layout_hyper_parameter_cannot_be_a_schedule():
  opt_def = optim.Momentum(0.1)
  with pytest.raises(TypeError, match="Momentum hyper-parameter 'nesterov' cannot be a schedule"):
    opt_def.optax_transform(opt_def.hyper_params.replace(nesterov=lambda count: True))
  rmsprop = optim.RMSProp(0.1)
  with pytest.raises(TypeError, match="RMSProp hyper-parameter 'centered' cannot be a schedule"):
    rmsprop.optax_transform(rmsprop.hyper_params.replace(centered=lambda count: False))


@pytest.mark.filterwarnings('ignore:`flax.traverse_util.Traversal` will be deprecated')
def test_multi_optimizer_optax_transform_takes_a_schedule_per_group():
  kernels = optim.ModelParamTraversal(lambda path, _: 'kernel' in path)
  biases = optim.ModelParamTraversal(lambda path, _: 'bias' in path)
  opt_def = optim.MultiOptimizer((kernels, optim.Adam(0.1)),
                                 (biases, optim.Momentum(0.1, beta=0.9)))
  hps = opt_def.hyper_params
  tx = opt_def.optax_transform([hps[0].replace(learning_rate=_schedule()), hps[1]])
  labels = {'kernel': 'adam', 'bias': 'momentum', 'other': 'frozen'}
  ref = optax.multi_transform(
      {'adam': optax.adam(_schedule(), b1=0.9, b2=0.999, eps=1e-8),
       'momentum': optax.sgd(0.1, momentum=0.9), 'frozen': optax.set_to_zero()}, labels)
  params = ref_params = {'kernel': jnp.array([1.0, -2.0]), 'bias': jnp.array([0.5]),
                         'other': jnp.array([3.0])}
  state, ref_state = tx.init(params), ref.init(params)
  for k in range(10):
    grads = jax.tree_util.tree_map(lambda p: p * 0 + 0.5 * (k + 1), params)
    updates, state = tx.update(grads, state, params)
    params = optax.apply_updates(params, updates)
    ref_updates, ref_state = ref.update(grads, ref_state, ref_params)
    ref_params = optax.apply_updates(ref_params, ref_updates)
    _utils.assert_trees_close(params, ref_params, rtol=2e-7)
