"""Data-parallel training with ``jax.pmap``: the two legacy routes, against legacy and one device.

Today's ``jax.pmap`` is built on ``jit`` + ``shard_map``, so none of this is assumed: every
pmap case of ``tests/catalogue.py`` is trained

* on one device on the full batch (reference),
* replicated with ``flax.jax_utils.replicate`` in a ``pmap`` step with ``lax.pmean`` grads,
* replicated with ``optimizer.replicate()`` (``ReplicatedOptimizer`` averages the grads),

checkpointed and restored on both routes, and compared per step with the single-device run
and with the legacy oracle's own 8-device pmap runs (tests/fixtures/pmap, made by
``python -m tools.oracle.gen_pmap``).

The suite runs on 8 simulated CPU devices (conftest.py). Standalone on an accelerator the
file uses whatever devices there are (the batch of 16 is split over the largest device count
dividing 16), e.g. on one GPU:

    JAX_PLATFORMS=cuda python -m pytest -q tests/test_pmap.py
"""
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import jax_utils
from flax import serialization

import flax_optim_compat as optim
from flax_optim_compat import _deprecation
from tests import _utils
from tests import pmap_specs

pytestmark = [
    pytest.mark.filterwarnings('ignore::flax_optim_compat.FlaxOptimDeprecationWarning'),
    # flax's own warning on constructing traversals (MultiOptimizer / focus= cases).
    pytest.mark.filterwarnings(
        'ignore:`flax.traverse_util.Traversal` will be deprecated:DeprecationWarning'),
]


def _devices():
  devices = jax.local_devices()
  n = max(k for k in range(1, len(devices) + 1) if pmap_specs.BATCH % k == 0)
  return devices[:n]


DEVICES = _devices()
N = len(DEVICES)
LAST = str(pmap_specs.STEPS + pmap_specs.STEPS_AFTER - 1)
STEP_KEYS = ['created'] + [str(i) for i in range(pmap_specs.STEPS + pmap_specs.STEPS_AFTER)]


def test_eight_cpu_devices():
  """conftest.py's XLA_FLAGS took effect: the CPU suite really runs on 8 devices."""
  if jax.default_backend() != 'cpu':
    pytest.skip(f'running on {jax.default_backend()} with {N} device(s)')
  assert jax.device_count() == 8 and N == 8


# ----------------------------------------------------------------------------- runs (cached)

_RUNS = {}
_assert_close = _utils.assert_trees_close_as
_fixture = _utils.pmap_fixture


def _case(name):
  """The case rebuilt from its seed (keeps the dict insertion order legacy saw)."""
  case = pmap_specs.make_case(name)
  _utils.assert_trees_close(case['target'], _fixture(name)['case']['target'], rtol=0)
  _utils.assert_trees_close(case['batches'], _fixture(name)['case']['batches'], rtol=0)
  return case


def _run(name, route):
  key = (name, route)
  if key not in _RUNS:
    case = _case(name)
    sd = serialization.to_state_dict
    if route == 'single':
      _RUNS[key] = pmap_specs.run_single(optim, case, jax=jax, to_state_dict=sd)
    elif route == 'pmean':
      _RUNS[key] = pmap_specs.run_pmean(
          optim, case, jax=jax, jax_utils=jax_utils, to_state_dict=sd,
          to_bytes=serialization.to_bytes, from_bytes=serialization.from_bytes, devices=DEVICES)
    else:
      _RUNS[key] = pmap_specs.run_replicated(
          optim, case, jax=jax, to_state_dict=sd, to_bytes=serialization.to_bytes,
          from_bytes=serialization.from_bytes, devices=DEVICES)
  return _RUNS[key]


def _key_order(tree):
  if isinstance(tree, dict):
    return [(k, _key_order(v)) for k, v in tree.items()]
  return None


def _assert_same_bytes_layout(ours, legacy, what):
  """msgpack bytes with the same maps in the same key order, same leaves, close values."""
  ours, legacy = serialization.msgpack_restore(ours), serialization.msgpack_restore(legacy)
  assert _key_order(ours) == _key_order(legacy), f'{what}: key order differs from legacy'
  _assert_close(ours, legacy, what)


