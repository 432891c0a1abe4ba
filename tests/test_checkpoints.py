"""Legacy checkpoints in both directions (flax#1429, #1464, #1550, #3977).

Fixtures (``python -m tools.oracle.gen_checkpoints``, run in the legacy oracle venv):

* tests/fixtures/checkpoints/legacy/<case>/checkpoint_3: written by the REAL flax 0.5.3
  ``save_checkpoint`` after 3 legacy steps, kept byte-for-byte;
* tests/fixtures/checkpoints/ours/<case>/checkpoint_3: written by this library (modern
  ``save_checkpoint``, msgpack backend) on the same inputs;
* expected.msgpack: the inputs, and what the legacy library did: its own trajectory continuing
  from its file (jit, and eager for bare optimizers), and what it restored from OUR file and its
  trajectory continuing from there.

Tolerance: float32 trajectories agree within rtol 1e-5 per leaf (relative to the leaf's max
|value|): legacy itself differs by ~1e-6 between eager and jit over 20 float32 steps, and optax
associates some products differently. Restored values must be bit-identical to the file.
"""
import os

import flax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import jax_utils
from flax import serialization
from flax import struct
from flax.core import freeze
from flax.training import checkpoints

import flax_optim_compat as optim
from flax_optim_compat import _restore
from flax_optim_compat import dynamic_scale
from tests import _utils
from tests import checkpoint_specs as specs

# Modern flax warns that its msgpack checkpointing will be replaced by Orbax; the msgpack
# backend is exactly what old code and the legacy library read and write.
# MultiOptimizer cases build `ModelParamTraversal`s, which flax itself deprecates.
pytestmark = [
    pytest.mark.filterwarnings(
        'ignore:Flax Checkpointing will soon be deprecated:DeprecationWarning'),
    pytest.mark.filterwarnings(
        'ignore:`flax.traverse_util.Traversal` will be deprecated:DeprecationWarning'),
]

CKPT = os.path.join(_utils.FIXTURES, 'checkpoints')
EXPECTED = _utils.load_fixture('checkpoints', 'expected.msgpack')
NAMES = sorted(EXPECTED)
PLAIN = [n for n in NAMES if EXPECTED[n]['case']['kind'] == 'plain']
RUNS = [(n, m) for n in NAMES for m in specs.modes(EXPECTED[n]['case'])]
STEP = specs.STEPS_BEFORE


def _legacy_dir(name):
  return os.path.join(CKPT, 'legacy', name)


def _ours_dir(name):
  return os.path.join(CKPT, 'ours', name)


def _read(directory, step=STEP):
  with open(os.path.join(directory, f'checkpoint_{step}'), 'rb') as f:
    return f.read()


def _create(case):
  return specs.create(optim, case, jax=jax, freeze=freeze, struct=struct,
                      dynamic_scale_cls=dynamic_scale.DynamicScale)


def _run(obj, case, steps, jit=True):
  return specs.run(obj, case, steps, jax=jax, freeze=freeze,
                   to_state_dict=serialization.to_state_dict, jit=jit)


_TRAINED = {}


def _trained(name):
  """Our optimizer (or train state) of case ``name`` after the steps before the checkpoint.

  Cached: it is also the restore template of the continuation tests, so its optimizer def (and
  with it the compiled step) is shared and each case compiles once.
  """
  if name not in _TRAINED:
    case = EXPECTED[name]['case']
    _TRAINED[name], _ = _run(_create(case), case, specs.BEFORE)
  return _TRAINED[name]


@pytest.fixture(autouse=True)
def _msgpack_backend():
  """``save_checkpoint`` writes the legacy msgpack format (not an Orbax directory)."""
  previous = flax.config.flax_use_orbax_checkpointing
  flax.config.update('flax_use_orbax_checkpointing', False)
  yield
  flax.config.update('flax_use_orbax_checkpointing', previous)


# ----------------------------------------------------------------------------- assertions


