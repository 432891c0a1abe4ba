"""Inspect, diff and convert legacy ``flax.optim`` checkpoints: to optax, a TrainState, orbax, and back.

Every function takes a *source*: a path (a msgpack file, or a directory holding flax
``checkpoint_<N>`` files: the latest is read), raw msgpack ``bytes``, or an already-loaded state
dict. The optimizer is found wherever it sits: a bare ``{'target', 'state'}`` as
``Optimizer.state_dict()`` writes it, or inside a train state (``{'step', 'optimizer',
'model_state', ...}``) at any depth. Replicated optimizers are stored as one copy (no device
axis), so they read like plain ones.

* :func:`inspect` reports the tree (paths, shapes, dtypes, bytes), the step, where the optimizer
  sits and which optimizer wrote it (per group for ``MultiOptimizer`` / ``focus=``), without
  building the optimizer (and without materialising arrays when given a path).
* :func:`to_optax`, :func:`to_train_state` and :func:`to_orbax` restore the file through the
  strict restore of ``optimizer_def`` (a mismatching optimizer fails with a message naming the
  optimizer the file looks like) and hand back ``optimizer_def.optax_transform()`` with the
  file's state as its optax state, so training continues with the legacy numbers.
* :func:`to_legacy` goes back: params and optax state to a legacy state dict (and a msgpack
  file) that flax 0.5.3 itself restores.
* :func:`diff` compares two checkpoints leaf by leaf.

The same is available from the command line: ``python -m flax_optim_compat --help``.
"""
import dataclasses
import io
import os
import re
import shutil
import struct
import tempfile
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Tuple, Union

import jax
import jax.numpy as jnp
import msgpack
import numpy as np
import optax
from flax import serialization
from flax.training import train_state as flax_train_state

from . import _layouts
from . import _tree
from .base import Optimizer
from .base import OptimizerDef
from .base import OptimizerState

__all__ = ['CheckpointError', 'CheckpointInfo', 'DiffResult', 'load', 'inspect', 'to_optax',
           'to_train_state', 'to_orbax', 'to_legacy', 'diff', 'write_msgpack']

Source = Union[str, os.PathLike, bytes, bytearray, memoryview, Mapping]

# flax's msgpack extension types (flax.serialization._MsgpackExtType) and chunked-array key.
_EXT_NDARRAY, _EXT_COMPLEX, _EXT_NPSCALAR = 1, 2, 3
_CHUNKED = '__msgpack_chunked_array__'
# Leaves up to this size are materialised by `inspect` (step counters, scalars).
_SMALL_LEAF_BYTES = 1024


class CheckpointError(ValueError):
  """A checkpoint that cannot be read or does not fit: the message names the file and the path."""


# ----------------------------------------------------------------------------- layout table



# ----------------------------------------------------------------------------- reading


@dataclasses.dataclass(frozen=True)
class _LeafMeta:
  """An array leaf that ``inspect`` did not materialise."""
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

  ``msgpack.unpackb`` needs the whole file in memory and copies every array out of it; this
  reads the file front to back, reads each array's bytes once (``mode='numpy'``: a NumPy view
  of them; ``'jax'``: copied into a ``jax.Array`` at once, so the file's bytes never live twice)
  or skips them (``'meta'``: shape and dtype only; small leaves are still read).
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
    if code not in (_EXT_NDARRAY, _EXT_NPSCALAR):
      data = self._take(n)
      if code == _EXT_COMPLEX:
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
    if self._mode == 'meta' and size > _SMALL_LEAF_BYTES:
      self._skip(size)
      self._report()
      return _LeafMeta(shape, dtype)
    if (self._mode == 'jax' and code == _EXT_NDARRAY
        and jax.dtypes.canonicalize_dtype(dtype) == dtype):  # e.g. float64 without x64: NumPy
      array = self._read_into_scratch(size).view(dtype).reshape(shape)
      # Copied into XLA's buffer (device_put: one copy, where jnp.asarray measured ~1.25x)
      # and waited for, before the scratch buffer is reused for the next leaf.
      result = jax.block_until_ready(jax.device_put(array))
      if result.unsafe_buffer_pointer() == array.ctypes.data:
        result = jax.block_until_ready(jnp.array(array, copy=True))  # never alias the scratch
    else:
      array = np.frombuffer(self._take(size), dtype).reshape(shape)
      result = array[()] if code == _EXT_NPSCALAR else array
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
    if _CHUNKED in tree:
      shape = tuple(tree['shape'][k] for k in sorted(tree['shape'], key=int))
      chunks = [tree['chunks'][k] for k in sorted(tree['chunks'], key=int)]
      if any(isinstance(c, _LeafMeta) for c in chunks):
        return _LeafMeta(shape, chunks[0].dtype)
      return np.concatenate([np.asarray(c) for c in chunks]).reshape(shape)
    return {k: _unchunk(v) for k, v in tree.items()}
  return tree


def _orbax_markers(path: str) -> bool:
  names = set(os.listdir(path))
  return bool(names & {'_METADATA', '_CHECKPOINT_METADATA', 'manifest.ocdbt', '_sharding',
                       'checkpoint', 'd'}) or any(n.startswith('ocdbt') for n in names)


