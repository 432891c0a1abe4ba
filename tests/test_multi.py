"""MultiOptimizer, create(focus=...) and traversals.

The oracle trajectories (two to four groups, unmatched params, per-group overrides, FrozenDict
and linen targets, WeightNorm and user-defined groups) are in
tests/fixtures/trajectories/MultiOptimizer.msgpack, made by ``python -m tools.oracle.gen_trajectories``
and replayed by test_trajectories.py; here: the legacy unit-test goldens, state layouts, errors, restoring a legacy checkpoint mid-trajectory, and what we do differently
from legacy (each such test says so).
"""
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import serialization
from flax import struct
from flax import traverse_util
from flax.core import FrozenDict
from flax.core import freeze

import flax_optim_compat as optim
from tests import _utils
from tests import catalogue
from tests import oracle_specs

# flax (0.5.3 and 0.12) deprecates constructing any Traversal; every test here builds some.
pytestmark = [
    pytest.mark.filterwarnings(
        'ignore:`flax.traverse_util.Traversal` will be deprecated:DeprecationWarning'),
    pytest.mark.filterwarnings('ignore::flax_optim_compat.FlaxOptimDeprecationWarning'),
]



def _item(keys):
  # (No module-level traversal objects: doctest collection probes attributes, and a flax
  # Traversal's __getattr__ builds -- and deprecation-warns for -- a new traversal.)
  traversal = traverse_util.t_identity
  for key in keys if isinstance(keys, list) else [keys]:
    traversal = traversal[key]
  return traversal


def _path(value):
  return traverse_util.ModelParamTraversal(lambda path, _: value in path)


def _layers(container=dict):
  return container({'a': {'kernel': jnp.ones((2, 3)), 'bias': jnp.ones(3)},
                    'frozen': jnp.full((2,), 5.0), 'empty': {}})


# ----------------------------------------------------------------------------- legacy unit-test goldens


def test_legacy_golden_two_gradient_descent_groups():
  # v0.3.6 optim_test: MultiOptimizer((_item('a'), GD(1.)), (_item('b'), GD(10.))).
  opt_def = optim.MultiOptimizer((_item('a'), optim.GradientDescent(learning_rate=1.)),
                                 (_item('b'), optim.GradientDescent(learning_rate=10.)))
  params = {'a': 0., 'b': 0., 'c': {}}
  grads = {'a': -1., 'b': -2., 'c': {}}
  state = opt_def.init_state(params)
  assert state.param_states == {'a': (), 'b': (), 'c': {}}
  new_params, new_state = opt_def.apply_gradient(opt_def.hyper_params, params, state, grads)
  assert jax.tree_util.tree_map(float, new_params) == {'a': 1., 'b': 20., 'c': {}}
  assert int(new_state.step) == 1 and new_state.param_states == {'a': (), 'b': (), 'c': {}}
  hps = opt_def.update_hyper_params(learning_rate=2.)
  new_params, _ = opt_def.apply_gradient(hps, params, state, grads)
  assert jax.tree_util.tree_map(float, new_params) == {'a': 2., 'b': 4., 'c': {}}
  # Same through the Optimizer.
  optimizer = opt_def.create(params).apply_gradient(grads, learning_rate=2.)
  assert jax.tree_util.tree_map(float, optimizer.target) == {'a': 2., 'b': 4., 'c': {}}


def test_legacy_golden_create_with_focus():
  # v0.3.6 optim_test: GradientDescent(1.).create({'a': 0., 'b': 0.}, focus=_item('a')).
  optimizer = optim.GradientDescent(learning_rate=1.).create({'a': 0., 'b': 0.},
                                                             focus=_item('a'))
  assert isinstance(optimizer.optimizer_def, optim.MultiOptimizer)
  assert optimizer.state.param_states == {'a': (), 'b': None}
  optimizer = optimizer.apply_gradient({'a': -1., 'b': -2.})
  assert float(optimizer.target['a']) == 1.
  assert optimizer.target['b'] == 0. and type(optimizer.target['b']) is float  # untouched
  assert optimizer.state.param_states == {'a': (), 'b': None}