def _assert_identical(actual, expected, path=''):
  """Same keys, same ``None``s, same shapes, dtypes and bits (state dicts)."""
  if isinstance(expected, dict):
    assert isinstance(actual, dict), f'{path}: {type(actual).__name__} instead of a dict'
    assert sorted(actual) == sorted(expected), f'{path}: {sorted(actual)} != {sorted(expected)}'
    for key in expected:
      _assert_identical(actual[key], expected[key], f'{path}/{key}')
    return
  if expected is None:
    assert actual is None, f'{path}: {actual!r} instead of None'
    return
  a, e = np.asarray(actual), np.asarray(expected)
  assert a.shape == e.shape and a.dtype == e.dtype, (
      f'{path}: {a.shape} {a.dtype} != {e.shape} {e.dtype}')
  assert a.tobytes() == e.tobytes(), f'{path}: values differ\n{a}\n{e}'


def _split_steps(state_dict):
  """(state dict without the optimizer step counters, [step counters])."""
  steps = []

  def strip(tree, parent=None):
    if not isinstance(tree, dict):
      return tree
    out = {}
    for key, value in tree.items():
      if key == 'step' and parent == 'state':
        steps.append(value)
      else:
        out[key] = strip(value, key)
    return out

  return strip(state_dict), steps


def _assert_trajectory(actual, expected, stats=None):
  """Per step: values within rtol 1e-5 with the same dtypes, step counters equal.

  Legacy quirk not reproduced: after restoring, an eager legacy step computes
  ``step + 1`` in NumPy and stores an ``int64`` scalar; ours stays an ``int32`` array.
  """
  assert len(actual) == len(expected)
  for i, (ours, theirs) in enumerate(zip(actual, expected)):
    ours, our_steps = _split_steps(ours)
    theirs, their_steps = _split_steps(theirs)
    try:
      _utils.assert_trees_close(ours, theirs, stats=stats)
    except AssertionError as e:
      raise AssertionError(f'continued step {i}: {e}') from None
    assert [int(s) for s in our_steps] == [int(s) for s in their_steps]
    for s in our_steps:
      assert np.asarray(s).dtype == np.int32, f'step dtype {np.asarray(s).dtype}'


def _optimizer_of(obj):
  return obj.optimizer if hasattr(obj, 'dynamic_scale') else obj


def _assert_restored_leaves(optimizer):
  """A msgpack restore hands back the file's arrays as legacy did, read-only NumPy arrays; a
  replicated optimizer's restore replicates them onto its devices (jax arrays)."""
  replicated = isinstance(optimizer.optimizer_def, optim.ReplicatedOptimizer)
  for path, leaf in jax.tree_util.tree_flatten_with_path(optimizer)[0]:
    where = jax.tree_util.keystr(path)
    if replicated:
      assert isinstance(leaf, jax.Array) and len(leaf.sharding.device_set) == specs.N_DEVICES, (
          f'{where}: {type(leaf)}')
    else:
      assert type(leaf) is np.ndarray, f'{where}: {type(leaf)}'
      assert not leaf.flags.writeable, f'{where} is writable'


# ----------------------------------------------------------------------------- legacy -> us


@pytest.mark.parametrize('name', NAMES)
def test_restore_checkpoint_of_legacy_file(name):
  """Today's ``restore_checkpoint(dir, target=...)`` gives exactly what legacy wrote."""
  case = EXPECTED[name]['case']
  template = _create(case)
  restored = checkpoints.restore_checkpoint(_legacy_dir(name), target=template)
  raw = serialization.msgpack_restore(_read(_legacy_dir(name)))
  _assert_identical(serialization.to_state_dict(restored), raw)
  assert jax.tree_util.tree_structure(restored) == jax.tree_util.tree_structure(template)
  _assert_restored_leaves(_optimizer_of(restored))
  assert _optimizer_of(restored).state.step.dtype == jnp.int32
  if case['kind'] == 'replicated':
    assert _optimizer_of(restored).state.step.shape == (specs.N_DEVICES,)


@pytest.mark.parametrize('name', NAMES)
def test_from_bytes_of_legacy_file(name):
  case = EXPECTED[name]['case']
  restored = serialization.from_bytes(_create(case), _read(_legacy_dir(name)))
  raw = serialization.msgpack_restore(_read(_legacy_dir(name)))
  _assert_identical(serialization.to_state_dict(restored), raw)
  _assert_restored_leaves(_optimizer_of(restored))


