"""flax's msgpack encoding, read and written one node at a time: the checkpoint wing's only codec.

``flax.serialization.msgpack_restore`` needs the whole file in memory and copies every array
out of it; :func:`decode` reads a stream front to back, reads each array's bytes once (or skips
them, for ``inspect``) and :func:`encode` writes arrays in place, byte-identical to
``flax.serialization.msgpack_serialize``. Every failure is a :class:`CheckpointError`.
"""
import dataclasses
import io
import struct
from typing import Optional, Tuple

import jax
import jax.numpy as jnp
import msgpack
import numpy as np
from flax import serialization

# flax's msgpack extension types (flax.serialization._MsgpackExtType) and chunked-array key.
EXT_NDARRAY, EXT_COMPLEX, EXT_NPSCALAR = 1, 2, 3
CHUNKED = '__msgpack_chunked_array__'
# Leaves up to this size are materialised in 'meta' mode (step counters, scalars).
SMALL_LEAF_BYTES = 1024


class CheckpointError(ValueError):
  """A checkpoint that cannot be read or does not fit: the message names the file and the path."""


@dataclasses.dataclass(frozen=True)
class LeafMeta:
  """An array leaf that was not materialised ('meta' mode): its shape and dtype."""
  shape: Tuple[int, ...]
  dtype: np.dtype

  @property
  def nbytes(self) -> int:
    return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


def _dtype(name) -> np.dtype:
  name = name.decode() if isinstance(name, bytes) else name
  if name == 'bfloat16':
    return np.dtype(jnp.bfloat16)
  return np.dtype(name)


class _Truncated(Exception):
  pass


class _NotMsgpack(Exception):
  pass


_MAX_DEPTH = 200
_FIXED = {0xcc: '>B', 0xcd: '>H', 0xce: '>I', 0xcf: '>Q', 0xd0: '>b', 0xd1: '>h', 0xd2: '>i',
          0xd3: '>q', 0xca: '>f', 0xcb: '>d'}
_LENGTH = {1: '>B', 2: '>H', 4: '>I'}


class _Reader:
  """A streaming reader of flax's msgpack encoding, one node at a time.

  ``mode='numpy'``: each array a NumPy view of its bytes; ``'jax'``: copied into a
  ``jax.Array`` at once, so the file's bytes never live twice; ``'meta'``: shape and dtype only
  (small leaves are still read).
  """

  def __init__(self, f, mode: str, total: int, progress=None):
    self._f, self._mode, self._total, self._progress = f, mode, total, progress
    self._pos = 0
    self._seekable = f.seekable()
    self._scratch = None

  def _take(self, n: int) -> bytes:
    data = self._f.read(n)
    if len(data) < n:
      raise _Truncated()
    self._pos += n
    return data

  def _skip(self, n: int) -> None:
    if self._seekable:
      if self._pos + n > self._total:
        raise _Truncated()
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
      raise _NotMsgpack('data continues after the first object')
    self._pos = self._total
    self._report()
    return tree

  def _value(self, depth: int):
    if depth > _MAX_DEPTH:
      raise _NotMsgpack(f'nested deeper than {_MAX_DEPTH} levels')
    b = self._take(1)[0]
    if b <= 0x7f:
      return b
    if b >= 0xe0:
      return b - 0x100
    if 0x80 <= b <= 0x8f:
      return self._map(b & 0x0f, depth)
    if 0x90 <= b <= 0x9f:
      return [self._value(depth + 1) for _ in range(b & 0x0f)]
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
      n = self._number('>H' if b == 0xdc else '>I')
      return [self._value(depth + 1) for _ in range(n)]
    if b in (0xde, 0xdf):
      return self._map(self._number('>H' if b == 0xde else '>I'), depth)
    if b in (0xc7, 0xc8, 0xc9):
      n = self._number(_LENGTH[1 << (b - 0xc7)])
      return self._ext(self._number('>b'), n)
    if 0xd4 <= b <= 0xd8:
      return self._ext(self._number('>b'), 1 << (b - 0xd4))
    raise _NotMsgpack(f'byte 0x{b:02x} at offset {self._pos - 1} starts no msgpack object')

  def _str(self, n: int) -> str:
    data = self._take(n)
    try:
      return data.decode('utf-8')
    except UnicodeDecodeError:
      raise _NotMsgpack(f'invalid UTF-8 string at offset {self._pos - n}') from None

  def _map(self, n: int, depth: int) -> dict:
    out = {}
    for _ in range(n):
      key = self._value(depth + 1)
      if isinstance(key, (list, dict)):
        raise _NotMsgpack(f'a {type(key).__name__} as a map key at offset {self._pos}')
      out[key] = self._value(depth + 1)
    return out

  def _ext(self, code: int, n: int):
    if code not in (EXT_NDARRAY, EXT_NPSCALAR):
      data = self._take(n)
      if code == EXT_COMPLEX:
        real, imag = msgpack.unpackb(data)
        return complex(real, imag)
      return msgpack.ExtType(code, data)
    end = self._pos + n
    if self._take(1)[0] != 0x93:
      raise _NotMsgpack(f'a malformed array at offset {self._pos - 1}')
    shape = tuple(self._value(_MAX_DEPTH - 1))
    try:
      dtype = _dtype(self._value(_MAX_DEPTH - 1))
    except TypeError as e:
      raise _NotMsgpack(f'an array of unknown dtype ({e})') from None
    marker = self._take(1)[0]
    if marker not in (0xc4, 0xc5, 0xc6):
      raise _NotMsgpack(f'a malformed array at offset {self._pos - 1}')
    size = self._number(_LENGTH[1 << (marker - 0xc4)])
    if self._pos + size != end or size != int(np.prod(shape, dtype=np.int64)) * dtype.itemsize:
      raise _NotMsgpack(f'an array whose size does not match its shape at offset {self._pos}')
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

  def _read_into_scratch(self, size: int) -> np.ndarray:
    """The next ``size`` bytes in one reused buffer (no per-leaf allocation to fragment)."""
    if self._scratch is None or self._scratch.size < size:
      self._scratch = np.empty(size, np.uint8)
    view = self._scratch[:size]
    if self._f.readinto(memoryview(view)) < size:
      raise _Truncated()
    self._pos += size
    return view