CASES = pmap_specs.case_names()


def test_every_case_has_a_legacy_fixture_and_no_fixture_is_stale():
  missing = [n for n in CASES if n not in _utils.fixture_names('pmap')]
  assert not missing, f'run python -m tools.oracle.gen_pmap {" ".join(missing)} in the oracle venv'
  stale = [n for n in _utils.fixture_names('pmap') if n not in CASES]
  assert not stale, f'fixtures without a case in tests/catalogue.py: {stale}'


# ----------------------------------------------------------------------------- pmean route


@pytest.mark.parametrize('name', CASES)
def test_pmean_route_matches_single_device_and_legacy(name):
  """``jax_utils.replicate`` + ``pmap`` + ``lax.pmean``: equal to one device and to legacy."""
  ours, single = _run(name, 'pmean'), _run(name, 'single')
  legacy = _fixture(name)['pmean']
  for step in STEP_KEYS:
    differ = pmap_specs.replicas_differ(ours[step])
    assert not differ, f'{name} step {step}: device copies differ at {differ}'
    ours_step = pmap_specs.first_replica(ours[step])
    _assert_close(ours_step, single[step], f'{name} step {step} vs single device')
    _assert_close(ours_step, legacy[step], f'{name} step {step} vs legacy pmap')
  # The plain def keeps the device axis in the state dict (legacy behaviour).
  if N == legacy['last_full']['state']['step'].shape[0]:
    _assert_close(ours[LAST], legacy['last_full'], f'{name} last step with device axis')
  assert np.shape(ours[LAST]['state']['step']) == (N,)


@pytest.mark.parametrize('name', CASES)
def test_pmean_route_checkpoint_of_unreplicated_copy(name):
  """``to_bytes(jax_utils.unreplicate(opt))``: one copy, equal to legacy's checkpoint."""
  ours = serialization.msgpack_restore(_run(name, 'pmean')['checkpoint'])
  legacy = serialization.msgpack_restore(_fixture(name)['pmean']['checkpoint'])
  _assert_close(ours, legacy, f'{name} checkpoint')
  _assert_close(ours, pmap_specs.first_replica(_run(name, 'pmean')[str(pmap_specs.STEPS - 1)]),
                f'{name} checkpoint vs state before it', rtol=0)
  if N == _fixture(name)['n_devices']:
    _assert_same_bytes_layout(_run(name, 'pmean')['created_bytes'],
                              _fixture(name)['pmean']['created_bytes'], f'{name} created')


# ----------------------------------------------------------------------------- ReplicatedOptimizer route


@pytest.mark.parametrize('name', CASES)
def test_replicated_route_matches_single_device_and_legacy(name):
  """``optimizer.replicate()`` (grads averaged by ReplicatedOptimizer): one device and legacy."""
  ours, single = _run(name, 'replicated'), _run(name, 'single')
  legacy = _fixture(name)['replicated']
  for step in STEP_KEYS + ['restored']:
    _assert_close(ours[step], legacy[step], f'{name} {step} vs legacy pmap')
    if step != 'restored':
      _assert_close(ours[step], single[step], f'{name} step {step} vs single device')
  _assert_close(ours['restored'], ours[str(pmap_specs.STEPS - 1)], f'{name} restored', rtol=0)


@pytest.mark.parametrize('name', CASES)
def test_replicated_checkpoint_is_one_sorted_copy_like_legacy(name):
  ours = _run(name, 'replicated')
  legacy = _fixture(name)['replicated']
  if N == _fixture(name)['n_devices']:
    _assert_same_bytes_layout(ours['created_bytes'], legacy['created_bytes'], f'{name} created')
  # Independent of the device count: the checkpoint holds no device axis.
  assert serialization.msgpack_restore(ours['created_bytes']).keys() == {'state', 'target'}
  _assert_close(serialization.msgpack_restore(ours['created_bytes']),
                serialization.msgpack_restore(legacy['created_bytes']), f'{name} created')
  _assert_close(serialization.msgpack_restore(ours['checkpoint']),
                serialization.msgpack_restore(legacy['checkpoint']), f'{name} checkpoint')
  state_dict = ours['restored']
  assert list(state_dict) == ['state', 'target']
  assert list(state_dict['state']) == ['param_states', 'step']


