"""Hostile checkpoint bytes for the checkpoint tool's tests: byte flips, truncations and records
of the wrong schema, made from the committed legacy fixtures with a seeded generator."""
import math
import random

import msgpack
import numpy as np

_EXT_NDARRAY, _EXT_COMPLEX, _EXT_NPSCALAR = 1, 2, 3


def pack(tree) -> bytes:
  """msgpack bytes of ``tree`` as flax writes them (NumPy arrays as flax's ndarray records);
  ``msgpack.ExtType`` leaves and any keys are written as they are."""
  def default(obj):
    if isinstance(obj, np.ndarray):
      return msgpack.ExtType(_EXT_NDARRAY, msgpack.packb(
          (list(obj.shape), obj.dtype.name, obj.tobytes()), use_bin_type=True))
    if isinstance(obj, np.generic):
      return msgpack.ExtType(_EXT_NPSCALAR, msgpack.packb(
          ([], obj.dtype.name, obj.tobytes()), use_bin_type=True))
    if isinstance(obj, complex):
      return msgpack.ExtType(_EXT_COMPLEX, msgpack.packb((obj.real, obj.imag)))
    raise TypeError(type(obj))
  return msgpack.packb(tree, default=default, use_bin_type=True, strict_types=False)


def array_record(shape, dtype, data: bytes, code: int = _EXT_NDARRAY) -> msgpack.ExtType:
  """A flax array record holding exactly what it is given (no consistency)."""
  return msgpack.ExtType(code, msgpack.packb((shape, dtype, data), use_bin_type=True))


# Records a reader must refuse (or, for the last group, values convert must refuse).
BAD_RECORDS = {
    'shape a string': array_record('abc', 'float32', b'\0' * 12),
    'shape a float': array_record(1.5, 'float32', b'\0' * 4),
    'shape negative': array_record([-1], 'float32', b''),
    'shape overflowing': array_record([2 ** 40, 2 ** 40, 2 ** 40], 'float32', b'\0' * 4),
    'shape of bools': array_record([True], 'float32', b'\0' * 4),
    'shape nested': array_record([[1]], 'float32', b'\0' * 4),
    'shape of 65 dims': array_record([1] * 65, 'float32', b'\0' * 4),
    'shape None': array_record(None, 'float32', b'\0' * 4),
    'dtype object': array_record([1], 'object', b'\0' * 8),
    'dtype O': array_record([1], 'O', b'\0' * 8),
    'dtype datetime64': array_record([1], 'datetime64[s]', b'\0' * 8),
    'dtype unicode': array_record([1], 'U2', b'\0' * 8),
    'dtype void': array_record([1], 'V8', b'\0' * 8),
    'dtype big-endian': array_record([1], '>f4', b'\0' * 4),
    'dtype sub-array': array_record([1], '(2,)f4', b'\0' * 8),
    'dtype structured': array_record([1], 'f4,i4', b'\0' * 8),
    'dtype an int': array_record([1], 5, b'\0' * 4),
    'dtype unknown': array_record([1], 'notatype', b'\0' * 4),
    'dtype non-ascii bytes': msgpack.ExtType(_EXT_NDARRAY, msgpack.packb(
        ([1], b'\xff\xfe', b'\0' * 4), use_bin_type=True)),
    'data too short': array_record([3], 'float32', b'\0' * 8),
    'data too long': array_record([1], 'float32', b'\0' * 8),
    'data a string': msgpack.ExtType(_EXT_NDARRAY, msgpack.packb(([1], 'float32', 'abcd'))),
    'array record of two': msgpack.ExtType(_EXT_NDARRAY, msgpack.packb(([1], 'float32'))),
    'array record empty': msgpack.ExtType(_EXT_NDARRAY, b''),
    'array record a map': msgpack.ExtType(_EXT_NDARRAY, msgpack.packb({'a': 1})),
    'scalar record with a shape': array_record([2], 'float32', b'\0' * 8, _EXT_NPSCALAR),
    'timestamp ext': msgpack.Timestamp(1, 0),
    'unknown ext 5': msgpack.ExtType(5, b'abc'),
    'unknown ext 127': msgpack.ExtType(127, b''),
    'complex empty': msgpack.ExtType(_EXT_COMPLEX, b''),
    'complex of one': msgpack.ExtType(_EXT_COMPLEX, msgpack.packb([1.0])),
    'complex of strings': msgpack.ExtType(_EXT_COMPLEX, msgpack.packb(['a', 'b'])),
    'complex not msgpack': msgpack.ExtType(_EXT_COMPLEX, b'\xc1'),
    'chunked without chunks': {'__msgpack_chunked_array__': True, 'shape': {'0': 2}},
    'chunked chunks a list': {'__msgpack_chunked_array__': True, 'shape': {'0': 2},
                              'chunks': [1, 2]},
    'chunked wrong keys': {'__msgpack_chunked_array__': True, 'shape': {'0': 2},
                           'chunks': {'1': np.zeros(2, np.float32)}},
    'chunked too few elements': {'__msgpack_chunked_array__': True, 'shape': {'0': 3},
                                 'chunks': {'0': np.zeros(2, np.float32)}},
    'chunked 2-d chunk': {'__msgpack_chunked_array__': True, 'shape': {'0': 4},
                          'chunks': {'0': np.zeros((2, 2), np.float32)}},
    'chunked mixed dtypes': {'__msgpack_chunked_array__': True, 'shape': {'0': 2},
                             'chunks': {'0': np.zeros(1, np.float32),
                                        '1': np.zeros(1, np.int32)}},
    'chunked of strings': {'__msgpack_chunked_array__': True, 'shape': {'0': 2},
                           'chunks': {'0': 'ab'}},
    'chunked shape negative': {'__msgpack_chunked_array__': True, 'shape': {'0': -2},
                               'chunks': {'0': np.zeros(2, np.float32)}},
    'keys 7 and "7"': {7: np.zeros(1, np.float32), '7': np.zeros(1, np.float32)},
    'key a float': {1.5: np.zeros(1, np.float32)},
    'key None': {None: np.zeros(1, np.float32)},
    'key bytes': {b'w': np.zeros(1, np.float32)},
}
# Values the codec reads but convert must refuse before they reach jax (strict restore or the
# leaf check), or inspect/diff must describe without crashing.
BAD_VALUES = {
    'a string': 'fast',
    'bytes': b'\x00\x01',
    'a list': [1, 2, 3],
    'a nested list': [[np.zeros(2, np.float32)]],
    'None': None,
    'a bool': True,
    'nan': float('nan'),
    'inf': float('inf'),
    'a huge int': 2 ** 63,
    'a negative int': -3,
    'a complex': complex(1, 2),
    'a float64 array': np.zeros(3),
    'an int8 array': np.zeros(3, np.int8),
    'a 0-d bool': np.bool_(True),
    'an empty dict': {},
    'an empty array': np.zeros((0, 3), np.float32),
    'a NaN float32 array': np.full(3, np.nan, np.float32),
}