def test_create_focus_warns_like_legacy():
  # Legacy: create(focus=...) builds a MultiOptimizer, whose constructor warns.
  opt_def = optim.Momentum(learning_rate=0.1)
  with pytest.warns(optim.FlaxOptimDeprecationWarning, match='Use `optax` instead'):
    opt_def.create({'a': jnp.ones(1)}, focus=_item('a'))


def test_flax_traversals_still_warn_deprecation():
  # Constructing a flax Traversal warns in flax 0.12 as in 0.5.3 (composed ones warn twice);
  # the tests filter exactly that message, we never touch global filters.
  with pytest.warns(DeprecationWarning, match='`flax.traverse_util.Traversal` will be'):
    traverse_util.ModelParamTraversal(lambda path, _: True)
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter('always')
    _ = _item('a')
  assert [w.category for w in caught] == [DeprecationWarning, DeprecationWarning]


# ----------------------------------------------------------------------------- layout (10.3)


@pytest.mark.parametrize('container', [dict, freeze])
def test_state_dict_layout_kernel_only_adam(container):
  params = container({'a': {'kernel': jnp.ones((2, 3)), 'bias': jnp.ones(3)}})
  for optimizer in [optim.MultiOptimizer((_path('kernel'), optim.Adam(0.1))).create(params),
                    optim.Adam(0.1).create(params, focus=_path('kernel'))]:
    assert type(optimizer.state.param_states) is type(params)
    state_dict = serialization.to_state_dict(optimizer)
    kernel = state_dict['state']['param_states']['a']['kernel']
    assert sorted(kernel) == ['grad_ema', 'grad_sq_ema']
    assert kernel['grad_ema'].shape == (2, 3)
    assert state_dict['state']['param_states']['a']['bias'] is None
    assert state_dict['state']['step'].dtype == np.int32
    # msgpack keeps the None (nil) and restores into the same layout.
    restored = serialization.from_bytes(optimizer, serialization.to_bytes(optimizer))
    assert restored.state.param_states['a']['bias'] is None
    _utils.assert_trees_close(serialization.to_state_dict(restored), state_dict)


def test_state_dict_layout_kernel_only_gradient_descent():
  optimizer = optim.MultiOptimizer((_path('kernel'), optim.GradientDescent(0.1))).create(
      {'a': {'kernel': jnp.ones((2, 3)), 'bias': jnp.ones(3)}})
  assert serialization.to_state_dict(optimizer)['state']['param_states'] == {
      'a': {'kernel': {}, 'bias': None}}


@pytest.mark.parametrize('container', [dict, freeze])
def test_unmatched_params_untouched_and_empty_subtrees_kept(container):
  params = container({'w': jnp.array([1., -0.]), 'frozen': jnp.array([-0., np.nan, 2.]),
                      'empty': {}, 'nested': {'empty': {}}})
  grads = container({'w': jnp.array([1., 1.]), 'frozen': jnp.array([np.nan, np.inf, 1.]),
                     'empty': {}, 'nested': {'empty': {}}})
  optimizer = optim.Momentum(0.5, beta=0.5).create(params, focus=_item('w') if
                                                    container is dict else _path('/w'))
  for _ in range(2):
    optimizer = jax.jit(lambda o: o.apply_gradient(grads))(optimizer)
  # momentum: 1, then 1.5 -> w = 1 - 0.5 - 0.75; -0 -> -0.5 - 0.75
  np.testing.assert_array_equal(optimizer.target['w'], [-0.25, -1.25])
  frozen = np.asarray(optimizer.target['frozen'])
  assert np.signbit(frozen[0]) and np.isnan(frozen[1]) and frozen[2] == 2.  # bit for bit
  assert optimizer.state.param_states['frozen'] is None
  assert optimizer.target['empty'] == {} and optimizer.target['nested'] == {'empty': {}}
  assert optimizer.state.param_states['empty'] == {}
  assert type(optimizer.target) is type(params)
  assert type(optimizer.state.param_states) is type(params)


