"""flax's msgpack encoding, read and written one node at a time: the checkpoint wing's only codec.

``flax.serialization.msgpack_restore`` needs the whole file in memory and copies every array
out of it; :func:`decode` reads a stream front to back, reads each array's bytes once (or skips
them, for ``inspect``) and :func:`encode` writes arrays in place, byte-identical to
``flax.serialization.msgpack_serialize``. Every failure is a :class:`CheckpointError`.

On the library where it can be: the writer packs every header with ``msgpack.Packer`` and
complex records are read with ``msgpack.unpackb``. The reader stays our own: measured against
``msgpack.Unpacker`` (msgpack 1.2.4: streaming ``read``s from the file, ``max_buffer_size`` /
``max_bin_len`` / ``max_ext_len`` set to the file's size, flax's records checked in
``ext_hook``, ``tell()`` for offsets; ``benchmarks/bench_codec.py``), the Unpacker cannot

* name the path inside the file: ``ext_hook`` gets a record's bytes, not where it sits (0 of
  90 hostile records at a known path named it; ours: 90 of 90);
* give a record's own offset: ``tell()`` moves only between top-level objects (a checkpoint is
  one) and, after an error, says where the buffer stopped (the end of the bad record);
* check before it allocates: an ext's payload (up to ``max_ext_len``) is in memory before
  ``ext_hook`` sees its shape and dtype; a size limit is per file, not "shape x dtype = bytes";
* see duplicate map keys (a later ``'w'`` silently replaces an earlier one): of the 290 cases
  of the hostile corpus (tests/_hostile.py's bad records at two paths, 200 seeded byte flips
  and truncations), the Unpacker refused 236, ours 276 (the other 14 are byte flips that leave
  valid records);
* keep the speed: a 1.02 GB file of 64 MB float32 leaves on the 2-core CI machine (median of
  2 fresh processes) took 9.6 s with the Unpacker against 4.3 s (NumPy leaves), 10.8 s
  against 7.2 s (jax leaves); peak memory added 1.07x / 1.13x the file against 1.00x / 1.07x.
"""
import dataclasses
import io
import math
import struct
import warnings
from typing import Optional, Tuple

import jax
import jax.numpy as jnp
import msgpack
import numpy as np
from flax import serialization

from .. import _tree

# flax's msgpack extension types (flax.serialization._MsgpackExtType) and chunked-array key.
EXT_NDARRAY, EXT_COMPLEX, EXT_NPSCALAR = 1, 2, 3
CHUNKED = '__msgpack_chunked_array__'
# Leaves up to this size are materialised in 'meta' mode (step counters, scalars).
SMALL_LEAF_BYTES = 1024


class CheckpointError(ValueError):
  """A checkpoint that cannot be read or does not fit: the message names the file and the path."""
  __module__ = 'flax_optim_compat.convert'  # where users import it from


def cause_line(error: BaseException) -> str:
  """``'ValueError: <its first line>'``: what another library (orbax, tensorstore) raised, as
  a :class:`CheckpointError`'s one line quotes it."""
  return f'{type(error).__name__}: {(str(error).splitlines() or [""])[0]}'


@dataclasses.dataclass(frozen=True)
class LeafMeta:
  """An array leaf that was not materialised ('meta' mode): its shape and dtype."""
  shape: Tuple[int, ...]
  dtype: np.dtype

  @property
  def nbytes(self) -> int:
    return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


class _Bad(Exception):
  """A record that is not what flax writes: ``detail``, at byte ``offset``."""

  def __init__(self, detail: str, offset: int):
    super().__init__(detail)
    self.detail, self.offset = detail, offset


class _Truncated(Exception):
  pass


_MAX_DEPTH = 200
_MAX_NDIM = 64  # NumPy's limit
_FIXED = {0xcc: '>B', 0xcd: '>H', 0xce: '>I', 0xcf: '>Q', 0xd0: '>b', 0xd1: '>h', 0xd2: '>i',
          0xd3: '>q', 0xca: '>f', 0xcb: '>d'}
_LENGTH = {1: '>B', 2: '>H', 4: '>I'}
_CHUNKED_KEYS = {CHUNKED, 'shape', 'chunks'}