def _paths(tree, path=()):
  if isinstance(tree, dict):
    yield path
    for key, value in tree.items():
      yield from _paths(value, path + (key,))
  else:
    yield path


def _replace(tree, path, value):
  if not path:
    return value
  out = dict(tree)
  out[path[0]] = _replace(tree[path[0]], path[1:], value)
  return out


def mutations(fixtures: dict, seed: int, count: int):
  """``count`` ``(description, fixture name, bytes)`` cases: a quarter each of byte flips,
  truncations, bad records and bad values at random places of the fixtures' trees."""
  rng = random.Random(seed)
  names = sorted(fixtures)
  for i in range(count):
    name = rng.choice(names)
    data, tree = fixtures[name]
    kind = i % 4
    if kind == 0:
      mutated = bytearray(data)
      for _ in range(rng.randint(1, 4)):
        at = rng.randrange(len(mutated))
        mutated[at] = rng.randrange(256)
      yield f'{name}: bytes flipped (case {i})', name, bytes(mutated)
    elif kind == 1:
      cut = rng.randrange(len(data))
      yield f'{name}: truncated to {cut} bytes', name, data[:cut]
    else:
      table = BAD_RECORDS if kind == 2 else BAD_VALUES
      what = rng.choice(sorted(table))
      path = rng.choice(list(_paths(tree)))
      yield (f'{name}: {what} at /{"/".join(map(str, path))}', name,
             pack(_replace(tree, path, table[what])))


def nbytes_of(shape, dtype) -> int:
  return math.prod(shape) * np.dtype(dtype).itemsize