_CHECKPOINT_FILE = re.compile(r'^(.*?)_?(\d+)$')


def _msgpack_file_in(directory: str) -> str:
  """The latest flax checkpoint file in ``directory`` (``checkpoint_3`` < ``checkpoint_10``)."""
  if _orbax_markers(directory):
    raise CheckpointError(
        f'{directory!r} is an orbax checkpoint directory, but a legacy msgpack checkpoint (a '
        'file, or a directory of flax `checkpoint_<N>` files) was expected.')
  candidates = []
  for name in os.listdir(directory):
    match = _CHECKPOINT_FILE.match(name)
    full = os.path.join(directory, name)
    if match and not name.startswith('.') and 'tmp' not in name:
      if os.path.isdir(full) and _orbax_markers(full):
        raise CheckpointError(
            f'{full!r} is an orbax checkpoint directory, but a legacy msgpack checkpoint was '
            'expected (flax wrote it with orbax checkpointing on).')
      if os.path.isfile(full):
        candidates.append((int(match.group(2)), name))
  if not candidates:
    raise CheckpointError(f'{directory!r} holds no checkpoint: no `checkpoint_<N>` file '
                          f'(found {sorted(os.listdir(directory))[:8]}).')
  return os.path.join(directory, max(candidates)[1])


def _unpack(stream, where: str, mode: str, total: int, progress=None):
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


def _read(source: Source, mode: str = 'numpy', progress=None) -> Tuple[dict, str]:
  """``(state dict, description of the source)``; ``mode`` as :class:`_Reader`."""
  if isinstance(source, Mapping):
    return serialization.to_state_dict(dict(source)), 'the state dict'
  if isinstance(source, (bytes, bytearray, memoryview)):
    if not len(source):
      raise CheckpointError('the bytes are empty: not a checkpoint.')
    return _unpack(io.BytesIO(source), 'the bytes', mode, len(source)), 'the bytes'
  path = os.fspath(source)
  if not os.path.exists(path):
    raise CheckpointError(f'{path!r} does not exist.')
  if os.path.isdir(path):
    path = _msgpack_file_in(path)
  size = os.path.getsize(path)
  if size == 0:
    raise CheckpointError(f'{path!r} is empty (0 bytes): not a checkpoint.')
  with open(path, 'rb') as f:
    return _unpack(f, repr(path), mode, size, progress), repr(path)


def load(source: Source) -> dict:
  """The state dict of a msgpack checkpoint (numpy leaves), as ``flax.serialization.msgpack_restore``.

  Args:
    source: a path (file, or directory of ``checkpoint_<N>`` files), msgpack bytes, or a dict.

  Returns:
    The nested dict stored in the file.

  Raises:
    CheckpointError: the source is missing, empty, truncated or not a msgpack checkpoint.

  Examples:
    >>> import jax.numpy as jnp
    >>> from flax import serialization
    >>> from flax_optim_compat import convert
    >>> data = serialization.to_bytes({'w': jnp.ones(2)})
    >>> convert.load(data)
    {'w': array([1., 1.], dtype=float32)}
  """
  return _read(source)[0]


# ----------------------------------------------------------------------------- locating


def _is_optimizer(node) -> bool:
  if not isinstance(node, dict) or set(node) != {'target', 'state'}:
    return False
  state = node['state']
  return isinstance(state, dict) and (
      {'step', 'param_states'} <= set(state) or _layouts.is_per_group_multi_state(state))


def _find_optimizers(tree, path=()) -> List[Tuple[str, ...]]:
  if _is_optimizer(tree):
    return [path]
  if isinstance(tree, dict):
    return [p for k, v in tree.items() for p in _find_optimizers(v, path + (str(k),))]
  return []


def _at(tree, path):
  for key in path:
    tree = tree[key]
  return tree


def _locate(tree: dict, where: str) -> Tuple[str, ...]:
  found = _find_optimizers(tree)
  if not found:
    raise CheckpointError(
        f'{where} holds no legacy optimizer: no {{"target", "state": {{"step", '
        f'"param_states"}}}} node (top-level keys: {sorted(tree, key=str)[:10]}).')
  if len(found) > 1:
    raise CheckpointError(f'{where} holds {len(found)} optimizers, at '
                          f'{", ".join(_tree.join_keys(p) for p in found)}; convert them one '
                          'at a time from their state dicts.')
  return found[0]


# ----------------------------------------------------------------------------- inspect


def _leaves(tree, path=()) -> List[Tuple[Tuple[str, ...], Any]]:
  if isinstance(tree, dict) and tree:
    return [x for k, v in tree.items() for x in _leaves(v, path + (str(k),))]
  return [(path, tree)]


def _leaf_summary(leaf) -> Tuple[Optional[Tuple[int, ...]], Optional[str], int]:
  if isinstance(leaf, _LeafMeta):
    return leaf.shape, leaf.dtype.name, leaf.nbytes
  if isinstance(leaf, (np.ndarray, np.generic, jax.Array)):
    return tuple(np.shape(leaf)), np.dtype(leaf.dtype).name, int(leaf.nbytes)
  if leaf is None:
    return None, 'None', 0
  if isinstance(leaf, dict):
    return None, '{}', 0
  return None, f'{type(leaf).__name__} {leaf!r}', 0