@pytest.mark.parametrize('name', NAMES)
def test_flat_restore_path_gives_what_the_full_check_gives(name, monkeypatch):
  """A file of exactly the template's layout takes the flat path (one pass over the leaves);
  it builds the very objects the full check builds: same tree structure, types and bits."""
  case = EXPECTED[name]['case']
  data = _read(_legacy_dir(name))
  template = _create(case)
  optimizer = _optimizer_of(template)
  if case['kind'] != 'replicated':  # replicated: the state dict is replicated first
    raw = serialization.msgpack_restore(data)
    raw = raw['optimizer'] if hasattr(template, 'dynamic_scale') else raw
    assert _restore._fast_restore(optimizer.target, optimizer.state, raw) is not None
  flat = serialization.from_bytes(template, data)
  monkeypatch.setattr(_restore, '_fast_restore', lambda *args: None)
  full = serialization.from_bytes(template, data)
  assert jax.tree_util.tree_structure(flat) == jax.tree_util.tree_structure(full)
  assert serialization.to_bytes(flat) == serialization.to_bytes(full)  # key orders too
  for a, b in zip(jax.tree_util.tree_leaves(flat), jax.tree_util.tree_leaves(full)):
    assert type(a) is type(b) and a.dtype == b.dtype and a.shape == b.shape
    assert getattr(a, 'flags', None) is None or a.flags.writeable == b.flags.writeable
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_restore_keeps_the_templates_key_order():
  """As legacy's ``from_state_dict``: dicts come back in the template's key order (which a
  later save writes), on the flat path too (jax itself rebuilds dicts with sorted keys)."""
  params = {'b': {'kernel': jnp.ones((2, 3)), 'bias': jnp.zeros(3)},
            'a': {'kernel': jnp.ones((3, 1)), 'bias': jnp.zeros(1)}}
  template = optim.Adam(0.1).create(params)
  data = serialization.to_bytes(template)
  restored = serialization.from_bytes(template, data)
  assert list(restored.target) == ['b', 'a'] and list(restored.target['b']) == ['kernel', 'bias']
  assert serialization.to_bytes(restored) == data


@pytest.mark.parametrize('name,mode', RUNS)
def test_continue_from_legacy_file_matches_legacy(name, mode):
  """legacy file -> us -> 3 more steps == legacy file -> legacy -> 3 more steps."""
  case = EXPECTED[name]['case']
  # Any optimizer of the same kind and structure is a valid template (only structure, shapes
  # and dtypes are used); this one shares its def, hence its compiled step, with other tests.
  restored = checkpoints.restore_checkpoint(_legacy_dir(name), target=_trained(name))
  _, ours = _run(restored, case, specs.AFTER, jit=mode == 'jit')
  _assert_trajectory(ours, EXPECTED[name]['continued'][mode])


def test_restore_legacy_file_with_int64_step():
  """A legacy file saved after eager steps stores ``step`` as a NumPy int64."""
  directory = _legacy_dir('Adam-after-eager-steps')
  raw = serialization.msgpack_restore(_read(directory, STEP + specs.STEPS_AFTER))
  assert np.asarray(raw['state']['step']).dtype == np.int64  # what legacy wrote
  case = EXPECTED['Adam']['case']
  restored = checkpoints.restore_checkpoint(directory, target=_create(case))
  assert restored.state.step.dtype == jnp.int32
  assert int(restored.state.step) == STEP + specs.STEPS_AFTER
  raw['state']['step'] = np.asarray(raw['state']['step'], np.int32)
  _assert_identical(serialization.to_state_dict(restored), raw)
  # ... and it is the state legacy reached after its eager continuation.
  _assert_trajectory([serialization.to_state_dict(restored)],
                     [EXPECTED['Adam']['continued']['eager'][-1]])


