"""Strict restore on every checkpoint path, dtype casts of state leaves, bad checkpoint values.

Paths: ``flax.serialization.from_bytes`` / ``from_state_dict``, ``Optimizer.restore_state``,
``flax.training.checkpoints.restore_checkpoint`` of a msgpack file and of an orbax directory
(today's default), with and without a target, replicated or not. The same bad checkpoint gets
the same message on each, and nothing (optimizer, files) changes.

Legacy flax 0.5.3, measured in the oracle venv: a float32 Momentum checkpoint restored into an
optimizer whose momentum is bfloat16 came back as float32 arrays (no cast, no error); an int64
momentum and a step of -3 restored as they were (the next Adam step is then NaN); a DynamicScale
with a (3,) scale restored and failed at the next step. Expected values here are hand math.
"""
import functools
import hashlib
import os

import flax
import jax
import jax.numpy as jnp
import msgpack
import numpy as np
import pytest
from flax import serialization
from flax import struct
from flax.training import checkpoints

import flax_optim_compat as optim
from flax_optim_compat import _restore
from flax_optim_compat.dynamic_scale import DynamicScale

# flax warns on its msgpack backend; orbax warns when restoring without a target (it reads the
# saved sharding), which is the raw-tree path tested here.
pytestmark = [
    pytest.mark.filterwarnings(
        'ignore:Flax Checkpointing will soon be deprecated:DeprecationWarning'),
    pytest.mark.filterwarnings('ignore:Sharding info not provided when restoring:UserWarning'),
]

PARAMS = {'dense': {'kernel': jnp.arange(6.0).reshape(2, 3), 'bias': jnp.ones(3)}}
GRADS = jax.tree_util.tree_map(lambda p: 0.5 * p + 1.0, PARAMS)


@struct.dataclass
class _TrainState:
  step: int
  optimizer: optim.Optimizer
  dynamic_scale: DynamicScale


def _trained(opt_def, params=PARAMS):
  return opt_def.create(params).apply_gradient(GRADS)


@pytest.fixture(params=['orbax', 'msgpack'])
def backend(request):
  previous = flax.config.flax_use_orbax_checkpointing
  flax.config.update('flax_use_orbax_checkpointing', request.param == 'orbax')
  yield request.param
  flax.config.update('flax_use_orbax_checkpointing', previous)


def _snapshot(directory):
  """{relative path: sha256} of every file under ``directory``."""
  out = {}
  for root, _, files in os.walk(directory):
    for name in files:
      full = os.path.join(root, name)
      with open(full, 'rb') as f:
        out[os.path.relpath(full, directory)] = hashlib.sha256(f.read()).hexdigest()
  return out


def _restore_error(directory, template):
  before = _snapshot(directory)
  with pytest.raises(ValueError) as info:
    checkpoints.restore_checkpoint(directory, template)
  assert _snapshot(directory) == before
  return str(info.value)


def _from_state_dict_error(template, state_dict):
  with pytest.raises(ValueError) as info:
    serialization.from_state_dict(template, state_dict)
  return str(info.value)


# ----------------------------------------------------------------------------- every path


@pytest.mark.parametrize('into', [optim.Momentum(0.1), optim.GradientDescent(0.1)],
                         ids=['Momentum', 'GradientDescent'])
def test_other_optimizer_refused_on_every_path(backend, into, tmp_path):
  """An Adam checkpoint into Momentum/GradientDescent: orbax used to restore zeros silently."""
  checkpoints.save_checkpoint(tmp_path, _trained(optim.Adam(0.1)), 1)
  template = into.create(PARAMS)
  message = _restore_error(tmp_path, template)
  assert "'/state/param_states/dense/bias'" in message
  assert 'looks like it was written by Adam' in message and 'Nothing was restored' in message
  # Without a target the raw tree comes back; restoring it is the same check, same message.
  raw = checkpoints.restore_checkpoint(tmp_path, None)
  assert _from_state_dict_error(template, raw) == message
  with pytest.raises(ValueError) as info:
    template.restore_state(raw)
  assert str(info.value) == message
  with pytest.raises(ValueError) as info:
    serialization.from_bytes(template, serialization.to_bytes(_trained(optim.Adam(0.1))))
  assert str(info.value) == message


# flax has no public way to say a restore runs inside its restore_checkpoint of an orbax
# directory: _restore reads these locals of that function's frame (a documented limit).
def test_flax_restore_checkpoint_still_has_the_locals_the_orbax_check_reads():
  names = _restore.local_names(checkpoints.restore_checkpoint.__code__)
  missing = [n for n in _restore.FLAX_RESTORE_LOCALS if n not in names]
  assert not missing, (f'flax {flax.__version__} renamed {missing} in restore_checkpoint: the '
                       'strict check of the tree orbax wrote is off; update '
                       '_restore.FLAX_RESTORE_LOCALS (and _orbax_restore_in_progress)')


