"""``from_optax``: any optax transformation behind the legacy API, against a plain optax loop.

Every expected value here comes from the same transformation run in a plain optax loop
(``tx.update`` + ``optax.apply_updates`` under ``jax.jit``) or from hand math; comparisons are
bit-exact (same XLA ops in the same order), and states are compared with their NamedTuple types.
"""
import flax
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import serialization
from flax.training import checkpoints

import flax_optim_compat as optim
from flax_optim_compat import dynamic_scale as dynamic_scale_lib
from flax_optim_compat._from_optax import FromOptax
from flax_optim_compat._from_optax import from_optax
from tests import _utils

pytestmark = pytest.mark.filterwarnings('ignore::flax_optim_compat.FlaxOptimDeprecationWarning')

STEPS = 12


def _params():
  k1, k2, k3 = jax.random.split(jax.random.PRNGKey(0), 3)
  return {'dense': {'kernel': jax.random.normal(k1, (3, 4)), 'bias': jax.random.normal(k2, (4,))},
          'scale': jax.random.normal(k3, (5,))}


def _grads(k, params=None):
  params = _params() if params is None else params
  leaves, treedef = jax.tree_util.tree_flatten(params)
  keys = jax.random.split(jax.random.PRNGKey(100 + k), len(leaves))
  return treedef.unflatten([jax.random.normal(key, leaf.shape) for key, leaf in zip(keys, leaves)])


def assert_same(actual, expected, what=''):
  """Same tree (container and NamedTuple types included), leaf types, dtypes, and bits."""
  a_leaves, a_def = jax.tree_util.tree_flatten(actual)
  e_leaves, e_def = jax.tree_util.tree_flatten(expected)
  assert a_def == e_def, f'{what}: {a_def} != {e_def}'
  for a, e in zip(a_leaves, e_leaves):
    assert type(a) is type(e), f'{what}: {type(a)} != {type(e)}'
    assert _utils.dtype_of(a) == _utils.dtype_of(e), f'{what}: {_utils.dtype_of(a)}'
    np.testing.assert_array_equal(np.asarray(a), np.asarray(e), err_msg=what)


def assert_same_types(actual, expected, path='state', numpy_leaves=False):
  """``type(a) is type(b)`` at every node, recursively (NamedTuples, dicts, MaskedNodes);
  with ``numpy_leaves``, a jax array leaf may be read-only NumPy (a restored msgpack file's)."""
  if numpy_leaves and isinstance(expected, jax.Array) and type(actual) is np.ndarray:
    assert not actual.flags.writeable, f'{path}: a writable NumPy array'
  else:
    assert type(actual) is type(expected), f'{path}: {type(actual)} is not {type(expected)}'
  if isinstance(expected, dict):
    assert list(actual) == list(expected), path
    for key in expected:
      assert_same_types(actual[key], expected[key], f'{path}/{key}', numpy_leaves)
  elif isinstance(expected, (tuple, list)):
    assert len(actual) == len(expected), path
    for i, (a, e) in enumerate(zip(actual, expected)):
      assert_same_types(a, e, f'{path}/{i}', numpy_leaves)
  elif hasattr(expected, 'dtype'):
    assert actual.dtype == expected.dtype and np.shape(actual) == np.shape(expected), path


def run_optax(tx, params, steps=STEPS, grads_at=_grads):
  """The reference: a plain jitted optax loop; ``[(params, state)]`` after every step."""
  @jax.jit
  def step(params, state, grads):
    updates, state = tx.update(grads, state, params)
    return optax.apply_updates(params, updates), state

  state, out = tx.init(params), []
  for k in range(steps):
    params, state = step(params, state, grads_at(k))
    out.append((params, state))
  return out


def run_legacy(opt_def, params, steps=STEPS, grads_at=_grads):
  step = jax.jit(lambda optimizer, grads: optimizer.apply_gradient(grads))
  optimizer, out = opt_def.create(params), []
  for k in range(steps):
    optimizer = step(optimizer, grads_at(k))
    out.append(optimizer)
  return out


