"""What a checkpoint source is (a msgpack file, a directory of them, bytes, a dict, an orbax
directory) and its state dict."""
import os
import re
from typing import Mapping, Tuple

from flax import serialization

from . import _codec
from . import _orbax_io
from ._codec import CheckpointError

_CHECKPOINT_FILE = re.compile(r'^(.*?)_?(\d+)$')


def latest_file(directory: str) -> str:
  """The latest flax checkpoint file in ``directory`` (``checkpoint_3`` < ``checkpoint_10``)."""
  if _orbax_io.is_orbax_dir(directory):
    raise CheckpointError(
        f'{directory!r} is an orbax checkpoint directory, but a legacy msgpack checkpoint (a '
        'file, or a directory of flax `checkpoint_<N>` files) was expected.')
  candidates = []
  for name in os.listdir(directory):
    match = _CHECKPOINT_FILE.match(name)
    full = os.path.join(directory, name)
    if match and not name.startswith('.') and 'tmp' not in name:
      if os.path.isdir(full) and _orbax_io.is_orbax_dir(full):
        raise CheckpointError(
            f'{full!r} is an orbax checkpoint directory, but a legacy msgpack checkpoint was '
            'expected (flax wrote it with orbax checkpointing on).')
      if os.path.isfile(full):
        candidates.append((int(match.group(2)), name))
  if not candidates:
    raise CheckpointError(f'{directory!r} holds no checkpoint: no `checkpoint_<N>` file '
                          f'(found {sorted(os.listdir(directory))[:8]}).')
  return os.path.join(directory, max(candidates)[1])


def msgpack_file(path) -> str:
  """The msgpack file a path source reads: the path, or the latest file of a directory."""
  path = os.fspath(path)
  if not os.path.exists(path):
    raise CheckpointError(f'{path!r} does not exist.')
  return latest_file(path) if os.path.isdir(path) else path


def read(source, mode: str = 'numpy', progress=None) -> Tuple[dict, str]:
  """``(state dict, description of the source)`` of a msgpack source; ``mode`` as
  :func:`_codec.decode`."""
  if isinstance(source, Mapping):
    return serialization.to_state_dict(dict(source)), 'the state dict'
  if isinstance(source, (bytes, bytearray, memoryview)):
    return _codec.decode_bytes(source, 'the bytes', mode=mode), 'the bytes'
  path = msgpack_file(source)
  size = os.path.getsize(path)
  if size == 0:
    raise CheckpointError(f'{path!r} is empty (0 bytes): not a checkpoint.')
  with open(path, 'rb') as f:
    return _codec.decode(f, repr(path), mode=mode, total=size, progress=progress), repr(path)


def read_any(source) -> Tuple[dict, str]:
  """A state dict from msgpack (file, dir, bytes), an orbax directory, or a dict."""
  if isinstance(source, (str, os.PathLike)) and os.path.isdir(source) and _orbax_io.is_orbax_dir(
      os.fspath(source)):
    return _orbax_io.read(os.fspath(source)), repr(os.fspath(source))
  return read(source)