def _dtype(name, offset: int) -> np.dtype:
  """The numeric or bool NumPy dtype flax names ``name`` (bfloat16 and ml_dtypes included)."""
  if isinstance(name, bytes):
    try:
      name = name.decode('ascii')
    except UnicodeDecodeError:
      name = None
  if not isinstance(name, str):
    raise _Bad(f'an array record whose dtype is not a name ({type(name).__name__})', offset)
  try:
    with warnings.catch_warnings():
      warnings.simplefilter('ignore')
      dtype = np.dtype(jnp.bfloat16) if name == 'bfloat16' else np.dtype(name)
  except (TypeError, ValueError, SyntaxError):
    raise _Bad(f'an array record of unknown dtype {name[:40]!r}', offset) from None
  if (dtype.shape != () or dtype.names is not None or not (dtype.isnative or dtype.itemsize == 1)
      or _tree.dtype_kind(dtype) not in 'biufc'):
    raise _Bad(f'an array record of dtype {name[:40]!r}, not a numeric or bool dtype', offset)
  return dtype


def _join(path) -> str:
  return _tree.join_keys(path) if path else '/'


class _Reader:
  """A streaming reader of flax's msgpack encoding, one node at a time.

  Every record is checked before anything is allocated for it: lengths against the bytes left,
  array records (shape a list of non-negative ints, dtype numeric or bool, shape x dtype = the
  bytes), extension codes (flax's three), chunked-array records (complete), map keys (strings
  or ints, distinct as the path strings they become).

  ``mode='numpy'``: each array a NumPy view of its bytes; ``'jax'``: copied into a
  ``jax.Array`` at once, so the file's bytes never live twice; ``'meta'``: shape and dtype only
  (small leaves are still read).
  """

  def __init__(self, f, mode: str, total: int, progress=None):
    self._f, self._mode, self._total, self._progress = f, mode, total, progress
    self._pos = 0
    self._seekable = f.seekable()
    self._scratch = None
    self.path = []

  def _need(self, n: int) -> None:
    if n > self._total - self._pos:
      raise _Truncated()

  def _take(self, n: int) -> bytes:
    self._need(n)
    data = self._f.read(n)
    if len(data) < n:
      raise _Truncated()
    self._pos += n
    return data

  def _skip(self, n: int) -> None:
    if self._seekable:
      self._need(n)
      self._f.seek(n, io.SEEK_CUR)
      self._pos += n
    else:
      self._take(n)

  def _number(self, fmt: str):
    return struct.unpack(fmt, self._take(struct.calcsize(fmt)))[0]

  def _report(self):
    if self._progress:
      self._progress(self._pos, self._total)

  def read_top(self):
    tree = self._value(0)
    if self._f.read(1):
      raise _Bad('data continues after the first object', self._pos)
    self._pos = self._total
    self._report()
    return tree

  def _value(self, depth: int):
    if depth > _MAX_DEPTH:
      raise _Bad(f'nested deeper than {_MAX_DEPTH} levels', self._pos)
    start = self._pos
    b = self._take(1)[0]
    if b <= 0x7f:
      return b
    if b >= 0xe0:
      return b - 0x100
    if 0x80 <= b <= 0x8f:
      return self._map(b & 0x0f, depth, start)
    if 0x90 <= b <= 0x9f:
      return self._list(b & 0x0f, depth)
    if 0xa0 <= b <= 0xbf:
      return self._str(b & 0x1f)
    if b in _FIXED:
      return self._number(_FIXED[b])
    if b == 0xc0:
      return None
    if b in (0xc2, 0xc3):
      return b == 0xc3
    if b in (0xc4, 0xc5, 0xc6):
      return self._take(self._number(_LENGTH[1 << (b - 0xc4)]))
    if b in (0xd9, 0xda, 0xdb):
      return self._str(self._number(_LENGTH[1 << (b - 0xd9)]))
    if b in (0xdc, 0xdd):
      return self._list(self._number('>H' if b == 0xdc else '>I'), depth)
    if b in (0xde, 0xdf):
      return self._map(self._number('>H' if b == 0xde else '>I'), depth, start)
    if b in (0xc7, 0xc8, 0xc9):
      n = self._number(_LENGTH[1 << (b - 0xc7)])
      return self._ext(self._number('>b'), n, start)
    if 0xd4 <= b <= 0xd8:
      return self._ext(self._number('>b'), 1 << (b - 0xd4), start)
    raise _Bad(f'byte 0x{b:02x} starts no msgpack object', start)

  def _str(self, n: int) -> str:
    start = self._pos
    data = self._take(n)
    try:
      return data.decode('utf-8')
    except UnicodeDecodeError:
      raise _Bad('an invalid UTF-8 string', start) from None

  def _list(self, n: int, depth: int) -> list:
    self._need(n)  # every element takes at least one byte
    out = []
    for i in range(n):
      self.path.append(str(i))
      out.append(self._value(depth + 1))
      self.path.pop()
    return out

  def _map(self, n: int, depth: int, start: int):
    self._need(2 * n)  # every entry takes at least two bytes
    out, names = {}, {}
    for _ in range(n):
      key_at = self._pos
      key = self._value(depth + 1)
      if not isinstance(key, (str, int)) or isinstance(key, bool):
        raise _Bad(f'a map key that is a {type(key).__name__}, not a string', key_at)
      if str(key) in names:
        other = names[str(key)]
        raise _Bad(f'the map keys {other!r} and {key!r} name the same path'
                   if other != key or type(other) is not type(key) else
                   f'the map key {key!r} appears twice', key_at)
      names[str(key)] = key
      self.path.append(str(key))
      out[key] = self._value(depth + 1)
      self.path.pop()
    if CHUNKED in out:
      return self._unchunk(out, start)
    return out

  def _ext(self, code: int, n: int, start: int):
    self._need(n)
    if code == EXT_COMPLEX:
      return self._complex(self._take(n), start)
    if code not in (EXT_NDARRAY, EXT_NPSCALAR):
      raise _Bad(f'a msgpack extension record of code {code}, not one flax writes (1: array, '
                 '2: complex, 3: NumPy scalar)', start)
    end = self._pos + n
    if n < 1 or self._take(1)[0] != 0x93:
      raise _Bad('an array record that is not [shape, dtype, bytes]', start)
    shape_at = self._pos
    shape = self._value(_MAX_DEPTH - 1)
    if (not isinstance(shape, list) or len(shape) > _MAX_NDIM
        or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)):
      raise _Bad(f'an array record whose shape {_short(shape)} is not a list of at most '
                 f'{_MAX_NDIM} non-negative ints', shape_at)
    shape = tuple(shape)
    if code == EXT_NPSCALAR and shape:
      raise _Bad(f'a NumPy scalar record of shape {shape}', shape_at)
    dtype = _dtype(self._value(_MAX_DEPTH - 1), shape_at)
    marker = self._take(1)[0]
    if marker not in (0xc4, 0xc5, 0xc6):
      raise _Bad('an array record whose data is not a byte string', self._pos - 1)
    size = self._number(_LENGTH[1 << (marker - 0xc4)])
    expected = math.prod(shape) * dtype.itemsize
    if self._pos + size != end or size != expected:
      raise _Bad(f'an array record of shape {shape} and dtype {dtype.name} ({expected} bytes) '
                 f'holding {size} bytes in a record of {n}', start)
    if self._mode == 'meta' and size > SMALL_LEAF_BYTES:
      self._skip(size)
      self._report()
      return LeafMeta(shape, dtype)
    if (self._mode == 'jax' and code == EXT_NDARRAY
        and jax.dtypes.canonicalize_dtype(dtype) == dtype):  # e.g. float64 without x64: NumPy
      array = self._read_into_scratch(size).view(dtype).reshape(shape)
      # Copied into XLA's buffer (device_put: one copy, where jnp.asarray measured ~1.25x)
      # and waited for, before the scratch buffer is reused for the next leaf.
      result = jax.block_until_ready(jax.device_put(array))
      if result.unsafe_buffer_pointer() == array.ctypes.data:
        result = jax.block_until_ready(jnp.array(array, copy=True))  # never alias the scratch
    else:
      array = np.frombuffer(self._take(size), dtype).reshape(shape)
      result = array[()] if code == EXT_NPSCALAR else array
    self._report()
    return result

  def _complex(self, data: bytes, start: int) -> complex:
    """flax's complex record: ``packb((real, imag))``."""
    try:
      value = msgpack.unpackb(data)
    except Exception:  # pylint: disable=broad-except  # any malformed payload
      value = None
    if (not isinstance(value, (list, tuple)) or len(value) != 2
        or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in value)):
      raise _Bad('a complex record that is not [real, imag]', start)
    return complex(*value)

  def _unchunk(self, record: dict, start: int):
    """The array of flax's chunked-array record (arrays over ``MAX_CHUNK_SIZE`` bytes)."""
    shape, chunks = record.get('shape'), record.get('chunks')
    if set(record) != _CHUNKED_KEYS or not isinstance(shape, dict) or not isinstance(chunks,
                                                                                     dict):
      raise _Bad(f'a chunked-array record with keys {sorted(map(str, record))}, not '
                 f'{sorted(_CHUNKED_KEYS)} holding two dicts', start)
    shape = _sequence(shape, 'shape', start)
    chunks = _sequence(chunks, 'chunks', start)
    if (len(shape) > _MAX_NDIM or not all(isinstance(d, int) and not isinstance(d, bool)
                                          and d >= 0 for d in shape)):
      raise _Bad(f'a chunked-array record whose shape {_short(shape)} is not a list of '
                 'non-negative ints', start)
    arrays = [c for c in chunks if isinstance(c, (np.ndarray, jax.Array, LeafMeta))]
    if len(arrays) != len(chunks) or any(len(c.shape) != 1 for c in arrays):
      raise _Bad('a chunked-array record whose chunks are not all 1-d arrays', start)
    dtypes = {np.dtype(c.dtype) for c in arrays}
    if len(dtypes) > 1:
      raise _Bad(f'a chunked-array record mixing dtypes {sorted(d.name for d in dtypes)}', start)
    count = sum(c.shape[0] for c in arrays)
    if count != math.prod(shape):
      raise _Bad(f'a chunked-array record of shape {tuple(shape)} whose chunks hold {count} '
                 'elements', start)
    if not arrays:
      raise _Bad('a chunked-array record without chunks', start)
    dtype = dtypes.pop()
    if any(isinstance(c, LeafMeta) for c in arrays):
      return LeafMeta(tuple(shape), dtype)
    if all(isinstance(c, jax.Array) for c in arrays):
      return jnp.concatenate(arrays).reshape(shape)
    return np.concatenate([np.asarray(c) for c in arrays]).reshape(shape)

  def _read_into_scratch(self, size: int) -> np.ndarray:
    """The next ``size`` bytes in one reused buffer (no per-leaf allocation to fragment)."""
    self._need(size)
    if self._scratch is None or self._scratch.size < size:
      self._scratch = np.empty(size, np.uint8)
    view = self._scratch[:size]
    if self._f.readinto(memoryview(view)) < size:
      raise _Truncated()
    self._pos += size
    return view