def assert_matches_optax(tx, params=None, steps=STEPS, grads_at=_grads, opt_def=None):
  params = _params() if params is None else params
  reference = run_optax(tx, params, steps, grads_at)
  legacy = run_legacy(from_optax(tx) if opt_def is None else opt_def, params, steps, grads_at)
  for k, (optimizer, (ref_params, ref_state)) in enumerate(zip(legacy, reference)):
    assert_same(optimizer.target, ref_params, f'target after step {k}')
    assert_same(optimizer.state.param_states, ref_state, f'optax state after step {k}')
    assert int(optimizer.state.step) == k + 1
  return legacy, reference


# ----------------------------------------------------------------------------- construction


def test_repr_and_hyper_params():
  opt_def = from_optax(optax.adamw, learning_rate=0.001, weight_decay=0.0001)
  assert repr(opt_def) == 'from_optax(adamw, learning_rate=0.001, weight_decay=0.0001)'
  # Every numeric argument, given or defaulted, as legacy defs hold all their hyper-params.
  assert opt_def.hyper_params == {'learning_rate': 0.001, 'b1': 0.9, 'b2': 0.999, 'eps': 1e-8,
                                  'eps_root': 0.0, 'weight_decay': 0.0001}
  tx_def = from_optax(optax.sgd(0.1))
  assert repr(tx_def) == 'from_optax(<GradientTransformationExtraArgs>)'
  assert tx_def.hyper_params == {}
  assert isinstance(opt_def, optim.OptimizerDef) and isinstance(opt_def, FromOptax)


def test_schedules_and_flags_are_not_injected_constants():
  schedule = optax.linear_schedule(0.1, 0.0, 10)
  opt_def = from_optax(optax.sgd, learning_rate=schedule, momentum=0.9, nesterov=True)
  assert opt_def.hyper_params == {'momentum': 0.9}


def test_bad_construction_arguments():
  with pytest.raises(TypeError, match=r"hyper-parameters \['learning_rate'\] with a transf"):
    from_optax(optax.sgd(0.1), learning_rate=0.2)
  with pytest.raises(TypeError, match=r'from_optax\(adam, \.\.\.\).*bogus'):
    from_optax(optax.adam, learning_rate=0.1, bogus=1.0)
  with pytest.raises(TypeError, match='optax transformation or factory, got float'):
    from_optax(0.1)


def test_no_per_leaf_protocol():
  opt_def = from_optax(optax.sgd(0.1))
  with pytest.raises(NotImplementedError, match='no per-parameter state; use init_state'):
    opt_def.init_param_state(jnp.ones(2))
  with pytest.raises(NotImplementedError, match='no per-parameter update; use apply_gradient'):
    opt_def.apply_param_gradient(0, {}, jnp.ones(2), None, jnp.ones(2))


def test_state_is_legacy_shaped_with_the_optax_state():
  tx = optax.adam(0.1)
  optimizer = from_optax(tx).create(_params())
  assert isinstance(optimizer.state, optim.OptimizerState)
  assert optimizer.state.step.dtype == jnp.int32 and int(optimizer.state.step) == 0
  assert_same(optimizer.state.param_states, tx.init(_params()))
  assert optimizer.optimizer_def.optax_state(optimizer.target, optimizer.state) is (
      optimizer.state.param_states)
  assert optimizer.optimizer_def.optax_transform() is tx


# ----------------------------------------------------------------------------- overrides


def _reference_with_overrides(tx, params, lrs, put_back):
  """Plain optax: ``state.hyperparams['learning_rate']`` set to ``lrs[k]`` (``None``: 1e-2)
  for update ``k``; with ``put_back``, the previous value is put back in the new state."""
  @jax.jit
  def step(params, state, grads, lr):
    before = state.hyperparams['learning_rate']
    state = state._replace(hyperparams={**state.hyperparams, 'learning_rate': lr})
    updates, state = tx.update(grads, state, params)
    if put_back:
      state = state._replace(hyperparams={**state.hyperparams, 'learning_rate': before})
    return optax.apply_updates(params, updates), state

  state, out = tx.init(params), []
  for k, lr in enumerate(lrs):
    params, state = step(params, state, _grads(k), jnp.float32(1e-2 if lr is None else lr))
    out.append((params, state))
  return out