def test_linen_params_paths_seen_by_filter():
  seen = []
  traversal = traverse_util.ModelParamTraversal(lambda path, _: seen.append(path) or
                                                path.startswith('/params/Dense_0/'))
  params = freeze({'params': {'Dense_0': {'kernel': jnp.ones((2, 2)), 'bias': jnp.zeros(2)},
                              'Dense_1': {'kernel': jnp.ones((2, 2))}}})
  optimizer = optim.GradientDescent(0.5).create(params, focus=traversal)
  assert sorted(seen) == ['/params/Dense_0/bias', '/params/Dense_0/kernel',
                          '/params/Dense_1/kernel']
  optimizer = optimizer.apply_gradient(jax.tree_util.tree_map(jnp.ones_like, params))
  np.testing.assert_array_equal(optimizer.target['params']['Dense_0']['bias'], [-0.5, -0.5])
  np.testing.assert_array_equal(optimizer.target['params']['Dense_1']['kernel'], np.ones((2, 2)))
  assert optimizer.state.param_states['params']['Dense_1']['kernel'] is None


def test_sub_tree_selection_selects_every_leaf_in_it():
  # Legacy failed on a traversal yielding a sub-dict (AttributeError in init_state); we
  # give every leaf below it to that group.
  params = {'a': jnp.ones(2), 'c': {'d': jnp.ones(2), 'e': {'f': jnp.ones(1)}}}
  optimizer = optim.MultiOptimizer(
      (_item('c'), optim.GradientDescent(1.)),
      (_item('a'), optim.GradientDescent(2.))).create(params)
  optimizer = optimizer.apply_gradient(jax.tree_util.tree_map(jnp.ones_like, params))
  assert jax.tree_util.tree_map(lambda x: float(x[0]), optimizer.target) == {
      'a': -1., 'c': {'d': 0., 'e': {'f': 0.}}}


def test_empty_target():
  # Legacy raised IndexError for a ModelParamTraversal over {}.
  optimizer = optim.Adam(0.1).create({}, focus=_path('kernel'))
  optimizer = optimizer.apply_gradient({})
  assert optimizer.target == {} and optimizer.state.param_states == {}
  assert int(optimizer.state.step) == 1


# ----------------------------------------------------------------------------- filters


def test_value_dependent_filter_sees_shape_and_dtype_once_per_structure():
  # Legacy called filter_fn on a private wrapper (no .ndim: AttributeError), then on params,
  # grads, states and None in turn. Ours sees a shape/dtype stand-in, once per structure.
  calls = []

  def matrices(path, value):
    calls.append((path, value.shape, value.ndim, value.size, jnp.dtype(value.dtype)))
    return value.ndim > 1

  opt_def = optim.MultiOptimizer((traverse_util.ModelParamTraversal(matrices),
                                  optim.GradientDescent(1.)))
  params = {'m': jnp.ones((2, 3)), 'v': jnp.ones(3)}
  optimizer = opt_def.create(params)
  assert sorted(calls) == [('/m', (2, 3), 2, 6, jnp.float32), ('/v', (3,), 1, 3, jnp.float32)]
  grads = jax.tree_util.tree_map(jnp.ones_like, params)
  step = jax.jit(lambda o, g: o.apply_gradient(g))
  for _ in range(3):
    optimizer = step(optimizer, grads)
    optimizer = optimizer.apply_gradient(grads)
  assert len(calls) == 2  # cached per structure: no calls at update time
  np.testing.assert_array_equal(optimizer.target['m'], np.full((2, 3), -5.))
  np.testing.assert_array_equal(optimizer.target['v'], np.ones(3))