def _count(leaf) -> int:
  shape, _, _ = _leaf_summary(leaf)
  return int(np.prod(shape, dtype=np.int64)) if shape is not None else 0


@dataclasses.dataclass
class CheckpointInfo:
  """What :func:`inspect` found in a checkpoint.

  Attributes:
    source: the file (or 'the bytes' / 'the state dict').
    optimizer_path: where the optimizer sits ('/' when the file is a bare optimizer).
    container: ``'bare optimizer'`` or ``'train state'``.
    step: the optimizer's step (None if the file has none).
    optimizer: the optimizer that wrote it, from the per-parameter state fields (None if
      unknown); optimizers with the same fields are named together ('Adam, AdaBelief or LAMB').
    groups: ``[(optimizer, [param path, ...]), ...]`` (one group unless MultiOptimizer/focus).
    param_count: number of parameters (elements of the target).
    param_bytes: bytes of the target.
    total_bytes: bytes of every array in the file.
    leaves: ``[(path, shape, dtype, nbytes), ...]`` of every leaf; for ``None``, empty dicts
      and Python scalars, shape is None and dtype says what it is ('None', '{}', 'int 3').
    notes: remarks on old layouts.
  """
  source: str
  optimizer_path: Optional[str]
  container: Optional[str]
  step: Optional[int]
  optimizer: Optional[str]
  groups: List[Tuple[str, List[str]]]
  param_count: int
  param_bytes: int
  total_bytes: int
  leaves: List[Tuple[str, Optional[Tuple[int, ...]], Optional[str], int]]
  notes: List[str]

  def summary(self) -> str:
    """One line: optimizer, step, where it sits, params and bytes."""
    where = ('a bare optimizer' if self.optimizer_path == '/' else
             f'a train state (optimizer at {self.optimizer_path})' if self.optimizer_path
             else 'no optimizer')
    return (f'{self.optimizer or "unknown optimizer"} at step {self.step}, {where}; '
            f'{self.param_count:,} params ({_human(self.param_bytes)}), '
            f'{len(self.leaves)} leaves, {_human(self.total_bytes)} of arrays')

  def as_dict(self) -> Dict[str, Any]:
    """A JSON-ready dict (lists for shapes)."""
    out = dataclasses.asdict(self)
    out['groups'] = [{'optimizer': g, 'params': p} for g, p in self.groups]
    out['leaves'] = [{'path': p, 'shape': list(s) if s is not None else None, 'dtype': d,
                      'bytes': b} for p, s, d, b in self.leaves]
    return out

  def tree(self, depth: Optional[int] = None) -> str:
    """The tree as indented text, subtrees below ``depth`` summed into one line."""
    lines = []
    seen = set()
    for path, shape, dtype, nbytes in self.leaves:
      parts = path.strip('/').split('/') if path != '/' else []
      for i in range(len(parts) - 1):
        prefix = tuple(parts[:i + 1])
        if depth is not None and i + 1 >= depth:
          break
        if prefix not in seen:
          seen.add(prefix)
          lines.append('  ' * i + parts[i] + '/')
      if depth is not None and len(parts) > depth:
        prefix = tuple(parts[:depth])
        if prefix not in seen:
          seen.add(prefix)
          sub = [x for x in self.leaves
                 if tuple(x[0].strip('/').split('/')[:depth]) == prefix]
          lines.append('  ' * (depth - 1) + f'{parts[depth - 1]}/ ... {len(sub)} leaves, '
                       f'{_human(sum(x[3] for x in sub))}')
        continue
      what = f'{dtype}{list(shape)}  {_human(nbytes)}' if shape is not None else dtype
      lines.append('  ' * (len(parts) - 1) + f'{parts[-1] if parts else "/"}  {what}'.rstrip())
    return '\n'.join(lines)


def _human(nbytes: int) -> str:
  for unit in ('B', 'KB', 'MB', 'GB'):
    if nbytes < 1000 or unit == 'GB':
      return f'{nbytes:.0f} {unit}' if unit == 'B' else f'{nbytes:.1f} {unit}'
    nbytes /= 1000
  return ''


def _scalar(leaf) -> Optional[int]:
  if isinstance(leaf, (np.ndarray, np.generic, jax.Array)) and np.size(leaf) >= 1:
    return int(np.ravel(np.asarray(leaf))[0])
  if isinstance(leaf, int):
    return leaf
  return None


def _unknown_fields_note(target, param_states) -> str:
  for path, _ in _leaves(target):
    node = param_states
    for key in path:
      node = node.get(key) if isinstance(node, dict) else None
    if _layouts.name_leaf_state(node) is None:
      what = (f'fields {sorted(node, key=str)}' if isinstance(node, dict)
              else 'no state' if node is None else f'a {type(node).__name__}')
      return (f'the per-parameter state of {_tree.join_keys(path)} ({what}) matches no known '
              'optimizer (a custom OptimizerDef?)')
  return 'the per-parameter states do not mirror the target'