@pytest.mark.parametrize('form', ['factory', 'user_injected'])
def test_traced_override_one_compilation_and_only_that_step(form):
  if form == 'factory':
    opt_def = from_optax(optax.adamw, learning_rate=1e-2, weight_decay=1e-3)
  else:
    opt_def = from_optax(optax.inject_hyperparams(optax.adamw)(learning_rate=1e-2,
                                                               weight_decay=1e-3))
  tx = optax.inject_hyperparams(optax.adamw)(learning_rate=1e-2, weight_decay=1e-3)
  lrs = [0.1, 0.2, None, 0.05, None, 0.3, 0.3, None, 0.01, 0.02]
  # from_optax(factory) holds the constants like a legacy def and sets them before every
  # update, so the state records what each update used; a transform injected outside keeps
  # its own value in its state, and a one-call override is put back.
  expected = _reference_with_overrides(tx, _params(), lrs, put_back=form == 'user_injected')

  with_lr = _utils.TraceCounter(lambda opt, g, lr: opt.apply_gradient(g, learning_rate=lr))
  without = _utils.TraceCounter(lambda opt, g: opt.apply_gradient(g))
  step_lr, step = jax.jit(with_lr), jax.jit(without)
  optimizer = opt_def.create(_params())
  for k, lr in enumerate(lrs):
    optimizer = step(optimizer, _grads(k)) if lr is None else step_lr(optimizer, _grads(k), lr)
    assert_same(optimizer.target, expected[k][0], f'target after step {k}')
    assert_same(optimizer.state.param_states, expected[k][1], f'state after step {k}')
    used = 1e-2 if lr is None or form == 'user_injected' else lr
    assert float(_current(optimizer)['learning_rate']) == np.float32(used)
  assert with_lr.count == 1 and without.count == 1


def test_override_changes_the_update_by_hand_math():
  optimizer = from_optax(optax.sgd, learning_rate=0.5).create({'w': jnp.array([1.0])})
  optimizer = optimizer.apply_gradient({'w': jnp.array([2.0])}, learning_rate=0.25)
  np.testing.assert_array_equal(optimizer.target['w'], [0.5])  # 1 - 0.25 * 2
  optimizer = optimizer.apply_gradient({'w': jnp.array([2.0])})
  np.testing.assert_array_equal(optimizer.target['w'], [-0.5])  # 0.5 - 0.5 * 2


def test_factory_defaults_are_overridable_too():
  """``b1`` was not given to from_optax: optax's default is injected, hence overridable."""
  tx = optax.inject_hyperparams(optax.adam)(learning_rate=0.1, b1=0.5)
  expected = run_optax(tx, _params(), steps=3)
  optimizer = from_optax(optax.adam, learning_rate=0.1).create(_params())
  step = jax.jit(lambda optimizer, grads: optimizer.apply_gradient(grads, b1=0.5))
  for k in range(3):
    optimizer = step(optimizer, _grads(k))
    assert_same(optimizer.target, expected[k][0], f'target after step {k}')
  with pytest.raises(TypeError, match=r"unexpected hyper-parameter 'momentum'; available: \['le"):
    from_optax(optax.sgd, learning_rate=1.0).create(_params()).apply_gradient(_grads(0),
                                                                             momentum=0.5)


def test_hyper_params_replacement():
  opt_def = from_optax(optax.sgd, learning_rate=0.5)
  assert opt_def.update_hyper_params(hyper_params={'learning_rate': 0.1}, momentum=0.0) == {
      'learning_rate': 0.1, 'momentum': 0.0}
  optimizer = opt_def.create({'w': jnp.array([1.0])})
  out = optimizer.apply_gradient({'w': jnp.array([1.0])}, hyper_params={'learning_rate': 0.25})
  np.testing.assert_array_equal(out.target['w'], [0.75])
  with pytest.raises(TypeError, match='hyper_params must be a mapping'):
    optimizer.apply_gradient({'w': jnp.array([1.0])}, hyper_params=[0.1])


def _unchanged(before, after):
  assert_same(after.target, before.target)
  assert_same(after.state, before.state)