def test_overlap_names_leaf_paths():
  opt_def = optim.MultiOptimizer((_path('kernel'), optim.Adam(0.1)),
                                 (_path('/a/'), optim.Momentum(0.1)))
  params = _layers(freeze)
  # Legacy's nested tree of pair indices first, then the offending paths.
  with pytest.raises(ValueError, match=r"(?s)^Multiple optimizers match the same leaves : "
                                       r"FrozenDict.*kernel: \[0, 1\].*\{'/a/kernel': \[0, 1\]\}"):
    opt_def.create(params)
  with pytest.raises(ValueError, match='Multiple optimizers match the same leaves'):
    jax.jit(opt_def.init_state)(params)
  with pytest.raises(ValueError, match=r"selecting it: \{'/a/bias': \[1, 2\], '/a/kernel': \[0, 2\]\}"):
    optim.MultiOptimizer((_path('kernel'), optim.Adam(0.1)), (_path('bias'), optim.Adam(0.1)),
                         (_item('a'), optim.Adam(0.1))).create(params)
  # Within one traversal a leaf selected twice counts once (legacy raised).
  optimizer = optim.GradientDescent(1.).create(
      {'a': jnp.ones(1)}, focus=traverse_util.t_identity.merge(_item('a'), _item('a')))
  assert float(optimizer.apply_gradient({'a': jnp.ones(1)}).target['a'][0]) == 0.


# ----------------------------------------------------------------------------- hyper-params


def _two_groups():
  return optim.MultiOptimizer((_path('kernel'), optim.Momentum(0.1, beta=0.5)),
                              (_path('bias'), optim.GradientDescent(1.0)))


def test_hyper_params_is_the_list_of_group_hyper_params():
  opt_def = _two_groups()
  assert isinstance(opt_def.hyper_params, list)
  assert opt_def.hyper_params == [opt.hyper_params for opt in opt_def.sub_optimizers]
  assert len(opt_def.traversals) == 2 and isinstance(opt_def.sub_optimizers, tuple)
  hps = opt_def.update_hyper_params(learning_rate=0.3)
  assert [hp.learning_rate for hp in hps] == [0.3, 0.3] and hps[0].beta == 0.5
  replaced = opt_def.update_hyper_params(
      hyper_params=[hps[0].replace(beta=0.9), opt_def.hyper_params[1]])
  assert replaced[0].beta == 0.9 and replaced[1].learning_rate == 1.0
  both = opt_def.update_hyper_params(hyper_params=replaced, learning_rate=0.7)
  assert [hp.learning_rate for hp in both] == [0.7, 0.7] and both[0].beta == 0.9
  assert [hp.learning_rate for hp in opt_def.hyper_params] == [0.1, 1.0]  # per call only


def test_per_group_overrides_hand_math_and_no_retrace():
  opt_def = _two_groups()
  params = _layers()
  grads = jax.tree_util.tree_map(jnp.ones_like, params)
  optimizer = opt_def.create(params)
  counter = _utils.TraceCounter(
      lambda opt, lr_kernel, lr_bias: opt.apply_gradient(grads, hyper_params=[
          opt.optimizer_def.hyper_params[0].replace(learning_rate=lr_kernel),
          opt.optimizer_def.hyper_params[1].replace(learning_rate=lr_bias)]))
  step = jax.jit(counter)
  optimizer = step(optimizer, 0.1, 0.5)   # kernel: m=1, 1-0.1; bias: 1-0.5
  optimizer = step(optimizer, 0.2, 0.25)  # kernel: m=1.5, 0.9-0.3; bias: 0.5-0.25
  assert counter.count == 1
  np.testing.assert_allclose(optimizer.target['a']['kernel'], np.full((2, 3), 0.6), rtol=1e-6)
  np.testing.assert_allclose(optimizer.target['a']['bias'], np.full(3, 0.25), rtol=1e-6)
  np.testing.assert_array_equal(optimizer.target['frozen'], [5., 5.])
  np.testing.assert_allclose(optimizer.state.param_states['a']['kernel'].momentum,
                             np.full((2, 3), 1.5))
  assert optimizer.state.param_states['a']['bias'] == ()
  assert int(optimizer.state.step) == 2