@pytest.mark.parametrize('name', ['Adam', 'MultiOptimizer'])
def test_legacy_replicated_checkpoint_restores_into_ours_and_trains_on(name):
  """The oracle's checkpoint restored into our replicated optimizer continues like legacy."""
  legacy = _fixture(name)['replicated']
  ours = pmap_specs.run_replicated(
      optim, _case(name), jax=jax, to_state_dict=serialization.to_state_dict,
      to_bytes=serialization.to_bytes, from_bytes=serialization.from_bytes, devices=DEVICES,
      checkpoint=legacy['checkpoint'])
  _assert_close(ours['restored'], legacy['restored'], f'{name} restored', rtol=0)
  for i in range(pmap_specs.STEPS, pmap_specs.STEPS + pmap_specs.STEPS_AFTER):
    _assert_close(ours[str(i)], legacy[str(i)], f'{name} step {i} after restore')


# ----------------------------------------------------------------------------- API semantics


def _momentum():
  return optim.Momentum(learning_rate=0.1, beta=0.5).create(
      {'w': jnp.array([1.0, 2.0]), 'b': jnp.array(0.5)})


def test_replicate_warns_like_legacy_and_unreplicate_does_not():
  optimizer = _momentum()
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter('always')
    replicated = optimizer.replicate()
  assert [(w.category, str(w.message)) for w in caught] == [
      (optim.FlaxOptimDeprecationWarning, _deprecation.USE_OPTAX)]
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter('always')
    replicated.unreplicate()
    replicated.state_dict()
  assert not caught


def test_replicate_attributes_and_layout():
  optimizer = _momentum()
  replicated = optimizer.replicate()
  opt_def = replicated.optimizer_def
  assert isinstance(opt_def, optim.ReplicatedOptimizer)
  assert opt_def.optimizer_def is optimizer.optimizer_def
  assert opt_def.hyper_params is optimizer.optimizer_def.hyper_params
  assert opt_def.devices == jax.local_devices() and opt_def.axis_name == 'batch'
  n = jax.local_device_count()
  assert replicated.target['w'].shape == (n, 2) and replicated.state.step.shape == (n,)
  assert replicated.state.step.dtype == jnp.int32
  np.testing.assert_array_equal(replicated.state.param_states['w'].momentum, np.zeros((n, 2)))
  assert opt_def.update_hyper_params(beta=0.7) == optimizer.optimizer_def.hyper_params.replace(
      beta=0.7)
  # unreplicate: first copy, the inner def back.
  back = replicated.unreplicate()
  assert back.optimizer_def is optimizer.optimizer_def
  _utils.assert_trees_close(back.target, optimizer.target, rtol=0)
  assert back.target['w'].shape == (2,) and back.state.step.shape == ()


def test_replicate_onto_chosen_devices_and_axis_name():
  devices = jax.local_devices()[:2] if jax.local_device_count() >= 2 else jax.local_devices()
  replicated = _momentum().replicate(devices=devices, axis_name='replicas')
  assert replicated.optimizer_def.devices == devices
  assert replicated.target['w'].shape == (len(devices), 2)
  assert set(replicated.target['w'].sharding.device_set) == set(devices)
  grads = {'w': jnp.arange(2.0 * len(devices)).reshape(len(devices), 2),
           'b': jnp.arange(len(devices), dtype=jnp.float32)}
  stepped = jax.pmap(lambda o, g: o.apply_gradient(g), axis_name='replicas',
                     devices=devices)(replicated, grads)
  # Hand math: mean grad over the devices, momentum 0 -> p - 0.1 * mean(g).
  mean_w = np.mean(np.asarray(grads['w']), axis=0)
  expected_w = np.array([1.0, 2.0]) - 0.1 * mean_w
  np.testing.assert_allclose(np.asarray(stepped.target['w']),
                             np.broadcast_to(expected_w, (len(devices), 2)), rtol=1e-6)
  np.testing.assert_allclose(np.asarray(stepped.target['b']),
                             0.5 - 0.1 * np.mean(np.asarray(grads['b'])), rtol=1e-6)
  np.testing.assert_array_equal(np.asarray(stepped.state.step), np.ones(len(devices)))