def test_unknown_override_names_the_available_ones_and_changes_nothing():
  optimizer = from_optax(optax.adam, learning_rate=0.1).create(_params())
  snapshot = jax.tree_util.tree_map(jnp.array, optimizer)
  with pytest.raises(TypeError) as info:
    optimizer.apply_gradient(_grads(0), learnig_rate=0.2)
  message = str(info.value)
  assert "'learnig_rate'" in message
  assert "available: ['b1', 'b2', 'eps', 'eps_root', 'learning_rate']" in message
  with pytest.raises(TypeError, match='learnig_rate'):
    jax.jit(lambda opt, g: opt.apply_gradient(g, learnig_rate=0.2))(optimizer, _grads(0))
  _unchanged(snapshot, optimizer)


def test_schedule_override_is_refused():
  schedule = optax.linear_schedule(0.1, 0.0, 10)
  optimizer = from_optax(optax.adam, learning_rate=schedule).create(_params())
  with pytest.raises(TypeError, match="'learning_rate' is a schedule.*overridable: \\['b1'"):
    optimizer.apply_gradient(_grads(0), learning_rate=0.2)


def test_override_without_injection_says_how():
  optimizer = from_optax(optax.adam(0.1)).create(_params())
  with pytest.raises(TypeError, match=r'no injected hyper-parameters.*from_optax\(optax.adamw'):
    optimizer.apply_gradient(_grads(0), learning_rate=0.2)


def test_override_shape_is_checked():
  optimizer = from_optax(optax.sgd, learning_rate=0.1).create(_params())
  with pytest.raises(ValueError, match=r"'learning_rate' has shape \(2,\)"):
    optimizer.apply_gradient(_grads(0), learning_rate=jnp.ones(2))


def test_bad_grads_name_the_path():
  optimizer = from_optax(optax.adam(0.1)).create(_params())
  grads = _grads(0)
  grads['dense']['bias'] = jnp.ones(3)
  with pytest.raises(ValueError, match=r"'/dense/bias'.*\(4,\).*\(3,\)"):
    optimizer.apply_gradient(grads)
  with pytest.raises(ValueError, match="missing in the grads: '/scale'"):
    optimizer.apply_gradient({'dense': _grads(0)['dense']})


# ----------------------------------------------------------------------------- current values


def _current(optimizer):
  return optimizer.optimizer_def.current_hyper_params(optimizer.target, optimizer.state)


def test_current_hyper_params_evaluates_schedules():
  schedule = optax.linear_schedule(1.0, 0.0, transition_steps=4)
  opt_def = from_optax(optax.sgd, learning_rate=schedule, momentum=0.5)
  optimizer = opt_def.create({'w': jnp.zeros(1)})
  assert _current(optimizer) == {'learning_rate': 1.0, 'momentum': 0.5}
  for k in range(3):
    optimizer = optimizer.apply_gradient({'w': jnp.ones(1)})
    # step k used the schedule at count k: 1 - k / 4
    assert float(_current(optimizer)['learning_rate']) == 1.0 - k / 4
  assert float(_current(optimizer)['momentum']) == 0.5


def test_current_hyper_params_of_a_plain_transform_and_of_several_injections():
  assert _current(from_optax(optax.adam(0.1)).create(_params())) == {}
  tx = optax.multi_transform(
      {'a': optax.inject_hyperparams(optax.sgd)(learning_rate=0.1),
       'b': optax.inject_hyperparams(optax.adam)(learning_rate=0.2)},
      {'dense': {'kernel': 'a', 'bias': 'a'}, 'scale': 'b'})
  current = _current(from_optax(tx).create(_params()))
  assert float(current['/inner_states/a/inner_state/learning_rate']) == np.float32(0.1)
  assert float(current['/inner_states/b/inner_state/learning_rate']) == np.float32(0.2)
  assert float(current['b1']) == np.float32(0.9)