@pytest.mark.parametrize('bad,error,match', [
    ('short', ValueError, r'expected 2 \(Momentum, GradientDescent\), got 1'),
    ('long', ValueError, r'expected 2 \(Momentum, GradientDescent\), got 3'),
    ('single', TypeError, r'must be a list .* got a _MomentumHyperParams'),
    ('swapped', TypeError, r'hyper_params\[0\] must be a _MomentumHyperParams .* got '
                           r'a _GradientDescentHyperParams'),
    ('none', TypeError, r'must be a list .* got None\.'),
])
def test_bad_hyper_params_lists_raise_and_leave_state_untouched(bad, error, match):
  # Legacy truncated a short list silently: the trailing groups' states became None and the
  # next step crashed with AttributeError. We raise before computing anything.
  opt_def = _two_groups()
  hp0, hp1 = opt_def.hyper_params
  value = {'short': [hp0], 'long': [hp0, hp1, hp1], 'single': hp0, 'swapped': [hp1, hp0],
           'none': None}[bad]
  params = _layers(freeze)
  grads = jax.tree_util.tree_map(jnp.ones_like, params)
  optimizer = opt_def.create(params)
  before = serialization.to_state_dict(optimizer)
  with pytest.raises(error, match=match):
    optimizer.apply_gradient(grads, hyper_params=value)
  with pytest.raises(error, match=match):
    jax.jit(lambda o: o.apply_gradient(grads, hyper_params=value))(optimizer)
  with pytest.raises(error, match=match):
    opt_def.apply_gradient(value, params, optimizer.state, grads)
  _utils.assert_trees_close(serialization.to_state_dict(optimizer), before, rtol=0)
  optimizer = optimizer.apply_gradient(grads)  # the optimizer is still usable
  np.testing.assert_allclose(optimizer.target['a']['kernel'], np.full((2, 3), 0.9))


def test_unknown_override_name_is_a_type_error_naming_the_group():
  opt_def = _two_groups()
  with pytest.raises(TypeError, match=r"unexpected keyword argument 'beta'.*sub-optimizer 1, "
                                      r"GradientDescent"):
    opt_def.update_hyper_params(beta=0.1)


def test_missing_learning_rate_in_one_group():
  opt_def = optim.MultiOptimizer((_item('a'), optim.GradientDescent()),
                                 (_item('b'), optim.GradientDescent(1.)))
  optimizer = opt_def.create({'a': jnp.ones(1), 'b': jnp.ones(1)})
  with pytest.raises(AssertionError, match='no learning rate provided'):
    optimizer.apply_gradient({'a': jnp.ones(1), 'b': jnp.ones(1)})


# ----------------------------------------------------------------------------- groups


@struct.dataclass
class _StepHyperParams:
  learning_rate: float


class _RecordStep(optim.OptimizerDef):
  """Per-leaf user optimizer: param <- step it was called with (shows the shared step)."""

  def __init__(self):
    super().__init__(_StepHyperParams(0.))

  def init_param_state(self, param):
    return ()

  def apply_param_gradient(self, step, hyper_params, param, state, grad):
    return jnp.full_like(param, step), state


def test_sub_optimizers_see_the_global_step_user_defined_group():
  opt_def = optim.MultiOptimizer((_item('a'), _RecordStep()),
                                 (_item('b'), optim.Adam(0.1)))
  params = {'a': jnp.zeros(2), 'b': jnp.zeros(2)}
  optimizer = opt_def.create(params)
  for _ in range(3):
    optimizer = optimizer.apply_gradient({'a': jnp.ones(2), 'b': jnp.ones(2)})
  np.testing.assert_array_equal(optimizer.target['a'], [2., 2.])
  assert int(optimizer.state.step) == 3
  # Adam's bias correction uses the global step: with constant grads every step moves by lr.
  np.testing.assert_allclose(optimizer.target['b'], [-0.3, -0.3], rtol=1e-5)