def _sequence(record: dict, name: str, start: int) -> list:
  """The values of flax's ``{'0': a, '1': b, ...}`` encoding of a tuple, in order."""
  keys = [str(i) for i in range(len(record))]
  if sorted(map(str, record)) != sorted(keys) or any(not isinstance(k, str) for k in record):
    raise _Bad(f'a chunked-array record whose {name} keys are not "0".."{len(record) - 1}"',
               start)
  return [record[k] for k in keys]


def _short(value) -> str:
  text = repr(value)
  return text if len(text) <= 40 else text[:37] + '...'


def decode(stream, where: str, *, mode: str = 'numpy', total: Optional[int] = None,
           progress=None) -> dict:
  """The state dict in a msgpack stream (a file opened ``'rb'`` or a ``BytesIO``).

  Args:
    stream: the binary stream, read from its current position to its end.
    where: what the stream is, for messages (e.g. ``"'ckpt/checkpoint_3'"``).
    mode: ``'numpy'`` (NumPy leaves), ``'jax'`` (``jax.Array`` leaves, each copied once) or
      ``'meta'`` (:class:`LeafMeta` for arrays over ``SMALL_LEAF_BYTES``).
    total: the stream's length in bytes (for bounds checks and ``progress``).
    progress: optional ``callback(bytes_read, total_bytes)``.

  Returns:
    The nested dict, chunked arrays joined.

  Raises:
    CheckpointError: truncated, not msgpack, or not a dict at the top.
  """
  if total is None:
    position = stream.tell()
    total = stream.seek(0, io.SEEK_END) - position
    stream.seek(position)
  reader = _Reader(stream, mode, total, progress)
  try:
    tree = reader.read_top()
  except _Truncated:
    raise CheckpointError(
        f'{where} is truncated (the msgpack data ends early, inside {_join(reader.path)} at '
        f'byte offset {total}): not a complete checkpoint.') from None
  except _Bad as e:
    raise CheckpointError(f'{where} is not a msgpack checkpoint: {e.detail}, at '
                          f'{_join(reader.path)} (byte offset {e.offset}).') from None
  if not isinstance(tree, dict):
    raise CheckpointError(f'{where} is not a msgpack checkpoint (it decodes to a '
                          f'{type(tree).__name__}, not a dict).')
  return tree