def test_unreplicate_requires_a_replicated_optimizer():
  with pytest.raises(ValueError, match='^Cannot unreplicate an optimizer that is not replicated.$'):
    _momentum().unreplicate()
  # jax_utils.replicate keeps the plain def: not "replicated" in the legacy sense.
  with pytest.raises(ValueError, match='not replicated'):
    jax_utils.replicate(_momentum()).unreplicate()


def test_replicated_apply_gradient_outside_pmap_names_the_axis():
  replicated = _momentum().replicate()
  grads = jax.tree_util.tree_map(jnp.ones_like, replicated.target)
  with pytest.raises(NameError, match='unbound axis name: batch'):
    replicated.apply_gradient(grads)
  with pytest.raises(NameError, match='unbound axis name: batch'):
    jax.jit(lambda o, g: o.apply_gradient(g))(replicated, grads)


def test_replicated_state_dict_is_one_copy_with_sorted_keys():
  optimizer = _momentum()
  replicated = optimizer.replicate()
  state_dict = serialization.to_state_dict(replicated)
  assert list(state_dict) == ['state', 'target']
  assert list(state_dict['state']) == ['param_states', 'step']
  assert list(state_dict['target']) == ['b', 'w']
  _utils.assert_trees_close(state_dict, serialization.to_state_dict(optimizer), rtol=0)
  # The plain-def route keeps the device axis (legacy).
  plain = serialization.to_state_dict(jax_utils.replicate(optimizer))
  assert list(plain) == ['target', 'state']
  assert plain['target']['w'].shape == (jax.local_device_count(), 2)


def test_restore_state_replicates_onto_the_def_devices():
  devices = jax.local_devices()[:2] if jax.local_device_count() >= 2 else jax.local_devices()
  optimizer = _momentum()
  state_dict = serialization.to_state_dict(optimizer.replace(
      target={'w': jnp.array([3.0, 4.0]), 'b': jnp.array(-1.0)}))
  template = optimizer.replicate(devices=devices)
  restored = serialization.from_state_dict(template, state_dict)
  assert restored.optimizer_def is template.optimizer_def
  assert restored.target['w'].shape == (len(devices), 2)
  assert set(restored.target['w'].sharding.device_set) == set(devices)
  np.testing.assert_array_equal(np.asarray(restored.target['w']), [[3.0, 4.0]] * len(devices))
  np.testing.assert_array_equal(np.asarray(restored.state.step), [0] * len(devices))
  # And from bytes (what a checkpoint file holds).
  restored = serialization.from_bytes(template, serialization.to_bytes(restored))
  np.testing.assert_array_equal(np.asarray(restored.target['b']), [-1.0] * len(devices))


def test_replicated_state_dict_reads_each_leaf_on_one_device():
  """A replicated optimizer's checkpoint holds replica 0 of every leaf, read on that replica's
  own device (no program over all eight devices per leaf), equal to legacy's ``x[0]``."""
  with warnings.catch_warnings():
    warnings.simplefilter('ignore', _deprecation.FlaxOptimDeprecationWarning)
    opt = optim.Adam(0.1).create({'w': jnp.arange(6.0).reshape(2, 3)}).replicate()
  grads = jax.tree_util.tree_map(jnp.ones_like, opt.target)
  opt = jax.pmap(lambda o, g: o.apply_gradient(g), axis_name='batch')(opt, grads)
  state = serialization.to_state_dict(opt)
  for path, leaf in jax.tree_util.tree_leaves_with_path(state):
    assert len(leaf.sharding.device_set) == 1, path
  full = jax.tree_util.tree_map(np.asarray, serialization.to_state_dict(opt.unreplicate()))
  jax.tree_util.tree_map(np.testing.assert_array_equal, full,
                         jax.tree_util.tree_map(np.asarray, state))