@pytest.mark.parametrize('make', [
    lambda: optim.Adam(0.05, weight_decay=0.01),
    lambda: optim.WeightNorm(optim.Momentum(0.05, beta=0.8), wn_decay=0.01),
    lambda: catalogue.CUSTOM_OPTIMIZERS['custom:SignMomentum'](optim)(0.05, beta=0.8),
], ids=['Adam', 'WeightNorm', 'user-defined'])
def test_a_group_updates_its_leaves_exactly_like_the_stand_alone_optimizer(make):
  # Built-ins compute their optax updates in the multi_transform; WeightNorm and per-leaf user
  # defs run their own apply_gradient, whose new params are taken as they are.
  rng = np.random.RandomState(0)
  params = freeze({'a': {'kernel': jnp.asarray(rng.randn(4, 3), jnp.float32),
                         'bias': jnp.asarray(rng.randn(3), jnp.float32)},
                   'other': jnp.ones(2)})
  alone = make().create(freeze({'a': {'kernel': params['a']['kernel']}}))
  multi = optim.MultiOptimizer((_path('kernel'), make()),
                               (_path('bias'), optim.GradientDescent(0.1))).create(params)
  step = jax.jit(lambda o, g: o.apply_gradient(g, learning_rate=0.02))
  for _ in range(4):
    grads = jax.tree_util.tree_map(lambda x: jnp.asarray(rng.randn(*x.shape), jnp.float32),
                                   params)
    alone = step(alone, freeze({'a': {'kernel': grads['a']['kernel']}}))
    multi = step(multi, grads)
  np.testing.assert_array_equal(multi.target['a']['kernel'], alone.target['a']['kernel'])
  for got, want in zip(jax.tree_util.tree_leaves(multi.state.param_states['a']['kernel']),
                       jax.tree_util.tree_leaves(alone.state.param_states['a']['kernel'])):
    np.testing.assert_array_equal(got, want)


def test_nested_multi_optimizer_as_a_group():
  # Every group sees the whole target (other groups' leaves masked), so the inner traversals
  # address leaves from the root, like the outer ones.
  inner = optim.MultiOptimizer((_item(['a', 'x']), optim.GradientDescent(1.)),
                               (_path('/a/y'), optim.GradientDescent(2.)))
  opt_def = optim.MultiOptimizer((_item('a'), inner),
                                 (_item('b'), optim.GradientDescent(3.)))
  params = {'a': {'x': jnp.zeros(1), 'y': jnp.zeros(1), 'z': jnp.zeros(1)}, 'b': jnp.zeros(1)}
  optimizer = opt_def.create(params)
  assert optimizer.state.param_states == {'a': {'x': (), 'y': (), 'z': None}, 'b': ()}
  ones = jax.tree_util.tree_map(jnp.ones_like, params)
  assert opt_def.update_hyper_params(learning_rate=0.5)[0][1].learning_rate == 0.5
  optimizer = optimizer.apply_gradient(ones, learning_rate=0.5)
  assert jax.tree_util.tree_map(float, jax.tree_util.tree_map(lambda x: x[0], optimizer.target)
                                ) == {'a': {'x': -0.5, 'y': -0.5, 'z': 0.}, 'b': -0.5}


def test_bfloat16_params_keep_their_dtype():
  params = {'a': jnp.ones(3, jnp.bfloat16), 'b': jnp.ones(3, jnp.bfloat16)}
  optimizer = optim.Adam(0.1).create(params, focus=_item('a'))
  optimizer = optimizer.apply_gradient(jax.tree_util.tree_map(jnp.ones_like, params))
  assert optimizer.target['a'].dtype == jnp.bfloat16
  assert optimizer.state.param_states['a'].grad_ema.dtype == jnp.bfloat16
  # Legacy bf16 Adam never moved (1 - 0.999**t rounds to 0 in bf16); ours runs in float32.
  np.testing.assert_allclose(np.asarray(optimizer.target['a'], np.float32), 0.9, rtol=1e-2)