def inspect(source: Source, *, progress=None) -> CheckpointInfo:
  """Describes a legacy checkpoint: tree, step, where the optimizer sits, which optimizer wrote it.

  Args:
    source: a path, msgpack bytes or a state dict.
    progress: optional ``callback(bytes_read, total_bytes)`` while a file is read.

  Returns:
    A :class:`CheckpointInfo`; ``.summary()`` is one line, ``.tree()`` the readable tree.

  Raises:
    CheckpointError: the source cannot be read (missing, empty, truncated, not msgpack).

  Examples:
    >>> import jax.numpy as jnp
    >>> from flax import serialization
    >>> import flax_optim_compat as optim
    >>> from flax_optim_compat import convert
    >>> opt = optim.Adam(0.1).create({'w': jnp.ones((2, 3))})
    >>> info = convert.inspect(serialization.to_bytes(opt))
    >>> info.optimizer, info.step, info.param_count
    ('Adam, AdaBelief or LAMB', 0, 6)
    >>> print(info.summary())
    Adam, AdaBelief or LAMB at step 0, a bare optimizer; 6 params (24 B), 4 leaves, 76 B of arrays
  """
  tree, where = _read(source, mode='meta', progress=progress)
  leaves = []
  for path, leaf in _leaves(tree):
    shape, dtype, nbytes = _leaf_summary(leaf)
    leaves.append((_tree.join_keys(path), shape, dtype, nbytes))
  found = _find_optimizers(tree)
  notes = []
  optimizer_path = container = step = name = None
  groups: List[Tuple[str, List[str]]] = []
  param_count = param_bytes = 0
  if len(found) > 1:
    notes.append(f'{len(found)} optimizers, at {", ".join(_tree.join_keys(p) for p in found)}; '
                 'described: the first')
  if found:
    path = found[0]
    node = _at(tree, path)
    optimizer_path = _tree.join_keys(path)
    container = 'bare optimizer' if not path else 'train state'
    target, state = node['target'], node['state']
    target_leaves = [leaf for _, leaf in _leaves(target)]
    param_count = sum(_count(leaf) for leaf in target_leaves)
    param_bytes = sum(_leaf_summary(leaf)[2] for leaf in target_leaves)
    if _layouts.is_per_group_multi_state(state):
      notes.append('MultiOptimizer layout of flax < 0.3.3 (one state per sub-optimizer, each '
                   'with its own step); flax >= 0.3.3 and this package cannot restore it')
      for key in sorted(state, key=int):
        group = state[key]
        group_name = _layouts.name_param_states(target, group.get('param_states'))
        groups.append((f'group {key}: {group_name or "unknown"}', []))
        step = step if step is not None else _scalar(group.get('step'))
      name = 'MultiOptimizer from flax < 0.3.3'
    else:
      step = _scalar(state.get('step'))
      name = _layouts.name_param_states(target, state.get('param_states'))
      grouped = _layouts.group_param_states(target, state.get('param_states'))
      groups = [(g, [_tree.join_keys(p) for p in paths]) for g, paths in (grouped or [])]
      if grouped is None:
        notes.append(_unknown_fields_note(target, state.get('param_states')))
      for g, _ in groups:
        if 'flax <' in g:
          notes.append(f'{g}: an old layout this package reports but does not restore')
  return CheckpointInfo(
      source=where, optimizer_path=optimizer_path, container=container, step=step,
      optimizer=name, groups=groups, param_count=param_count, param_bytes=param_bytes,
      total_bytes=sum(x[3] for x in leaves), leaves=leaves, notes=notes)


# ----------------------------------------------------------------------------- to optax


def _zero_copy_template(opt_def: OptimizerDef, target) -> Optimizer:
  """``opt_def.create(target)`` with read-only zero-stride leaves: shapes and dtypes only.

  The strict restore checks the file against a template; building it abstractly
  (``jax.eval_shape``) keeps a 1 GB checkpoint from allocating a second, zero-filled state.
  """
  abstract = jax.eval_shape(opt_def.create, target)
  return jax.tree_util.tree_map(
      lambda s: np.broadcast_to(np.zeros((), s.dtype), s.shape), abstract)


def _restore(tree: dict, where: str, opt_def: OptimizerDef) -> Tuple[Optimizer, Tuple[str, ...]]:
  if not isinstance(opt_def, OptimizerDef):
    raise TypeError(f'optimizer_def must be an OptimizerDef (e.g. optim.Adam(1e-3)), not '
                    f'{type(opt_def).__name__}.')
  path = _locate(tree, where)
  node = _at(tree, path)
  if _layouts.is_per_group_multi_state(node['state']):
    raise CheckpointError(f'{where}: the optimizer at {_tree.join_keys(path)} has the '
                          'MultiOptimizer layout of flax < 0.3.3, which later versions cannot '
                          'restore.')
  target = node['target']
  bad = [p for p, leaf in _leaves(target)
         if not isinstance(leaf, (np.ndarray, np.generic, jax.Array))]
  if bad:
    leaf_path = _tree.join_keys(path + ('target',) + bad[0])
    raise CheckpointError(f'{where}: the target leaf at {leaf_path} is not an array.')
  template = _zero_copy_template(opt_def, target)
  try:
    restored = serialization.from_state_dict(template, node, name=_tree.join_keys(path).lstrip('/'))
  except ValueError as e:
    raise CheckpointError(f'{where}: {e}') from None
  return restored, path