def decode_bytes(data, where: str = 'the bytes', *, mode: str = 'numpy') -> dict:
  """:func:`decode` of msgpack ``bytes`` / ``bytearray`` / ``memoryview``.

  Examples:
    >>> from flax import serialization
    >>> from flax_optim_compat._checkpoint import _codec
    >>> _codec.decode_bytes(serialization.msgpack_serialize({'step': 3}))
    {'step': 3}
    >>> _codec.decode_bytes(b'\\x82', "'ckpt/checkpoint_1'")
    Traceback (most recent call last):
    flax_optim_compat.convert.CheckpointError: 'ckpt/checkpoint_1' is truncated (the msgpack data ends early, inside / at byte offset 1): not a complete checkpoint.
  """
  if not isinstance(data, (bytes, bytearray, memoryview)):
    raise CheckpointError(f'{where} is not msgpack bytes (got a {type(data).__name__}).')
  if not len(data):
    raise CheckpointError(f'{where} is empty: not a checkpoint.')
  return decode(io.BytesIO(data), where, mode=mode, total=len(data))


# ----------------------------------------------------------------------------- writing


def _ext_header(code: int, n: int) -> bytes:
  """msgpack's header of an ext of ``n`` bytes (fixext where the size allows, as msgpack packs)."""
  fixed = {1: 0xd4, 2: 0xd5, 4: 0xd6, 8: 0xd7, 16: 0xd8}
  if n in fixed:
    return struct.pack('>Bb', fixed[n], code)
  if n < 1 << 8:
    return struct.pack('>BBb', 0xc7, n, code)
  if n < 1 << 16:
    return struct.pack('>BHb', 0xc8, n, code)
  return struct.pack('>BIb', 0xc9, n, code)