# ----------------------------------------------------------------------------- optax


def test_optax_transform_with_plain_optax_on_frozen_dict():
  # The FrozenDict pitfalls of optax.masked/multi_transform reported by users do not arise:
  # labels are derived from the very tree being updated.
  opt_def = _two_groups()
  params = _layers(freeze)
  tx = opt_def.optax_transform()
  assert isinstance(tx, optax.GradientTransformation)
  opt_state = tx.init(params)
  grads = jax.tree_util.tree_map(jnp.ones_like, params)
  updates, opt_state = jax.jit(tx.update)(grads, opt_state, params)
  assert type(updates) is FrozenDict
  np.testing.assert_allclose(updates['a']['kernel'], np.full((2, 3), -0.1))
  np.testing.assert_allclose(updates['a']['bias'], np.full(3, -1.0))
  np.testing.assert_array_equal(updates['frozen'], [0., 0.])  # set_to_zero, not the gradient
  new_params = optax.apply_updates(params, updates)
  legacy_api = opt_def.create(params).apply_gradient(grads)
  _utils.assert_trees_close(new_params, legacy_api.target, rtol=0)


def test_optax_transform_rejects_bad_hyper_params():
  with pytest.raises(ValueError, match='expected 2'):
    _two_groups().optax_transform([optim.GradientDescent(1.).hyper_params])


# ----------------------------------------------------------------------------- errors


def test_constructor_errors():
  with pytest.raises(ValueError, match='at least one'):
    optim.MultiOptimizer()
  with pytest.raises(TypeError, match=r'argument 0 must be a \(traversal, optimizer_def\)'):
    optim.MultiOptimizer(optim.Adam(0.1))
  with pytest.raises(TypeError, match='argument 0: Adam is not a traversal'):
    optim.MultiOptimizer((optim.Adam(0.1), optim.Adam(0.1)))
  with pytest.raises(TypeError, match="argument 1: _HP is not an OptimizerDef"):
    optim.MultiOptimizer((_item('a'), optim.Adam(0.1)), (_item('b'), _HP()))


@struct.dataclass
class _HP:
  learning_rate: float = 0.1


def test_per_parameter_protocol_is_not_available():
  opt_def = _two_groups()
  with pytest.raises(NotImplementedError):
    opt_def.init_param_state(jnp.ones(1))
  with pytest.raises(NotImplementedError):
    opt_def.apply_param_gradient(0, opt_def.hyper_params, jnp.ones(1), None, jnp.ones(1))


def test_grads_structure_mismatch_is_a_clear_error():
  optimizer = _two_groups().create(_layers(freeze))
  grads = jax.tree_util.tree_map(jnp.ones_like, _layers(dict))
  with pytest.raises(ValueError, match='target is a FrozenDict but the grads are a dict'):
    optimizer.apply_gradient(grads)


def test_non_dict_target_with_model_param_traversal():
  # As legacy: ModelParamTraversal only walks dicts.
  with pytest.raises(ValueError, match='Can only traverse a flax Model instance or a nested'):
    optim.GradientDescent(0.1).create([jnp.ones(1)], focus=_path('kernel'))


# ----------------------------------------------------------------------------- checkpoints


def test_restore_legacy_state_mid_trajectory_and_continue():
  fixture = _utils.load_fixture('trajectories', 'MultiOptimizer.msgpack')
  case = fixture['cases']['kernel_adam_bias_momentum-frozen-jit']
  expected = case['expected']
  last = len(case['grads']) - 1
  optimizer = catalogue.build_def(optim, case['optimizer']).create(
      freeze(jax.tree_util.tree_map(jnp.asarray, case['target'])))
  optimizer = optimizer.restore_state(expected['3'])  # a legacy checkpoint after step 3
  assert optimizer.state.param_states['scale'] is None
  for i in range(4, last + 1):
    overrides = oracle_specs.float32_overrides(case['overrides'][str(i)])
    grads = freeze(jax.tree_util.tree_map(jnp.asarray, case['grads'][str(i)]))
    optimizer = jax.jit(oracle_specs.apply_overrides)(optimizer, grads, overrides)
  _utils.assert_trees_close(serialization.to_state_dict(optimizer), expected[str(last)])