def _optax_parts(optimizer: Optimizer):
  opt_def = optimizer.optimizer_def
  try:
    tx = opt_def.optax_transform()
    opt_state = opt_def.optax_state(optimizer.target, optimizer.state)
  except NotImplementedError as e:
    raise CheckpointError(f'{type(opt_def).__name__} cannot be converted to optax: {e}') from None
  return tx, opt_state


class OptaxCheckpoint(NamedTuple):
  """``(params, tx, opt_state)``: what :func:`to_optax` returns."""
  params: Any
  tx: optax.GradientTransformation
  opt_state: optax.OptState


def to_optax(source: Source, optimizer_def: OptimizerDef, *, progress=None) -> OptaxCheckpoint:
  """``(params, tx, opt_state)`` continuing the legacy run in plain optax.

  ``tx`` is ``optimizer_def.optax_transform()`` (the legacy numerics) and ``opt_state`` the
  file's optimizer state as its state; ``optax.apply_updates(params, tx.update(grads,
  opt_state, params)[0])`` is then the legacy ``apply_gradient``.

  Args:
    source: a path, msgpack bytes or a state dict holding one legacy optimizer.
    optimizer_def: the optimizer that wrote the file, e.g. ``optim.Adam(1e-3)``.
    progress: optional ``callback(bytes_read, total_bytes)`` while a file is read.

  Returns:
    An :class:`OptaxCheckpoint` ``(params, tx, opt_state)`` of ``jax.Array`` leaves.

  Raises:
    CheckpointError: unreadable source, no optimizer in it, or a file that does not fit
      ``optimizer_def`` (the message names the path and, if it can tell, the optimizer the file
      looks like); also for optimizers without an optax transform (WeightNorm, MultiOptimizer).

  Examples:
    >>> import jax.numpy as jnp, optax
    >>> from flax import serialization
    >>> import flax_optim_compat as optim
    >>> from flax_optim_compat import convert
    >>> legacy = optim.Momentum(0.1, beta=0.9).create({'w': jnp.ones(2)})
    >>> legacy = legacy.apply_gradient({'w': jnp.ones(2)})
    >>> params, tx, opt_state = convert.to_optax(serialization.to_bytes(legacy),
    ...                                          optim.Momentum(0.1, beta=0.9))
    >>> updates, opt_state = tx.update({'w': jnp.ones(2)}, opt_state, params)
    >>> optax.apply_updates(params, updates)['w']
    Array([0.71, 0.71], dtype=float32)
    >>> legacy.apply_gradient({'w': jnp.ones(2)}).target['w']
    Array([0.71, 0.71], dtype=float32)
  """
  tree, where = _read(source, mode='jax', progress=progress)
  optimizer, _ = _restore(tree, where, optimizer_def)
  del tree
  tx, opt_state = _optax_parts(optimizer)
  return OptaxCheckpoint(optimizer.target, tx, opt_state)


def to_train_state(source: Source, optimizer_def: OptimizerDef, apply_fn=None, *,
                   progress=None) -> flax_train_state.TrainState:
  """A ``flax.training.train_state.TrainState`` continuing the legacy run.

  ``step`` is the legacy step, ``params`` the legacy target, ``tx`` the optimizer's
  ``optax_transform()`` and ``opt_state`` the legacy state as its optax state:
  ``state.apply_gradients(grads=grads)`` is then the legacy ``apply_gradient``.

  Args:
    source: a path, msgpack bytes or a state dict holding one legacy optimizer.
    optimizer_def: the optimizer that wrote the file.
    apply_fn: stored in the TrainState (e.g. ``model.apply``); optional.
    progress: optional ``callback(bytes_read, total_bytes)`` while a file is read.

  Returns:
    The ``TrainState``.

  Raises:
    CheckpointError: as :func:`to_optax`.

  Examples:
    >>> import jax.numpy as jnp
    >>> from flax import serialization
    >>> import flax_optim_compat as optim
    >>> from flax_optim_compat import convert
    >>> legacy = optim.Adam(0.1).create({'w': jnp.ones(2)}).apply_gradient({'w': jnp.ones(2)})
    >>> state = convert.to_train_state(serialization.to_bytes(legacy), optim.Adam(0.1))
    >>> int(state.step), state.params['w'].round(4)
    (1, Array([0.9, 0.9], dtype=float32))
  """
  tree, where = _read(source, mode='jax', progress=progress)
  optimizer, _ = _restore(tree, where, optimizer_def)
  del tree
  tx, opt_state = _optax_parts(optimizer)
  return flax_train_state.TrainState(step=optimizer.state.step, apply_fn=apply_fn,
                                     params=optimizer.target, tx=tx, opt_state=opt_state)