def test_int64_step_into_replicated_optimizer():
  directory = _legacy_dir('Adam-after-eager-steps')
  template = _create(dict(EXPECTED['Adam']['case'], kind='replicated'))
  restored = checkpoints.restore_checkpoint(directory, target=template)
  assert restored.state.step.dtype == jnp.int32
  np.testing.assert_array_equal(restored.state.step, [STEP + specs.STEPS_AFTER] * specs.N_DEVICES)


def test_python_scalar_leaves():
  """Legacy allowed ``{'w': 1.0}`` targets (GradientDescent, Momentum); after a step the file
  holds a float32 0-d array there, which restores into a fresh Python-float template."""
  template = optim.Momentum(learning_rate=0.1).create({'w': 1.0})
  assert serialization.from_bytes(template, serialization.to_bytes(template)).target == {'w': 1.0}
  stepped = template.apply_gradient({'w': jnp.float32(2.0)})
  restored = serialization.from_bytes(template, serialization.to_bytes(stepped))
  assert float(restored.target['w']) == pytest.approx(0.8)
  raw = serialization.to_state_dict(stepped)
  raw['target']['w'] = 'one'
  with pytest.raises(ValueError, match="'/target/w'"):
    serialization.from_state_dict(template, raw)


def test_bfloat16_leaves_keep_their_dtype():
  params = {'w': jnp.ones((2, 3), jnp.bfloat16)}
  template = optim.Adam(learning_rate=0.1).create(params)
  stepped = template.apply_gradient({'w': jnp.ones((2, 3), jnp.bfloat16)})
  restored = serialization.from_bytes(template, serialization.to_bytes(stepped))
  assert restored.target['w'].dtype == jnp.bfloat16
  assert restored.state.param_states['w'].grad_ema.dtype == jnp.bfloat16
  _assert_identical(serialization.to_state_dict(restored), serialization.to_state_dict(stepped))
  float32_file = serialization.to_bytes(optim.Adam(learning_rate=0.1).create(
      {'w': jnp.ones((2, 3), jnp.float32)}))
  with pytest.raises(ValueError, match=r"'/target/w'.*float32.*bfloat16"):
    serialization.from_bytes(template, float32_file)


# ----------------------------------------------------------------------------- us -> legacy


@pytest.mark.parametrize('name', NAMES)
def test_legacy_restores_our_file_and_continues_identically(name):
  """Recorded by the generator: legacy restored our file exactly and went on as from its own."""
  result = EXPECTED[name]['from_ours']
  assert result['status'] == 'written', result['status']
  ours = serialization.msgpack_restore(_read(_ours_dir(name)))
  _assert_identical(result['restored'], ours)
  _assert_identical(result['restored_from_bytes'], ours)
  _assert_trajectory(result['continued'], EXPECTED[name]['continued']['jit'])
  _assert_trajectory([result['continued_from_bytes_last']], EXPECTED[name]['continued']['jit'][-1:])


@pytest.mark.parametrize('name', NAMES)
def test_we_still_write_the_file_legacy_read(name, tmp_path):
  """Our committed file (the one legacy restored) is what this library writes today.

  Same layout, dtypes and key order; values within rtol (XLA may round differently over
  versions). ``save_checkpoint`` writes exactly ``to_bytes``.
  """
  obj = _trained(name)
  path = checkpoints.save_checkpoint(tmp_path, obj, STEP)
  with open(path, 'rb') as f:
    written = f.read()
  assert written == serialization.to_bytes(obj)
  now = serialization.msgpack_restore(written)
  committed = serialization.msgpack_restore(_read(_ours_dir(name)))
  _utils.assert_trees_close(now, committed)
  assert _key_order(now) == _key_order(committed)


def _key_order(tree):
  if isinstance(tree, dict):
    return [(k, _key_order(v)) for k, v in tree.items()]
  return None


