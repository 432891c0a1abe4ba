"""The checkpoint wing's msgpack codec: decodes like flax, refuses bad bytes naming the source."""
import io
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import serialization

import flax_optim_compat as optim
from flax_optim_compat._checkpoint import _codec
from tests import _hostile


def _adam_bytes():
  opt = optim.Adam(0.1).create({'w': np.ones((2, 3), np.float32), 'b': np.zeros(3, np.float32)})
  return serialization.to_bytes(opt.apply_gradient({'w': np.ones((2, 3), np.float32),
                                                    'b': np.ones(3, np.float32)}))


@pytest.mark.parametrize('data,detail', [
    (b'', 'is empty'),
    (b'\x82\xa1a', 'is truncated'),
    (b'\xc1', 'byte 0xc1 starts no msgpack object, at / (byte offset 0)'),
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


def _in_a_tree(record):
  return {'target': {'w': record, 'b': np.zeros(2, np.float32)}, 'state': {'step': 1}}


@pytest.mark.parametrize('what', sorted(_hostile.BAD_RECORDS))
@pytest.mark.parametrize('mode', ['numpy', 'jax', 'meta'])
def test_bad_records_are_refused_naming_path_and_offset(what, mode):
  data = _hostile.pack(_in_a_tree(_hostile.BAD_RECORDS[what]))
  with pytest.raises(_codec.CheckpointError) as info:
    _codec.decode_bytes(data, "'f'", mode=mode)
  message = str(info.value)
  assert message.startswith("'f' is not a msgpack checkpoint: "), message
  assert re.search(r', at /target/w(/\S+)? \(byte offset \d+\)\.$', message), message
  # The offset points into the file: at or after the start of /target/w's value.
  offset = int(re.search(r'byte offset (\d+)', message).group(1))
  assert data.index(b'\xa1w') < offset < len(data)


@pytest.mark.parametrize('header', [b'\xdb\xff\xff\xff\xff',   # a 4 GB string
                                    b'\xc6\xff\xff\xff\xff',   # 4 GB of bytes
                                    b'\xdd\xff\xff\xff\xff',   # 4 billion list items
                                    b'\xdf\xff\xff\xff\xff',   # 4 billion map entries
                                    b'\xc9\xff\xff\xff\xff\x01'])  # a 4 GB array record
def test_lengths_beyond_the_data_are_truncation_not_allocation(header):
  with pytest.raises(_codec.CheckpointError, match=r'is truncated .*byte offset'):
    _codec.decode_bytes(b'\x81\xa1a' + header + b'\x00' * 8)


def test_chunked_arrays_decode_like_flax(monkeypatch):
  monkeypatch.setattr(serialization, 'MAX_CHUNK_SIZE', 16)  # 4 float32 per chunk
  tree = {'w': np.arange(10, dtype=np.float32).reshape(2, 5), 'step': np.int32(3)}
  data = serialization.msgpack_serialize(tree)
  assert b'__msgpack_chunked_array__' in data
  for mode in ('numpy', 'jax'):
    got = _codec.decode_bytes(data, mode=mode)
    np.testing.assert_array_equal(got['w'], tree['w'])
    assert got['w'].dtype == np.float32 and got['w'].shape == (2, 5)
  meta = _codec.decode_bytes(data, mode='meta')['w']
  assert (meta.shape, meta.dtype) == ((2, 5), np.dtype(np.float32))
  f = io.BytesIO()
  _codec.encode(f, tree)
  assert f.getvalue() == data


def test_numeric_dtypes_round_trip():
  tree = {name: np.arange(3).astype(dtype) for name, dtype in [
      ('bool', np.bool_), ('int8', np.int8), ('uint64', np.uint64), ('float16', np.float16),
      ('bfloat16', jnp.bfloat16), ('complex64', np.complex64)]}
  tree['scalar'] = np.float32(2.5)
  data = serialization.msgpack_serialize(tree)
  got = _codec.decode_bytes(data)
  for key, value in tree.items():
    assert got[key].dtype == value.dtype and type(got[key]) is type(value), key
    np.testing.assert_array_equal(got[key], value)


def test_duplicate_map_keys_are_refused():
  data = b'\x82\xa1a\x01\xa1a\x02'  # {'a': 1, 'a': 2}
  with pytest.raises(_codec.CheckpointError, match=r"the map key 'a' appears twice, at / "
                                                   r'\(byte offset 4\)'):
    _codec.decode_bytes(data)
