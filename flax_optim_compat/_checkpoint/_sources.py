"""What a checkpoint source is (a msgpack file, a directory of them, bytes, a dict, an orbax
directory) and its state dict."""
import os
import re
from typing import List, Mapping, Tuple

from flax import serialization

from . import _codec
from . import _orbax_io
from ._codec import CheckpointError

_CHECKPOINT_FILE = re.compile(r'^(.*?)_?(\d+)$')


def latest_checkpoint(directory: str) -> str:
  """The latest flax checkpoint in ``directory`` (``checkpoint_3`` < ``checkpoint_10``): a
  msgpack file, or an orbax directory (flax's ``save_checkpoint`` writes those by default
  today, also for legacy code running unchanged on this package); ``directory`` itself when it
  is an orbax checkpoint."""
  if _orbax_io.is_orbax_dir(directory):
    return directory
  candidates = []
  for name in os.listdir(directory):
    match = _CHECKPOINT_FILE.match(name)
    full = os.path.join(directory, name)
    if match and not name.startswith('.') and 'tmp' not in name and (
        os.path.isfile(full) or (os.path.isdir(full) and _orbax_io.is_orbax_dir(full))):
      candidates.append((int(match.group(2)), name))
  if not candidates:
    raise CheckpointError(f'{directory!r} holds no checkpoint: no `checkpoint_<N>` file or '
                          f'orbax directory (found {sorted(os.listdir(directory))[:8]}).')
  return os.path.join(directory, max(candidates)[1])


def checkpoint_path(path) -> str:
  """What a path source reads: the file, an orbax directory, or a directory's latest of them."""
  path = os.fspath(path)
  if not os.path.exists(path):
    raise CheckpointError(f'{path!r} does not exist.')
  return latest_checkpoint(path) if os.path.isdir(path) else path


def read(source, mode: str = 'numpy', progress=None) -> Tuple[dict, str]:
  """``(state dict, description of the source for messages)`` of a source; ``mode`` as
  :func:`_codec.decode` (an orbax directory is read whole, by orbax)."""
  tree, where, _ = read_named(source, mode, progress)
  return tree, where


def read_named(source, mode: str = 'numpy', progress=None) -> Tuple[dict, str, str]:
  """:func:`read`, and the name of what was read: the file (for a directory, its latest
  checkpoint), ``'the bytes'`` or ``'the state dict'``."""
  if isinstance(source, Mapping):
    try:
      tree = serialization.to_state_dict(dict(source))
    except (ValueError, TypeError) as e:
      detail = (str(e).splitlines() or [''])[0][:200]
      raise CheckpointError(f'the state dict cannot be read ({detail}).') from None
    return tree, 'the state dict', 'the state dict'
  if isinstance(source, (bytes, bytearray, memoryview)):
    if not len(source):
      raise CheckpointError('the bytes are empty: not a checkpoint.')
    return _codec.decode_bytes(source, 'the bytes', mode=mode), 'the bytes', 'the bytes'
  path = checkpoint_path(source)
  if os.path.isdir(path):
    return _orbax_io.read(path), repr(path), path
  size = os.path.getsize(path)
  if size == 0:
    raise CheckpointError(f'{path!r} is empty (0 bytes): not a checkpoint.')
  with open(path, 'rb') as f:
    tree = _codec.decode(f, repr(path), mode=mode, total=size, progress=progress)
  return tree, repr(path), path


def read_meta(source, progress=None) -> Tuple[dict, str, List[str]]:
  """``(state dict, name of what was read, notes)`` without reading big arrays: a msgpack
  file's in 'meta' mode (:func:`_codec.decode`), an orbax directory's from its metadata, its
  data files checked (:func:`_orbax_io.read_meta`, whose notes say what was checked)."""
  if isinstance(source, (str, os.PathLike)):
    path = checkpoint_path(source)
    if os.path.isdir(path):
      tree, notes = _orbax_io.read_meta(path)
      return tree, path, notes
  tree, _, name = read_named(source, mode='meta', progress=progress)
  return tree, name, []