@pytest.mark.parametrize('name', PLAIN)
def test_fresh_optimizer_serializes_like_legacy(name):
  """``to_bytes(opt_def.create(target))`` is byte-for-byte what legacy wrote.

  Except WeightNorm, whose state holds ``p / sqrt(sum(p**2) + eps)`` computed at creation
  (reductions may round differently, 1 ulp): same layout and key order, values within rtol.
  """
  case = EXPECTED[name]['case']
  ours = serialization.to_bytes(_create(case))
  theirs = EXPECTED[name]['created_bytes']
  if case['optimizer']['name'] != 'WeightNorm':
    assert ours == theirs
  else:
    ours, theirs = serialization.msgpack_restore(ours), serialization.msgpack_restore(theirs)
    assert _key_order(ours) == _key_order(theirs)
    _utils.assert_trees_close(ours, theirs)


# ----------------------------------------------------------------------------- the API


def test_state_dict_and_restore_state_api():
  case = EXPECTED['Adam']['case']
  optimizer = _trained('Adam')
  state_dict = optimizer.state_dict()
  assert list(state_dict) == ['target', 'state']
  assert list(state_dict['state']) == ['step', 'param_states']
  assert list(state_dict['state']['param_states']['dense']['kernel']) == ['grad_ema',
                                                                          'grad_sq_ema']
  definition = optimizer.optimizer_def
  _assert_identical(serialization.to_state_dict(state_dict),
                    serialization.to_state_dict(
                        definition.state_dict(optimizer.target, optimizer.state)))
  _assert_identical(serialization.to_state_dict(state_dict),
                    serialization.to_state_dict(serialization.to_state_dict(optimizer)))

  legacy = serialization.msgpack_restore(_read(_legacy_dir('Adam')))
  template = _create(case)
  restored = template.restore_state(legacy)
  assert isinstance(restored, optim.Optimizer)
  assert restored.optimizer_def is template.optimizer_def
  _assert_identical(serialization.to_state_dict(restored), legacy)
  target, state = definition.restore_state(template.target, template.state, legacy)
  assert isinstance(state, optim.OptimizerState)
  _assert_identical(serialization.to_state_dict(target), legacy['target'])
  _assert_identical(serialization.to_state_dict(state), legacy['state'])


def test_restored_leaves_are_read_only_numpy_and_train_eagerly_and_jitted():
  """As legacy: a file's leaves come back as read-only NumPy (no per-leaf device transfer at
  restore); in-place writes raise; the first step, eager or jitted, moves them to jax."""
  case = EXPECTED['Momentum']['case']
  data = _read(_legacy_dir('Momentum'))
  raw = serialization.msgpack_restore(data)
  restored = serialization.from_bytes(_create(case), data)
  kernel = restored.target['dense']['kernel']
  momentum = restored.state.param_states['dense']['kernel'].momentum
  assert type(kernel) is np.ndarray and type(momentum) is np.ndarray
  assert restored.state.step.dtype == np.int32 and restored.state.step.shape == ()
  with pytest.raises(ValueError, match='read-only'):
    kernel[0, 0] = 5.0
  with pytest.raises(ValueError, match='read-only'):
    momentum += 1.0
  _assert_identical(serialization.to_state_dict(restored), raw)  # nothing was written
  grads = jax.tree_util.tree_map(jnp.ones_like, restored.target)
  stepped = restored.apply_gradient(grads)
  jitted = jax.jit(lambda opt, g: opt.apply_gradient(g))(restored, grads)
  for out in (stepped, jitted):
    assert isinstance(out.target['dense']['kernel'], jax.Array)
    assert out.state.step.dtype == jnp.int32 and int(out.state.step) == STEP + 1
  _assert_identical(serialization.to_state_dict(stepped), serialization.to_state_dict(jitted))
  np.asarray(stepped.target['dense']['kernel']) + 1.0  # usable as plain arrays