def test_optimizer_current_hyper_params():
  """``Optimizer.current_hyper_params()``: a from_optax def's record, a built-in's own values."""
  schedule = optax.linear_schedule(1.0, 0.0, transition_steps=4)
  optimizer = from_optax(optax.sgd, learning_rate=schedule).create({'w': jnp.zeros(1)})
  optimizer = optimizer.apply_gradient({'w': jnp.ones(1)}).apply_gradient({'w': jnp.ones(1)})
  assert float(optimizer.current_hyper_params()['learning_rate']) == 0.75
  adam = optim.Adam(learning_rate=0.1, beta1=0.8).create({'w': jnp.zeros(1)})
  assert adam.current_hyper_params() == {'learning_rate': 0.1, 'beta1': 0.8, 'beta2': 0.999,
                                         'eps': 1e-8, 'weight_decay': 0.0}


# ----------------------------------------------------------------------------- built-ins


@pytest.mark.parametrize('make', [lambda: optim.Adam(1e-2), lambda: optim.Momentum(0.1, beta=0.9),
                                  lambda: optim.RMSProp(1e-2)],
                         ids=['Adam', 'Momentum', 'RMSProp'])
def test_a_builtin_transform_is_exact(make):
  builtin = make()
  legacy = run_legacy(builtin, _params())
  ours = run_legacy(from_optax(builtin.optax_transform()), _params())
  for k, (a, b) in enumerate(zip(ours, legacy)):
    assert_same(a.target, b.target, f'target after step {k}')


def test_builtin_to_optax_continues_exactly():
  """A legacy optimizer switches to its optax form mid-run and continues with the same numbers."""
  step = jax.jit(lambda optimizer, grads: optimizer.apply_gradient(grads))
  optimizer = optim.Adam(1e-2, weight_decay=1e-3).create(_params())
  for k in range(4):
    optimizer = step(optimizer, _grads(k))
  converted = optimizer.to_optax()
  assert isinstance(converted.optimizer_def, FromOptax)
  assert int(converted.state.step) == 4
  for k in range(4, STEPS):
    optimizer, converted = step(optimizer, _grads(k)), step(converted, _grads(k))
    assert_same(converted.target, optimizer.target, f'target after step {k}')


# ----------------------------------------------------------------------------- wrappers


def test_chain_with_clipping():
  tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(1e-2, weight_decay=1e-3))
  assert_matches_optax(tx)


def test_multi_steps_step_counts_calls():
  tx = optax.MultiSteps(optax.adam(1e-2), every_k_schedule=3)
  legacy, _ = assert_matches_optax(tx)
  # `step` counts apply_gradient calls (mini-steps); optax's gradient_step the real updates,
  # and the target only moves on every third call.
  assert [int(o.state.step) for o in legacy] == list(range(1, STEPS + 1))
  assert [int(o.state.param_states.gradient_step) for o in legacy] == [k // 3 for k in
                                                                      range(1, STEPS + 1)]
  assert_same(legacy[0].target, _params())
  assert not np.array_equal(legacy[2].target['scale'], _params()['scale'])


def test_apply_if_finite_skips_and_counts_a_nan_step():
  def grads_at(k):
    grads = _grads(k)
    if k == 4:
      grads['scale'] = grads['scale'].at[0].set(jnp.nan)
    return grads

  tx = optax.apply_if_finite(optax.adam(1e-2), max_consecutive_errors=3)
  legacy, _ = assert_matches_optax(tx, grads_at=grads_at)
  assert_same(legacy[4].target, legacy[3].target)  # the NaN step left the target unchanged
  assert int(legacy[4].state.step) == 5  # and is counted
  assert int(legacy[4].state.param_states.total_notfinite) == 1
  assert not np.array_equal(legacy[5].target['scale'], legacy[4].target['scale'])


def test_bfloat16_params_keep_their_dtype():
  params = jax.tree_util.tree_map(lambda p: p.astype(jnp.bfloat16), _params())
  grads_at = lambda k: jax.tree_util.tree_map(lambda g: g.astype(jnp.bfloat16), _grads(k))
  legacy, _ = assert_matches_optax(optax.adam(1e-2), params=params, grads_at=grads_at)
  assert {x.dtype for x in jax.tree_util.tree_leaves(legacy[-1].target)} == {jnp.dtype('bfloat16')}