def _unchunk(tree):
  """Joins the arrays flax split into chunks (over ``MAX_CHUNK_SIZE`` bytes)."""
  if isinstance(tree, dict):
    if CHUNKED in tree:
      shape = tuple(tree['shape'][k] for k in sorted(tree['shape'], key=int))
      chunks = [tree['chunks'][k] for k in sorted(tree['chunks'], key=int)]
      if any(isinstance(c, LeafMeta) for c in chunks):
        return LeafMeta(shape, chunks[0].dtype)
      return np.concatenate([np.asarray(c) for c in chunks]).reshape(shape)
    return {k: _unchunk(v) for k, v in tree.items()}
  return tree


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
  try:
    tree = _Reader(stream, mode, total, progress).read_top()
  except _Truncated:
    raise CheckpointError(f'{where} is truncated (the msgpack data ends early): not a '
                          'complete checkpoint.') from None
  except _NotMsgpack as e:
    raise CheckpointError(f'{where} is not a msgpack checkpoint ({e}).') from None
  if not isinstance(tree, dict):
    raise CheckpointError(f'{where} is not a msgpack checkpoint (it decodes to a '
                          f'{type(tree).__name__}, not a dict).')
  return _unchunk(tree)


def decode_bytes(data, where: str = 'the bytes', *, mode: str = 'numpy') -> dict:
  """:func:`decode` of msgpack ``bytes`` / ``bytearray`` / ``memoryview``.

  Examples:
    >>> from flax import serialization
    >>> from flax_optim_compat import _codec
    >>> _codec.decode_bytes(serialization.msgpack_serialize({'step': 3}))
    {'step': 3}
    >>> _codec.decode_bytes(b'\\x82', "'ckpt/checkpoint_1'")
    Traceback (most recent call last):
    flax_optim_compat._codec.CheckpointError: 'ckpt/checkpoint_1' is truncated (the msgpack data ends early): not a complete checkpoint.
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
    >>> from flax_optim_compat import _codec
    >>> tree = {'w': np.arange(3.0), 'step': 2}
    >>> f = io.BytesIO()
    >>> _codec.encode(f, tree)
    >>> f.getvalue() == serialization.msgpack_serialize(tree)
    True
  """
  _write_tree(f, msgpack.Packer(use_bin_type=True, strict_types=True), state_dict)