def test_a_flax_without_those_locals_warns_once_and_checks_the_values(monkeypatch):
  template = optim.Adam(0.1).create(PARAMS)
  raw = serialization.to_state_dict(_trained(optim.Adam(0.1)))

  def restore_checkpoint(ckpt_dir, target):  # a flax whose function has other local names
    del ckpt_dir
    restored_tree = raw
    return serialization.from_state_dict(target, restored_tree)

  monkeypatch.setattr(checkpoints, 'restore_checkpoint', restore_checkpoint)
  monkeypatch.setattr(_restore, '_warned_about_flax', [])
  with pytest.warns(RuntimeWarning, match=r"cannot tell whether .* \['is_orbax', "
                    r"'orbax_checkpointer', 'ckpt_path'\] are gone.*not the tree orbax wrote"):
    restored = checkpoints.restore_checkpoint('dir', template)
  np.testing.assert_array_equal(restored.state.step, 1)
  restored = checkpoints.restore_checkpoint('dir', template)  # said once per process
  with pytest.raises(ValueError, match='looks like it was written by Adam'):
    checkpoints.restore_checkpoint('dir', optim.Momentum(0.1).create(PARAMS))  # values checked


def test_orbax_and_msgpack_give_the_same_message(tmp_path):
  messages = {}
  for backend in ('orbax', 'msgpack'):
    flax.config.update('flax_use_orbax_checkpointing', backend == 'orbax')
    try:
      checkpoints.save_checkpoint(tmp_path / backend, _trained(optim.Adam(0.1)), 1)
    finally:
      flax.config.update('flax_use_orbax_checkpointing', True)
    messages[backend] = _restore_error(tmp_path / backend, optim.Momentum(0.1).create(PARAMS))
  assert messages['orbax'] == messages['msgpack']


def test_extra_target_param_refused(backend, tmp_path):
  """The template has a param the file lacks: orbax used to keep the template's value."""
  checkpoints.save_checkpoint(tmp_path, _trained(optim.Adam(0.1)), 1)
  params = {'dense': dict(PARAMS['dense'], extra=jnp.zeros(2))}
  message = _restore_error(tmp_path, optim.Adam(0.1).create(params))
  assert "'/target/dense'" in message and "missing ['extra']" in message


def test_target_dtype_change_refused(backend, tmp_path):
  """float32 params into a bfloat16 target: orbax used to cast silently; params keep dtypes."""
  checkpoints.save_checkpoint(tmp_path, _trained(optim.Momentum(0.1)), 1)
  params = jax.tree_util.tree_map(lambda p: p.astype(jnp.bfloat16), PARAMS)
  message = _restore_error(tmp_path, optim.Momentum(0.1).create(params))
  assert "'/target/dense/bias'" in message
  assert 'float32' in message and 'bfloat16' in message


def test_error_inside_train_state_names_the_full_path(backend, tmp_path):
  state = _TrainState(1, _trained(optim.Adam(0.1)), DynamicScale())
  checkpoints.save_checkpoint(tmp_path, state, 1)
  template = _TrainState(0, optim.Momentum(0.1).create(PARAMS), DynamicScale())
  message = _restore_error(tmp_path, template)
  assert "'/optimizer/state/param_states/dense/bias'" in message


def test_good_checkpoints_still_restore(backend, tmp_path):
  optimizer = _trained(optim.Adam(0.1))
  state = _TrainState(1, optimizer, DynamicScale(fin_steps=jnp.asarray(3), scale=jnp.asarray(8.)))
  checkpoints.save_checkpoint(tmp_path, state, 1)
  template = _TrainState(0, optim.Adam(0.1).create(PARAMS), DynamicScale())
  restored = checkpoints.restore_checkpoint(tmp_path, template)
  for got, want in zip(jax.tree_util.tree_leaves(restored), jax.tree_util.tree_leaves(state)):
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
  step = restored.optimizer.state.step
  # msgpack: the file's arrays as read-only NumPy (legacy); orbax: the jax arrays orbax makes
  assert isinstance(step, np.ndarray if backend == 'msgpack' else jax.Array)
  assert step.dtype == np.int32 and step.shape == ()
  assert int(restored.dynamic_scale.fin_steps) == 3 and float(restored.dynamic_scale.scale) == 8.