def test_masked():
  mask = {'dense': {'kernel': True, 'bias': False}, 'scale': True}
  assert_matches_optax(optax.masked(optax.adam(1e-2), mask))


def test_flatten():
  assert_matches_optax(optax.flatten(optax.adam(1e-2)))


def test_inject_hyperparams_with_a_schedule():
  schedule = optax.warmup_cosine_decay_schedule(0.0, 1e-2, warmup_steps=3, decay_steps=10)
  tx = optax.inject_hyperparams(optax.adamw)(learning_rate=schedule, weight_decay=1e-3)
  legacy, _ = assert_matches_optax(tx)
  assert float(_current(legacy[4])['learning_rate']) == np.float32(schedule(4))
  assert_matches_optax(tx, opt_def=from_optax(optax.adamw, learning_rate=schedule,
                                              weight_decay=1e-3))


def test_lookahead_with_a_lookahead_params_target():
  tx = optax.lookahead(optax.adam(1e-2), sync_period=3, slow_step_size=0.5)
  params = optax.LookaheadParams.init_synced(_params())
  fast_grads = lambda k: _grads(k)  # gradients of the fast params

  @jax.jit
  def reference_step(params, state, grads):
    updates, state = tx.update(grads, state, params)
    return optax.apply_updates(params, updates), state

  step = jax.jit(lambda optimizer, grads: optimizer.apply_gradient(grads))
  optimizer, state = from_optax(tx).create(params), tx.init(params)
  for k in range(STEPS):
    params, state = reference_step(params, state, fast_grads(k))
    optimizer = step(optimizer, fast_grads(k))
    assert_same(optimizer.target, params, f'target after step {k}')
    assert_same(optimizer.state.param_states, state, f'state after step {k}')
  # A LookaheadParams of gradients (jax.grad of a loss of target.fast) works the same.
  both = optax.LookaheadParams(fast=fast_grads(0), slow=jax.tree_util.tree_map(
      jnp.zeros_like, fast_grads(0)))
  assert_same(optimizer.apply_gradient(both).target, optimizer.apply_gradient(fast_grads(0)).target)
  with pytest.raises(ValueError, match="'/dense'"):
    optimizer.apply_gradient({'scale': fast_grads(0)['scale']})


# ----------------------------------------------------------------------------- checkpoints


def _rich_def():
  schedule = optax.linear_schedule(1e-2, 1e-3, transition_steps=8)
  return from_optax(optax.MultiSteps(
      optax.chain(optax.clip_by_global_norm(1.0),
                  optax.inject_hyperparams(optax.adamw)(learning_rate=schedule,
                                                        weight_decay=1e-3)),
      every_k_schedule=2))


def _trained(opt_def, steps=5):
  step = jax.jit(lambda optimizer, grads: optimizer.apply_gradient(grads))
  optimizer = opt_def.create(_params())
  for k in range(steps):
    optimizer = step(optimizer, _grads(k))
  return optimizer


def _check_restored(restored, trained, fresh):
  # A msgpack file's arrays come back as read-only NumPy (as legacy); orbax's and in-memory
  # ones as jax arrays. On the device, they are the trained ones.
  for leaf in jax.tree_util.tree_leaves(restored):
    assert isinstance(leaf, jax.Array) or (
        type(leaf) is np.ndarray and not leaf.flags.writeable), type(leaf)
  assert_same(jax.device_put(restored.target), trained.target)
  assert_same(jax.device_put(restored.state), trained.state)
  assert_same_types(restored.state.param_states, fresh.state.param_states, numpy_leaves=True)
  # Same types as a fresh tx.init: lax.cond and tree_map between old and new state work.
  picked = jax.jit(lambda p, a, b: jax.lax.cond(p, lambda: a, lambda: b))(
      True, restored.state, fresh.state)
  assert_same(picked, trained.state)
  jax.tree_util.tree_map(lambda a, b: a, restored.state, fresh.state)
  # And training continues exactly.
  step = jax.jit(lambda optimizer, grads: optimizer.apply_gradient(grads))
  assert_same(step(restored, _grads(9)), step(trained, _grads(9)))