def _check_new_output(path: str) -> str:
  path = os.path.abspath(os.fspath(path))
  if os.path.lexists(path):
    raise CheckpointError(f'{path!r} already exists; choose a new output path (nothing was '
                          'overwritten).')
  parent = os.path.dirname(path)
  if not os.path.isdir(parent):
    raise CheckpointError(f'the output directory {parent!r} does not exist.')
  return path


def to_orbax(source: Source, optimizer_def: OptimizerDef, directory: Union[str, os.PathLike],
             *, progress=None) -> flax_train_state.TrainState:
  """Writes the :func:`to_train_state` of ``source`` as an orbax checkpoint in ``directory``.

  The checkpoint holds ``{'step', 'params', 'opt_state'}`` (the TrainState's state dict); plain
  orbax restores it, e.g. ``ocp.StandardCheckpointer().restore(directory, template)`` with
  ``template`` a freshly created TrainState (see the example), or without a template as nested
  dicts. It is written to a temporary directory next to ``directory`` and renamed when
  complete; ``directory`` must not exist.

  Args:
    source: a path, msgpack bytes or a state dict holding one legacy optimizer.
    optimizer_def: the optimizer that wrote the file.
    directory: the orbax checkpoint directory to create.
    progress: optional ``callback(bytes_read, total_bytes)`` while a file is read.

  Returns:
    The ``TrainState`` that was written.

  Raises:
    CheckpointError: as :func:`to_optax`, or ``directory`` exists.

  Examples:
    >>> import os, tempfile, jax.numpy as jnp
    >>> import orbax.checkpoint as ocp
    >>> from flax import serialization
    >>> import flax_optim_compat as optim
    >>> from flax_optim_compat import convert
    >>> legacy = optim.Adam(0.1).create({'w': jnp.ones(2)}).apply_gradient({'w': jnp.ones(2)})
    >>> out = os.path.join(tempfile.mkdtemp(), 'orbax')
    >>> _ = convert.to_orbax(serialization.to_bytes(legacy), optim.Adam(0.1), out)
    >>> restored = ocp.StandardCheckpointer().restore(out)
    >>> int(restored['step'])
    1
    >>> print(restored['params']['w'].round(4))
    [0.9 0.9]
  """
  import orbax.checkpoint as ocp  # optional dependency: only this function needs it

  directory = _check_new_output(directory)
  state = to_train_state(source, optimizer_def, progress=progress)
  tmp_parent = tempfile.mkdtemp(prefix=f'.{os.path.basename(directory)}.', suffix='.tmp',
                                dir=os.path.dirname(directory))
  try:
    tmp = os.path.join(tmp_parent, 'checkpoint')
    with ocp.StandardCheckpointer() as checkpointer:
      checkpointer.save(tmp, serialization.to_state_dict(state))
      checkpointer.wait_until_finished()
    os.replace(tmp, directory)
  finally:
    shutil.rmtree(tmp_parent, ignore_errors=True)
  return state


# ----------------------------------------------------------------------------- back to legacy


def _optax_count(opt_state) -> Optional[Any]:
  for key_path, leaf in jax.tree_util.tree_flatten_with_path(opt_state)[0]:
    last = key_path[-1] if key_path else None
    if getattr(last, 'name', None) == 'count':
      return leaf
  return None


def _legacy_param_states(opt_def: OptimizerDef, params, opt_state, step):
  """The legacy ``param_states`` whose ``optax_state`` is ``opt_state``.

  ``optax_state`` only moves arrays between the two layouts (one optax leaf per legacy leaf,
  the optax counts from ``step``), so it is linear in the float leaves and its transpose is its
  inverse; the result is checked by mapping it forward again.
  """
  template = jax.eval_shape(opt_def.init_state, params)
  leaves, treedef = jax.tree_util.tree_flatten(template.param_states)
  state_step = jnp.asarray(step, jnp.int32)

  def forward(float_leaves):
    full = treedef.unflatten(float_leaves)
    out = opt_def.optax_state(params, OptimizerState(state_step, full))
    return [x for x in jax.tree_util.tree_leaves(out) if _tree.is_inexact(x)]

  given = [x for x in jax.tree_util.tree_leaves(opt_state) if _tree.is_inexact(x)]
  expected = jax.eval_shape(forward, leaves)
  shapes = [(tuple(e.shape), np.dtype(e.dtype)) for e in expected]
  if [(tuple(np.shape(g)), np.dtype(jnp.result_type(g))) for g in given] != shapes:
    raise CheckpointError(
        f'opt_state does not fit {type(opt_def).__name__} over these params: its float leaves '
        f'are {[(tuple(np.shape(g)), jnp.result_type(g).name) for g in given]}, '
        f'{type(opt_def).__name__}.optax_transform().init(params) has '
        f'{[(s, d.name) for s, d in shapes]}.')
  zeros = [jnp.zeros(x.shape, x.dtype) for x in leaves]
  (legacy_leaves,) = jax.linear_transpose(forward, zeros)(
      [jnp.asarray(g) for g in given])
  again = forward(legacy_leaves)
  for a, g in zip(again, given):
    if not np.array_equal(np.asarray(a), np.asarray(g)):
      raise CheckpointError(f'opt_state cannot be expressed as a {type(opt_def).__name__} '
                            'legacy state (mapping it back does not reproduce it).')
  return treedef.unflatten(legacy_leaves)