def test_restored_leaves_place_where_the_caller_puts_them():
  """Nothing is committed to a device by the restore: the restored optimizer goes onto a mesh
  (replicated) and, after ``jax_utils.replicate``, into ``pmap``; both steps agree."""
  devices = jax.local_devices()[:2]
  if len(devices) < 2:
    pytest.skip('needs 2 devices (the suite simulates 8 CPU devices)')
  case = EXPECTED['Momentum']['case']
  restored = serialization.from_bytes(_create(case), _read(_legacy_dir('Momentum')))
  grads = jax.tree_util.tree_map(np.ones_like, restored.target)
  mesh = jax.sharding.Mesh(np.array(devices), ('data',))
  replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
  on_mesh = jax.device_put(restored, replicated)
  assert all(leaf.sharding == replicated for leaf in jax.tree_util.tree_leaves(on_mesh))
  meshed = jax.jit(lambda opt, g: opt.apply_gradient(g))(on_mesh, grads)
  pmapped = jax.pmap(lambda opt, g: opt.apply_gradient(g), devices=devices)(
      jax_utils.replicate(restored, devices), jax_utils.replicate(grads, devices))
  _assert_identical(serialization.to_state_dict(jax_utils.unreplicate(pmapped)),
                    serialization.to_state_dict(meshed))


def test_in_memory_restore_keeps_callers_arrays_and_flags():
  """``restore_state`` of a state dict held in memory: jax leaves as they are, and a caller's
  writable NumPy array is handed back as a read-only view (the caller's flags unchanged)."""
  case = EXPECTED['Momentum']['case']
  raw = serialization.msgpack_restore(_read(_legacy_dir('Momentum')))
  writable = jax.tree_util.tree_map(np.array, raw)
  as_jax = jax.tree_util.tree_map(jnp.asarray, raw)
  from_numpy = _create(case).restore_state(writable)
  from_jax = _create(case).restore_state(as_jax)
  kernel = from_numpy.target['dense']['kernel']
  assert type(kernel) is np.ndarray and not kernel.flags.writeable
  assert writable['target']['dense']['kernel'].flags.writeable
  assert from_jax.target['dense']['kernel'] is as_jax['target']['dense']['kernel']


def test_replicated_checkpoint_restores_unreplicated():
  """A replicated optimizer's file holds one copy: it restores into a plain optimizer too."""
  case = dict(EXPECTED['Replicated-Adam']['case'], kind='plain')
  restored = checkpoints.restore_checkpoint(_legacy_dir('Replicated-Adam'), target=_create(case))
  raw = serialization.msgpack_restore(_read(_legacy_dir('Replicated-Adam')))
  _assert_identical(serialization.to_state_dict(restored), raw)
  assert restored.state.step.shape == ()


def test_orbax_backend_round_trip(tmp_path):
  """Modern default (Orbax directory): restores through the same strict path, into our types."""
  case = EXPECTED['MultiOptimizer']['case']
  optimizer = _trained('MultiOptimizer')
  flax.config.update('flax_use_orbax_checkpointing', True)
  checkpoints.save_checkpoint(tmp_path, optimizer, STEP)
  restored = checkpoints.restore_checkpoint(tmp_path, target=_create(case))
  _assert_identical(serialization.to_state_dict(restored), serialization.to_state_dict(optimizer))
  assert restored.state.param_states['scale'] is None


# ----------------------------------------------------------------------------- bad files


def _legacy_raw(name):
  return serialization.msgpack_restore(_read(_legacy_dir(name)))


def _restore_error(template, state_dict):
  with pytest.raises(ValueError) as info:
    serialization.from_state_dict(template, state_dict)
  return str(info.value)


def test_shape_mismatch_names_path_and_both_shapes():
  raw = _legacy_raw('Adam')
  raw['state']['param_states']['dense']['kernel']['grad_ema'] = np.zeros((4, 3), np.float32)
  template = _create(EXPECTED['Adam']['case'])
  message = _restore_error(template, raw)
  assert "'/state/param_states/dense/kernel/grad_ema'" in message
  assert '(4, 3)' in message and '(3, 4)' in message
  assert 'Nothing was restored' in message


def test_target_shape_mismatch_via_restore_checkpoint(tmp_path):
  raw = _legacy_raw('Momentum')
  raw['target']['dense']['bias'] = np.zeros((5,), np.float32)
  with open(tmp_path / 'checkpoint_3', 'wb') as f:
    f.write(serialization.msgpack_serialize(raw))
  template = _create(EXPECTED['Momentum']['case'])
  with pytest.raises(ValueError, match=r"'/target/dense/bias'.*\(5,\).*\(4,\)"):
    checkpoints.restore_checkpoint(tmp_path, target=template)