def test_state_dict_round_trip():
  opt_def = _rich_def()
  trained, fresh = _trained(opt_def), opt_def.create(_params())
  restored = fresh.restore_state(trained.state_dict())
  _check_restored(restored, trained, fresh)


def test_bytes_round_trip():
  opt_def = _rich_def()
  trained, fresh = _trained(opt_def), opt_def.create(_params())
  restored = serialization.from_bytes(fresh, serialization.to_bytes(trained))
  _check_restored(restored, trained, fresh)


# flax warns that its msgpack backend (the one old code writes) will give way to orbax.
@pytest.mark.filterwarnings('ignore:Flax Checkpointing will soon be deprecated:DeprecationWarning')
@pytest.mark.parametrize('orbax', [
    pytest.param(False, id='msgpack_file'),
    # Orbax's metadata shows an empty container (optax's EmptyState) as None: the strict check
    # of the tree orbax wrote accepts that for an empty container of the target.
    pytest.param(True, id='orbax_dir'),
])
def test_checkpoint_round_trip(tmp_path, orbax):
  opt_def = _rich_def()
  trained, fresh = _trained(opt_def), opt_def.create(_params())
  previous = flax.config.flax_use_orbax_checkpointing
  flax.config.update('flax_use_orbax_checkpointing', orbax)
  try:
    path = checkpoints.save_checkpoint(tmp_path, trained, step=5)
    assert (tmp_path / 'checkpoint_5').is_dir() == orbax, path
    restored = checkpoints.restore_checkpoint(tmp_path, target=fresh)
  finally:
    flax.config.update('flax_use_orbax_checkpointing', previous)
  _check_restored(restored, trained, fresh)


def test_restoring_another_transform_names_the_first_differing_path(tmp_path):
  trained = _trained(from_optax(optax.sgd(0.1, momentum=0.9)))
  fresh = from_optax(optax.adam(0.1)).create(_params())
  snapshot = jax.tree_util.tree_map(jnp.array, fresh)
  with pytest.raises(ValueError) as info:
    fresh.restore_state(trained.state_dict())
  message = str(info.value)
  assert "at '/state/param_states/0'" in message and 'Nothing was restored' in message
  assert "'mu'" in message and "'trace'" in message
  _unchanged(snapshot, fresh)


def test_restoring_other_shapes_names_the_path():
  trained = _trained(from_optax(optax.adam(0.1)))
  params = _params()
  params['scale'] = jnp.ones(6)
  fresh = from_optax(optax.adam(0.1)).create(params)
  with pytest.raises(ValueError, match=r"'/target/scale'.*shape \(5,\).*\(6,\)"):
    serialization.from_bytes(fresh, serialization.to_bytes(trained))


# ----------------------------------------------------------------------------- DynamicScale


def test_with_dynamic_scale():
  """The legacy mixed-precision loop: a non-finite step keeps the optimizer as it was."""
  tx = optax.adam(1e-2)
  params = _params()
  loss = lambda p, k: sum(jnp.sum(jnp.sin(x) * (k + 1.0)) for x in jax.tree_util.tree_leaves(p))

  @jax.jit
  def step(optimizer, scale, k, poison):
    grad_fn = scale.value_and_grad(lambda p: loss(p, k) * poison)
    scale, is_finite, _, grads = grad_fn(optimizer.target)
    new = optimizer.apply_gradient(grads)
    optimizer = jax.tree_util.tree_map(lambda a, b: jnp.where(is_finite, a, b), new, optimizer)
    return optimizer, scale, is_finite

  @jax.jit
  def reference(params, state, k):
    grads = jax.grad(loss)(params, k)
    updates, state = tx.update(grads, state, params)
    return optax.apply_updates(params, updates), state

  optimizer, scale = from_optax(tx).create(params), dynamic_scale_lib.DynamicScale()
  state = tx.init(params)
  for k in range(6):
    poison = jnp.inf if k == 2 else 1.0
    before = optimizer
    optimizer, scale, is_finite = step(optimizer, scale, k, poison)
    if k == 2:
      assert not bool(is_finite)
      assert_same(optimizer, before)
    else:
      params, state = reference(params, state, k)
    _utils.assert_trees_close(optimizer.target, params, rtol=1e-6)