def test_replicated_optimizer_refused(backend, tmp_path):
  devices = jax.local_devices()[:2]
  if len(devices) < 2:
    pytest.skip('needs 2 devices (the suite simulates 8 CPU devices)')
  checkpoints.save_checkpoint(tmp_path, _trained(optim.Adam(0.1)).replicate(devices), 1)
  template = optim.Momentum(0.1).create(PARAMS).replicate(devices)
  message = _restore_error(tmp_path, template)
  assert "'/state/param_states/dense/bias'" in message
  assert 'looks like it was written by Adam' in message
  good = checkpoints.restore_checkpoint(tmp_path, optim.Adam(0.1).create(PARAMS).replicate(
      devices))
  np.testing.assert_array_equal(good.unreplicate().state.param_states['dense']['bias'].grad_ema,
                                _trained(optim.Adam(0.1)).state.param_states['dense'][
                                    'bias'].grad_ema)


# ----------------------------------------------------------------------------- dtype casts


def _bfloat16_state_template(opt_def):
  template = opt_def.create(PARAMS)
  param_states = jax.tree_util.tree_map(lambda x: x.astype(jnp.bfloat16),
                                        template.state.param_states)
  return template.replace(state=template.state.replace(param_states=param_states))


def test_float_state_leaf_restores_with_a_cast(backend, tmp_path):
  """A float32 momentum checkpoint into a bfloat16 momentum state: cast to the template's."""
  saved = _trained(optim.Momentum(0.1, beta=0.9))
  checkpoints.save_checkpoint(tmp_path, saved, 1)
  template = _bfloat16_state_template(optim.Momentum(0.1, beta=0.9))
  for restored in (checkpoints.restore_checkpoint(tmp_path, template),
                   serialization.from_bytes(template, serialization.to_bytes(saved))):
    for name in ('kernel', 'bias'):
      got = restored.state.param_states['dense'][name].momentum
      want = np.asarray(saved.state.param_states['dense'][name].momentum).astype(jnp.bfloat16)
      assert got.dtype == jnp.bfloat16
      np.testing.assert_array_equal(np.asarray(got), want)
      assert restored.target['dense'][name].dtype == jnp.float32  # params untouched
    restored.apply_gradient(GRADS)  # and it trains on


def test_float_state_leaf_cast_into_a_replicated_optimizer(backend, tmp_path):
  devices = jax.local_devices()[:2]
  if len(devices) < 2:
    pytest.skip('needs 2 devices (the suite simulates 8 CPU devices)')
  saved = _trained(optim.Momentum(0.1, beta=0.9))
  template = _bfloat16_state_template(optim.Momentum(0.1, beta=0.9)).replicate(devices)
  checkpoints.save_checkpoint(tmp_path, saved.replicate(devices), 1)
  for restored in (checkpoints.restore_checkpoint(tmp_path, template),
                   serialization.from_bytes(template, serialization.to_bytes(saved))):
    got = restored.state.param_states['dense']['kernel'].momentum
    assert got.dtype == jnp.bfloat16 and got.shape == (2, 2, 3)
    want = np.asarray(saved.state.param_states['dense']['kernel'].momentum).astype(jnp.bfloat16)
    np.testing.assert_array_equal(np.asarray(got[1]), want)


@pytest.mark.parametrize('bad_dtype', [np.int32, np.bool_, np.complex64])
def test_non_float_state_dtype_change_refused(bad_dtype):
  raw = serialization.to_state_dict(_trained(optim.Momentum(0.1)))
  raw['state']['param_states']['dense']['bias']['momentum'] = np.zeros(3, bad_dtype)
  message = _from_state_dict_error(optim.Momentum(0.1).create(PARAMS), raw)
  assert "'/state/param_states/dense/bias/momentum'" in message
  assert np.dtype(bad_dtype).name in message and 'float32' in message


def test_float_state_leaf_of_another_shape_refused():
  raw = serialization.to_state_dict(_trained(optim.Momentum(0.1)))
  raw['state']['param_states']['dense']['bias']['momentum'] = np.zeros(4, np.float16)
  message = _from_state_dict_error(_bfloat16_state_template(optim.Momentum(0.1)), raw)
  assert "'/state/param_states/dense/bias/momentum'" in message and '(4,)' in message


# ----------------------------------------------------------------------------- bad values


@pytest.mark.parametrize('step', [np.int32(-3), np.int64(-1), -2])
def test_negative_step_refused(step, tmp_path):
  raw = serialization.to_state_dict(_trained(optim.Adam(0.1)))
  raw['state']['step'] = step
  template = optim.Adam(0.1).create(PARAMS)
  message = _from_state_dict_error(template, raw)
  assert "'/state/step'" in message and 'negative' in message
  data = serialization.msgpack_serialize(raw)
  with pytest.raises(ValueError, match="'/state/step'.*negative"):
    serialization.from_bytes(template, data)
  with open(tmp_path / 'checkpoint_1', 'wb') as f:
    f.write(data)
  assert _restore_error(tmp_path, template) == message