def test_dtype_mismatch_names_path_and_both_dtypes():
  raw = _legacy_raw('Adam')
  raw['target']['conv']['kernel'] = raw['target']['conv']['kernel'].astype(np.float64)
  message = _restore_error(_create(EXPECTED['Adam']['case']), raw)
  assert "'/target/conv/kernel'" in message
  assert 'float64' in message and 'float32' in message


def test_missing_and_extra_keys_name_the_path():
  template = _create(EXPECTED['Adam']['case'])
  raw = _legacy_raw('Adam')
  del raw['target']['dense']['bias']
  message = _restore_error(template, raw)
  assert "'/target/dense'" in message and "missing ['bias']" in message
  raw = _legacy_raw('Adam')
  raw['state']['param_states']['conv']['extra'] = np.zeros(3, np.float32)
  message = _restore_error(template, raw)
  assert "'/state/param_states/conv'" in message and "unexpected ['extra']" in message
  raw = _legacy_raw('Adam')
  raw['unexpected_top_level'] = 1
  assert "unexpected ['unexpected_top_level']" in _restore_error(template, raw)


def test_none_and_array_slots_must_match():
  """MultiOptimizer: a `None` (unoptimized leaf) state is not an array state, and vice versa."""
  template = _create(EXPECTED['MultiOptimizer']['case'])
  raw = _legacy_raw('MultiOptimizer')
  assert raw['state']['param_states']['scale'] is None
  raw['state']['param_states']['scale'] = {'momentum': np.zeros((), np.float32)}
  message = _restore_error(template, raw)
  assert "'/state/param_states/scale'" in message and 'expects None' in message
  raw = _legacy_raw('MultiOptimizer')
  raw['state']['param_states']['dense']['bias']['momentum'] = None
  message = _restore_error(template, raw)
  assert "'/state/param_states/dense/bias/momentum'" in message and 'has None' in message


@pytest.mark.parametrize('written_by,restored_into,looks_like', [
    ('Momentum', 'Adam', 'Momentum or LARS'),
    ('Adam', 'Momentum', 'Adam, AdaBelief or LAMB'),
    ('GradientDescent', 'Adam', 'GradientDescent'),
    ('Adafactor', 'Adagrad', 'Adafactor'),
    ('RMSProp', 'Adadelta', 'RMSProp'),
    ('WeightNorm-Momentum', 'WeightNorm-Adam', 'WeightNorm(Momentum or LARS)'),
    ('MultiOptimizer', 'Adam', 'MultiOptimizer'),
])
def test_file_of_another_optimizer_says_which(written_by, restored_into, looks_like):
  """Real legacy files restored into the wrong optimizer: the error names both."""
  template = _create(EXPECTED[restored_into]['case'])
  with pytest.raises(ValueError) as info:
    checkpoints.restore_checkpoint(_legacy_dir(written_by), target=template)
  message = str(info.value)
  assert "at '/state/param_states/" in message
  assert f'looks like it was written by {looks_like}' in message
  assert f'into {restored_into.replace("-", "(")}' in message


def test_pre_0_4_weight_norm_layout_is_recognised():
  template = _create(EXPECTED['WeightNorm-Momentum']['case'])
  raw = _legacy_raw('WeightNorm-Momentum')

  def old_layout(leaf):
    return {'direction_state': leaf['direction_state'], 'scale_state': leaf['scale_state'],
            'mult': np.ones((4,), np.float32)}

  for group in raw['state']['param_states'].values():
    for key in group:
      group[key] = old_layout(group[key])
  message = _restore_error(template, raw)
  assert 'WeightNorm from flax < 0.4.0' in message