def to_legacy(params, opt_state, optimizer_def: OptimizerDef, *, step=None,
              path: Optional[Union[str, os.PathLike]] = None) -> dict:
  """A legacy ``{'target', 'state'}`` state dict (and msgpack file) from params and optax state.

  The inverse of :func:`to_optax`: ``opt_state`` is a state of
  ``optimizer_def.optax_transform()`` (e.g. a TrainState's ``opt_state``); the result is what
  legacy ``Optimizer.state_dict()`` writes, so flax 0.5.3 (and this package) restore it with
  ``flax.serialization.from_bytes(optimizer, data)`` for old evaluation tooling.

  Args:
    params: the params (the legacy ``target``).
    opt_state: the optax state of ``optimizer_def.optax_transform()`` for ``params``.
    optimizer_def: the legacy optimizer def, e.g. ``optim.Adam(1e-3)``.
    step: the legacy step; default: the ``count`` in ``opt_state`` (needed when it has none,
      e.g. GradientDescent).
    path: if given, the state dict is also written there as msgpack (to a temporary file
      renamed when complete; the path must not exist).

  Returns:
    The legacy state dict (nested dicts of arrays).

  Raises:
    CheckpointError: ``opt_state`` does not fit the optimizer and params, no step, or ``path``
      exists.

  Examples:
    >>> import jax.numpy as jnp
    >>> import flax_optim_compat as optim
    >>> from flax_optim_compat import convert
    >>> params = {'w': jnp.ones(2)}
    >>> tx = optim.Adam(0.1).optax_transform()
    >>> opt_state = tx.init(params)
    >>> sd = convert.to_legacy(params, opt_state, optim.Adam(0.1))
    >>> sorted(sd['state']['param_states']['w']), int(sd['state']['step'])
    (['grad_ema', 'grad_sq_ema'], 0)
  """
  if not isinstance(optimizer_def, OptimizerDef):
    raise TypeError(f'optimizer_def must be an OptimizerDef, not {type(optimizer_def).__name__}.')
  if path is not None:
    path = _check_new_output(path)
  if step is None:
    step = _optax_count(opt_state)
    if step is None:
      raise CheckpointError(f'opt_state of {type(optimizer_def).__name__} has no `count`; '
                            'pass step= (e.g. the TrainState step).')
  step = np.asarray(step)
  if step.ndim or step.dtype.kind not in 'iu':
    raise CheckpointError(f'step must be an integer scalar, not {step.dtype}{list(step.shape)}.')
  params = jax.tree_util.tree_map(jnp.asarray, params)
  try:
    param_states = _legacy_param_states(optimizer_def, params, opt_state, step)
  except NotImplementedError as e:
    raise CheckpointError(f'{type(optimizer_def).__name__} has no optax state: {e}') from None
  state = OptimizerState(jnp.asarray(step, jnp.int32), param_states)
  state_dict = optimizer_def.state_dict(params, state)
  if path is not None:
    write_msgpack(path, state_dict)
  return state_dict


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
  f.write(_ext_header(_EXT_NDARRAY, len(head) + n))
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


def write_msgpack(path: Union[str, os.PathLike], state_dict: dict) -> None:
  """Writes ``state_dict`` as flax msgpack, leaf by leaf, to a temp file renamed when complete.

  The bytes are those of ``flax.serialization.msgpack_serialize(state_dict)``, without holding
  the whole encoding in memory. ``path`` must not exist.

  Raises:
    CheckpointError: ``path`` exists or its directory does not.
  """
  path = _check_new_output(path)
  fd, tmp = tempfile.mkstemp(prefix=f'.{os.path.basename(path)}.', suffix='.tmp',
                             dir=os.path.dirname(path))
  try:
    with os.fdopen(fd, 'wb') as f:
      _write_tree(f, msgpack.Packer(use_bin_type=True, strict_types=True), state_dict)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; give the file the usual mode
    os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp):
      os.remove(tmp)
    raise


# ----------------------------------------------------------------------------- diff


def _read_any(source: Source) -> Tuple[dict, str]:
  """A state dict from msgpack (file, dir, bytes), an orbax directory, or a dict."""
  if isinstance(source, (str, os.PathLike)) and os.path.isdir(source) and _orbax_markers(
      os.fspath(source)):
    return _read_orbax(os.fspath(source)), repr(os.fspath(source))
  return _read(source)


def _read_orbax(directory: str) -> dict:
  import orbax.checkpoint as ocp  # optional dependency: only orbax inputs need it
  try:
    with ocp.StandardCheckpointer() as checkpointer:
      restored = checkpointer.restore(os.path.abspath(directory))
  except Exception as e:  # pylint: disable=broad-except
    raise CheckpointError(f'{directory!r}: orbax cannot restore it ({type(e).__name__}: '
                          f'{str(e).splitlines()[0] if str(e) else ""}).') from None
  return serialization.to_state_dict(restored)


