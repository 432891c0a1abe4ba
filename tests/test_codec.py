"""The checkpoint wing's msgpack codec: decodes like flax, refuses bad bytes naming the source."""
import io

import jax
import numpy as np
import pytest
from flax import serialization

import flax_optim_compat as optim
from flax_optim_compat import _codec


def _adam_bytes():
  opt = optim.Adam(0.1).create({'w': np.ones((2, 3), np.float32), 'b': np.zeros(3, np.float32)})
  return serialization.to_bytes(opt.apply_gradient({'w': np.ones((2, 3), np.float32),
                                                    'b': np.ones(3, np.float32)}))


@pytest.mark.parametrize('data,detail', [
    (b'', 'is empty'),
    (b'\x82\xa1a', 'is truncated'),
    (b'\xc1', 'byte 0xc1 at offset 0 starts no msgpack object'),
    (bytearray(b'\x81\xa1a\x01\x02'), 'data continues after the first object'),
])
def test_decode_bytes_names_the_source(data, detail):
  with pytest.raises(_codec.CheckpointError) as info:
    _codec.decode_bytes(data, "'ckpt/checkpoint_3'")
  message = str(info.value)
  assert message.startswith("'ckpt/checkpoint_3' ")
  assert detail in message


def test_decode_bytes_decodes_like_flax():
  data = _adam_bytes()
  got = _codec.decode_bytes(memoryview(data))
  want = serialization.msgpack_restore(data)
  assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(want)
  for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
    assert type(a) is type(b) and np.asarray(a).dtype == np.asarray(b).dtype
    np.testing.assert_array_equal(a, b)
  with pytest.raises(_codec.CheckpointError, match=r'the bytes is not msgpack bytes'):
    _codec.decode_bytes({'target': 1})


def test_encode_writes_flax_bytes():
  tree = serialization.msgpack_restore(_adam_bytes())
  f = io.BytesIO()
  _codec.encode(f, tree)
  assert f.getvalue() == serialization.msgpack_serialize(tree)