def test_older_legacy_layouts_are_recognised():
  """flax <= 0.2.2 RMSProp (no `mg`) and flax < 0.3.3 MultiOptimizer (a state per group)."""
  template = _create(EXPECTED['RMSProp']['case'])
  raw = _legacy_raw('RMSProp')
  def drop_mg(tree):
    if isinstance(tree, dict) and set(tree) == {'v', 'mg'}:
      return {'v': tree['v']}
    return {k: drop_mg(v) for k, v in tree.items()} if isinstance(tree, dict) else tree
  raw['state']['param_states'] = drop_mg(raw['state']['param_states'])
  message = _restore_error(template, raw)
  assert "missing ['mg']" in message and 'RMSProp from flax <= 0.2.2' in message

  template = _create(EXPECTED['MultiOptimizer']['case'])
  raw = _legacy_raw('MultiOptimizer')
  raw['state'] = {'0': {'step': raw['state']['step'], 'param_states': {}},
                  '1': {'step': raw['state']['step'], 'param_states': {}}}
  message = _restore_error(template, raw)
  assert "at '/state'" in message and 'MultiOptimizer layout of flax < 0.3.3' in message


def test_error_inside_train_state_names_the_full_path():
  case = EXPECTED['TrainState-Adam']['case']
  raw = _legacy_raw('TrainState-Adam')
  raw['optimizer']['state']['param_states']['dense']['bias']['grad_sq_ema'] = np.zeros(
      (2,), np.float32)
  template = _create(case)
  message = _restore_error(template, raw)
  assert "'/optimizer/state/param_states/dense/bias/grad_sq_ema'" in message


def test_replicated_template_reports_single_copy_shapes():
  template = _create(EXPECTED['Replicated-Momentum']['case'])
  raw = _legacy_raw('Replicated-Momentum')
  raw['target']['dense']['kernel'] = np.zeros((4, 3), np.float32)
  message = _restore_error(template, raw)
  assert "'/target/dense/kernel'" in message and '(4, 3)' in message and '(3, 4)' in message
  assert f'({specs.N_DEVICES}, 3, 4)' not in message


def test_step_must_be_an_integer_that_fits_int32():
  template = _create(EXPECTED['Adam']['case'])
  raw = _legacy_raw('Adam')
  raw['state']['step'] = np.asarray(3.0, np.float32)
  assert "'/state/step'" in _restore_error(template, raw)
  raw['state']['step'] = np.int64(2 ** 40)
  assert 'does not fit in int32' in _restore_error(template, raw)
  raw['state']['step'] = 2 ** 40
  assert 'does not fit in int32' in _restore_error(template, raw)
  raw['state']['step'] = 3  # flax <= 0.2.2 started from a Python int
  restored = serialization.from_state_dict(template, raw)
  assert restored.state.step.dtype == jnp.int32 and int(restored.state.step) == 3


@pytest.mark.parametrize('cut', [0, 1, 100, -1])
def test_truncated_file_raises(cut, tmp_path):
  data = _read(_legacy_dir('Adam'))
  with open(tmp_path / 'checkpoint_3', 'wb') as f:
    f.write(data[:cut])
  template = _create(EXPECTED['Adam']['case'])
  # msgpack's own errors (flax decodes the file before any optimizer code runs), e.g.
  # 'Unpack failed: incomplete input'.
  with pytest.raises(ValueError):
    checkpoints.restore_checkpoint(tmp_path, target=template)
  with pytest.raises(ValueError):
    serialization.from_bytes(template, data[:cut])


def test_corrupt_leaf_names_the_path():
  """A file whose leaf decodes to something that is not an array (here a string)."""
  raw = _legacy_raw('Adam')
  raw['state']['param_states']['scale']['grad_ema'] = 'garbage'
  data = serialization.msgpack_serialize(raw)
  template = _create(EXPECTED['Adam']['case'])
  with pytest.raises(ValueError, match=r"'/state/param_states/scale/grad_ema'.*str"):
    serialization.from_bytes(template, data)


def test_nothing_is_half_restored():
  """A train state whose optimizer is bad restores nothing, not the other fields."""
  case = EXPECTED['TrainState-Adam']['case']
  template = _create(case)
  before = serialization.to_state_dict(template)
  raw = _legacy_raw('TrainState-Adam')
  raw['optimizer']['target']['dense']['kernel'] = np.zeros((3, 5), np.float32)
  with pytest.raises(ValueError):
    serialization.from_state_dict(template, raw)
  _assert_identical(serialization.to_state_dict(template), before)
