"""The helpers' one-place rules: a value in words, what an array leaf is, an empty container."""
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import serialization

import flax_optim_compat as optim
from flax_optim_compat import _state_check
from flax_optim_compat._checkpoint import _codec
from flax_optim_compat._checkpoint import _state_dict


def _momentum():  # a name for the callable case
  return None


@pytest.mark.parametrize('value, words', [
    (None, 'None'),
    ({'b': 1, 'a': 2}, "a dict with keys ['a', 'b']"),
    (np.zeros((3,), np.float32), 'an array of shape (3,) and dtype float32'),
    (jnp.zeros((2, 1), jnp.bfloat16), 'an array of shape (2, 1) and dtype bfloat16'),
    (np.int32(7), 'an array of shape () and dtype int32'),
    (jax.ShapeDtypeStruct((), np.int32),
     'a jax.ShapeDtypeStruct of shape () and dtype int32 (no values)'),
    (0.1, 'a Python float (0.1)'),
    (True, 'a Python bool (True)'),
    ('0.1', "a str ('0.1')"),
    ('x' * 41, 'a str of 41 characters'),
    (_momentum, 'the callable _momentum'),
    (optim.Momentum, 'the class Momentum'),
    (optim.Momentum(0.1), 'a Momentum'),
    ([1, 2], 'a list'),
])
def test_describe_value(value, words):
  assert _state_check.describe_value(value) == words


def test_hyper_params_and_checkpoint_messages_use_the_same_words():
  with pytest.raises(ValueError, match=r'must be a scalar, got an array of shape \(4,\) and '
                                       r'dtype float32\.'):
    optim.Momentum(np.ones(4, np.float32)).create({'w': jnp.ones(2)}).apply_gradient(
        {'w': jnp.ones(2)})
  with pytest.raises(_codec.CheckpointError, match=r'the step must be an integer, not a '
                                                   r"str \('3'\)\."):
    _state_dict.check_step('3', 'f.msgpack')


def test_is_array_contract():
  """A ``jax.ShapeDtypeStruct`` is an array leaf of a template (shape and dtype), never a leaf
  of a file's data: the checkpoint tool's value checks refuse it, by name."""
  abstract = jax.ShapeDtypeStruct((2,), np.float32)
  for array in (np.zeros(2), np.float32(1), jnp.zeros(2)):
    assert _state_check.is_array(array) and _state_check.is_array(array, with_values=True)
  assert _state_check.is_array(abstract)
  assert not _state_check.is_array(abstract, with_values=True)
  for other in (1.0, [1.0], None, {}):
    assert not _state_check.is_array(other)
  # The template side: an abstract template checks a file's arrays.
  values = _state_check.check({'w': abstract}, {'w': np.ones(2, np.float32)})
  np.testing.assert_array_equal(values['w'], [1.0, 1.0])
  # The data side: no values where values are needed.
  with pytest.raises(_codec.CheckpointError,
                     match=r'f: the step must be an integer, not a jax.ShapeDtypeStruct'):
    _state_dict.check_step(jax.ShapeDtypeStruct((), np.int32), 'f')
  with pytest.raises(_codec.CheckpointError,
                     match=r'f: the leaf at /w is a jax.ShapeDtypeStruct of shape \(2,\)'):
    _state_dict.check_arrays({'w': abstract}, (), 'f')


def test_is_empty_is_the_one_empty_container_rule():
  empty_state = serialization.to_state_dict(optax.EmptyState())
  for node in (None, {}, (), [], empty_state):
    assert _state_check.is_empty(node), node
  for node in ({'a': None}, (None,), 0, np.zeros(0), ''):
    assert not _state_check.is_empty(node), node
  # check(orbax=True) applies it: orbax reads an empty container back as None.
  assert _state_check.check({'s': {}}, {'s': None}, orbax=True) == {'s': {}}
  with pytest.raises(_state_check.Mismatch):
    _state_check.check({'s': {}}, {'s': None})