@dataclasses.dataclass
class DiffResult:
  """Per-leaf differences found by :func:`diff`.

  Attributes:
    leaves: ``[(path, max_abs, max_rel), ...]`` for leaves present in both with the same shape;
      ``max_rel`` is ``max|a - b| / max(max|a|, max|b|)`` (0 when both are zero).
    only_a: paths only in ``a``.
    only_b: paths only in ``b``.
    mismatched: ``[(path, description), ...]`` for leaves with different shapes, dtypes or kinds.
  """
  leaves: List[Tuple[str, float, float]]
  only_a: List[str]
  only_b: List[str]
  mismatched: List[Tuple[str, str]]

  @property
  def max_abs(self) -> float:
    return max((x[1] for x in self.leaves), default=0.0)

  @property
  def max_rel(self) -> float:
    return max((x[2] for x in self.leaves), default=0.0)

  def same(self, rtol: float = 0.0) -> bool:
    """No structural difference and every leaf's ``max_rel <= rtol``."""
    return (not self.only_a and not self.only_b and not self.mismatched
            and all(rel <= rtol for _, _, rel in self.leaves))


def _as_train_state_dict(tree: dict, where: str, optimizer_def: OptimizerDef) -> dict:
  if _find_optimizers(tree):
    optimizer, _ = _restore(tree, where, optimizer_def)
    tx, opt_state = _optax_parts(optimizer)
    return serialization.to_state_dict({'step': optimizer.state.step,
                                        'params': optimizer.target, 'opt_state': opt_state})
  return tree


def diff(a: Source, b: Source, optimizer_def: Optional[OptimizerDef] = None) -> DiffResult:
  """Per-leaf max abs / rel differences of two checkpoints.

  Each side is a legacy or converted msgpack checkpoint (path or bytes), an orbax directory,
  or a state dict. With ``optimizer_def``, legacy sides are first converted to the
  ``{'step', 'params', 'opt_state'}`` layout of :func:`to_train_state`, so a legacy file
  compares with its converted continuation; without it, trees compare as stored.

  Args:
    a: the first checkpoint.
    b: the second checkpoint.
    optimizer_def: the optimizer of the legacy side(s), to compare across layouts.

  Returns:
    A :class:`DiffResult`; ``.same(rtol)`` says whether they agree within ``rtol``.

  Examples:
    >>> import numpy as np
    >>> from flax_optim_compat import convert
    >>> r = convert.diff({'w': np.array([1.0, 2.0])}, {'w': np.array([1.0, 2.5])})
    >>> r.leaves, r.same(rtol=0.1), r.same(rtol=0.2)
    ([('/w', 0.5, 0.2)], False, True)
  """
  tree_a, where_a = _read_any(a)
  tree_b, where_b = _read_any(b)
  if optimizer_def is not None:
    tree_a = _as_train_state_dict(tree_a, where_a, optimizer_def)
    tree_b = _as_train_state_dict(tree_b, where_b, optimizer_def)
  leaves_a = {_tree.join_keys(p): v for p, v in _leaves(tree_a)}
  leaves_b = {_tree.join_keys(p): v for p, v in _leaves(tree_b)}
  result = DiffResult([], [p for p in leaves_a if p not in leaves_b],
                      [p for p in leaves_b if p not in leaves_a], [])
  for path, va in leaves_a.items():
    if path not in leaves_b:
      continue
    vb = leaves_b[path]
    if isinstance(va, dict) and isinstance(vb, dict) and not va and not vb:
      continue
    if va is None or vb is None or isinstance(va, dict) or isinstance(vb, dict):
      if not (va is None and vb is None):
        result.mismatched.append((path, f'{_kind(va)} vs {_kind(vb)}'))
      continue
    xa, xb = np.asarray(va), np.asarray(vb)
    if xa.shape != xb.shape or xa.dtype != xb.dtype:
      result.mismatched.append((path, f'{xa.dtype.name}{list(xa.shape)} vs '
                                      f'{xb.dtype.name}{list(xb.shape)}'))
      continue
    if xa.size == 0:
      result.leaves.append((path, 0.0, 0.0))
      continue
    fa, fb = xa.astype(np.float64), xb.astype(np.float64)
    abs_diff = float(np.max(np.abs(fa - fb)))
    scale = float(max(np.max(np.abs(fa)), np.max(np.abs(fb))))
    if np.isnan(fa).any() or np.isnan(fb).any():
      same_nan = np.array_equal(np.isnan(fa), np.isnan(fb))
      finite = ~(np.isnan(fa) | np.isnan(fb))
      abs_diff = float(np.max(np.abs(fa - fb)[finite], initial=0.0)) if same_nan else float('inf')
      scale = float(np.max(np.abs(np.where(finite, fa, 0)), initial=0.0))
    rel = abs_diff / scale if scale else (0.0 if abs_diff == 0 else float('inf'))
    result.leaves.append((path, abs_diff, rel))
  return result


def _kind(value) -> str:
  if value is None:
    return 'None'
  if isinstance(value, dict):
    return 'a dict' if value else 'an empty dict'
  return f'{np.asarray(value).dtype.name}{list(np.shape(value))}'