def test_plain_overrides_follow_each_group_own_rules_weight_norm():
  # A WeightNorm group takes wn_decay itself and passes learning_rate to its wrapped def
  # (legacy MultiOptimizer could not have WeightNorm groups at all).
  rng = np.random.RandomState(1)
  params = {'k1': jnp.asarray(rng.randn(3, 2), jnp.float32),
            'k2': jnp.asarray(rng.randn(2, 2), jnp.float32)}
  make = lambda: optim.WeightNorm(optim.Momentum(0.1, beta=0.5))
  multi = optim.MultiOptimizer((_item('k1'), make()), (_item('k2'), make())).create(params)
  alone = [make().create({'k': params['k1']}), make().create({'k': params['k2']})]
  for _ in range(2):
    grads = jax.tree_util.tree_map(lambda x: jnp.asarray(rng.randn(*x.shape), jnp.float32),
                                   params)
    multi = multi.apply_gradient(grads, learning_rate=0.05, wn_decay=0.1)
    alone = [a.apply_gradient({'k': grads[k]}, learning_rate=0.05, wn_decay=0.1)
             for a, k in zip(alone, ['k1', 'k2'])]
  np.testing.assert_array_equal(multi.target['k1'], alone[0].target['k'])
  np.testing.assert_array_equal(multi.target['k2'], alone[1].target['k'])


def test_hyper_params_list_is_what_the_step_uses():
  # As legacy, the def's hyper_params list is the default of every step.
  opt_def = _two_groups()
  opt_def.hyper_params[1] = opt_def.hyper_params[1].replace(learning_rate=0.25)
  optimizer = opt_def.create(_layers()).apply_gradient(
      jax.tree_util.tree_map(jnp.ones_like, _layers()))
  np.testing.assert_allclose(optimizer.target['a']['bias'], np.full(3, 0.75))


def test_other_traversals_list_items_each_and_tree():
  # Legacy worked with any Traversal: t_identity[0] on a list, .each(), .tree().
  params = [jnp.ones(2), {'x': jnp.ones(1), 'y': jnp.ones(1)}, jnp.ones(3)]
  optimizer = optim.MultiOptimizer(
      (_item(0), optim.GradientDescent(1.)),
      (_item(1).each(), optim.GradientDescent(2.)),
      (_item(2).tree(), optim.GradientDescent(3.))).create(params)
  optimizer = optimizer.apply_gradient(jax.tree_util.tree_map(jnp.ones_like, params))
  assert jax.tree_util.tree_map(lambda x: float(x[0]), optimizer.target) == [
      0., {'x': -1., 'y': -1.}, -2.]
  assert serialization.to_state_dict(optimizer)['state']['param_states'] == {
      '0': {}, '1': {'x': {}, 'y': {}}, '2': {}}


def test_item_traversal_on_frozen_dict():
  # Legacy raised ValueError('FrozenDict is immutable.') (TraverseItem.update writes into the
  # container); we only iterate traversals, so t_identity[...] works on FrozenDict targets.
  params = freeze({'a': jnp.ones(2), 'b': jnp.ones(2)})
  optimizer = optim.GradientDescent(0.5).create(params, focus=_item('a'))
  optimizer = optimizer.apply_gradient(freeze({'a': jnp.ones(2), 'b': jnp.ones(2)}))
  assert type(optimizer.target) is FrozenDict
  np.testing.assert_array_equal(optimizer.target['a'], [0.5, 0.5])
  np.testing.assert_array_equal(optimizer.target['b'], [1., 1.])
  assert optimizer.state.param_states == freeze({'a': (), 'b': None})