def _write_array(f, packer, array: np.ndarray) -> None:
  """flax's ndarray ext (``packb((shape, dtype name, bytes))``), the data written in place."""
  if not array.flags.c_contiguous:
    array = array.copy(order='C')  # (np.ascontiguousarray would make 0-d arrays 1-d)
  head = b'\x93' + packer.pack(list(array.shape)) + packer.pack(array.dtype.name)
  n = array.nbytes
  head += (struct.pack('>BB', 0xc4, n) if n < 1 << 8 else struct.pack('>BH', 0xc5, n)
           if n < 1 << 16 else struct.pack('>BI', 0xc6, n))
  f.write(_ext_header(EXT_NDARRAY, len(head) + n))
  f.write(head)
  f.write(memoryview(array.reshape(-1).view(np.uint8)))


def _write_tree(f, packer, tree):
  if isinstance(tree, dict) and not any(
      isinstance(v, (np.ndarray, jax.Array)) and v.nbytes > serialization.MAX_CHUNK_SIZE
      for v in tree.values()):
    f.write(packer.pack_map_header(len(tree)))
    try:
      keys = sorted(tree)  # flax's msgpack_serialize sorts keys too (it tree_maps its input)
    except TypeError:
      keys = list(tree)
    for key in keys:
      f.write(packer.pack(key))
      _write_tree(f, packer, tree[key])
  elif isinstance(tree, (np.ndarray, jax.Array)) and np.dtype(tree.dtype) != np.dtype(object):
    _write_array(f, packer, np.asarray(tree))
  else:
    # Other leaves (scalars, None), or a dict flax splits into chunks: flax's own encoding.
    f.write(serialization.msgpack_serialize(tree))


def encode(f, state_dict: dict) -> None:
  """Writes ``state_dict`` to the binary file ``f`` as ``flax.serialization.msgpack_serialize``.

  The bytes are the same, written leaf by leaf without holding the whole encoding in memory.

  Examples:
    >>> import io, numpy as np
    >>> from flax import serialization
    >>> from flax_optim_compat._checkpoint import _codec
    >>> tree = {'w': np.arange(3.0), 'step': 2}
    >>> f = io.BytesIO()
    >>> _codec.encode(f, tree)
    >>> f.getvalue() == serialization.msgpack_serialize(tree)
    True
  """
  _write_tree(f, msgpack.Packer(use_bin_type=True, strict_types=True), state_dict)