def test_zero_step_still_restores():
  raw = serialization.to_state_dict(optim.Adam(0.1).create(PARAMS))
  restored = serialization.from_state_dict(optim.Adam(0.1).create(PARAMS), raw)
  assert int(restored.state.step) == 0


@pytest.mark.parametrize('field,value,says', [
    ('scale', np.full(3, 2.0, np.float32), 'shape (3,)'),
    ('scale', 'big', 'real number'),
    ('fin_steps', '7', 'non-negative integer'),
    ('fin_steps', 2.5, 'non-negative integer'),
    ('fin_steps', np.int32(-1), 'non-negative integer'),
])
def test_dynamic_scale_bad_field_refused(field, value, says):
  state = _TrainState(1, _trained(optim.Adam(0.1)), DynamicScale())
  raw = serialization.to_state_dict(state)
  raw['dynamic_scale'][field] = value
  template = _TrainState(0, optim.Adam(0.1).create(PARAMS), DynamicScale())
  with pytest.raises(ValueError) as info:
    serialization.from_bytes(template, serialization.msgpack_serialize(raw))
  assert f"'/dynamic_scale/{field}'" in str(info.value) and says in str(info.value)


def test_dynamic_scale_keys_and_replicated_shapes():
  with pytest.raises(ValueError, match='Missing field fin_steps in state dict'):
    serialization.from_state_dict(DynamicScale(), {'scale': 1.0})
  with pytest.raises(ValueError, match='Unknown field.*"extra"'):
    serialization.from_state_dict(DynamicScale(), {'scale': 1.0, 'fin_steps': 0, 'extra': 1})
  with pytest.raises(ValueError, match="at '/' the checkpoint has a str"):
    serialization.from_state_dict(DynamicScale(), 'scale')
  replicated = DynamicScale(fin_steps=jnp.zeros(2, jnp.int32), scale=jnp.ones(2))
  restored = serialization.from_state_dict(
      replicated, {'fin_steps': np.array([3, 3]), 'scale': np.array([4.0, 4.0], np.float32)})
  assert restored.fin_steps.tolist() == [3, 3]
  with pytest.raises(ValueError, match=r"'/scale'.*shape \(2,\)"):
    serialization.from_state_dict(replicated, {'fin_steps': np.array([3, 3]), 'scale': 4.0})


def test_unknown_msgpack_extension_leaf_is_named():
  raw = serialization.to_state_dict(_trained(optim.Adam(0.1)))
  raw['state']['param_states']['dense']['bias']['grad_ema'] = msgpack.ExtType(42, b'\x00\x01')
  data = serialization.msgpack_serialize(raw)
  with pytest.raises(ValueError, match=r"'/state/param_states/dense/bias/grad_ema' not a "
                                       r'valid legacy checkpoint \(.*ExtType'):
    serialization.from_bytes(optim.Adam(0.1).create(PARAMS), data)


def test_restore_state_refuses_bytes():
  optimizer = _trained(optim.Adam(0.1))
  with pytest.raises(TypeError, match='takes a state dict, not msgpack bytes'):
    optimizer.restore_state(serialization.to_bytes(optimizer))


def test_the_orbax_check_works_however_restore_checkpoint_is_reached(tmp_path):
  """Nothing of flax is replaced (the check reads the frame of flax's own function), so a
  reference held from before the package was imported, or a partial, is checked as well."""
  assert checkpoints.restore_checkpoint.__module__ == 'flax.training.checkpoints'
  assert checkpoints.restore_checkpoint.__code__.co_filename == checkpoints.__file__
  previous = flax.config.flax_use_orbax_checkpointing
  flax.config.update('flax_use_orbax_checkpointing', True)
  try:
    checkpoints.save_checkpoint(tmp_path, _trained(optim.Adam(0.1)), 1)
  finally:
    flax.config.update('flax_use_orbax_checkpointing', previous)
  assert (tmp_path / 'checkpoint_1').is_dir()  # an orbax directory
  params = {'dense': dict(PARAMS['dense'], extra=jnp.zeros(2))}
  restore = functools.partial(checkpoints.restore_checkpoint, tmp_path)
  with pytest.raises(ValueError, match=r"'/target/dense'.*missing \['extra'\]"):
    restore(optim.Adam(0.1).create(params))
