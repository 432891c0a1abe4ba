"""Orbax checkpoint directories: recognised, read and written (orbax's metadata tree is read by
``_state_check``'s one rule, which the strict restore uses too).

orbax is an optional dependency, imported by the functions that need it.
"""
import contextlib
import inspect
import logging
import os
from typing import Dict, List, Tuple
from urllib.parse import unquote

import jax
import numpy as np
from flax import serialization

from .. import _state_check
from . import _codec
from . import _outputs
from ._codec import CheckpointError

_WRITE_BYTES_AT_ONCE = 64 << 20
_MARKERS = frozenset({'_METADATA', '_CHECKPOINT_METADATA', 'manifest.ocdbt', '_sharding',
                      'checkpoint', 'd'})


def is_orbax_dir(path: str) -> bool:
  """Whether the directory ``path`` holds files orbax writes."""
  names = set(os.listdir(path))
  return bool(names & _MARKERS) or any(n.startswith('ocdbt') for n in names)


def _typed_scalars(restored, metadata):
  """``restored`` with each Python number that orbax's metadata says it saved from a NumPy
  scalar (``ScalarMetadata``, dtype ``int32``) given that type back: orbax restores
  ``np.int32(4)`` as the Python int ``4``, and a carried ``epoch`` would not come back as it was
  written (msgpack keeps ``np.int32``)."""
  if isinstance(restored, dict) and isinstance(metadata, dict):
    return {k: _typed_scalars(v, metadata.get(k)) for k, v in restored.items()}
  if isinstance(restored, (list, tuple)) and isinstance(metadata, (list, tuple)):
    if len(restored) != len(metadata):
      return restored
    return type(restored)(_typed_scalars(v, m) for v, m in zip(restored, metadata))
  dtype = getattr(metadata, 'dtype', None)
  if (isinstance(restored, (int, float, complex)) and dtype is not None
      and tuple(getattr(metadata, 'shape', ()) or ()) == ()):
    return np.dtype(dtype).type(restored)
  return restored


def read(directory: str) -> dict:
  """The state dict in an orbax checkpoint directory (NumPy/jax leaves; NumPy scalars as the
  type they were saved from)."""
  import orbax.checkpoint as ocp  # optional dependency: only orbax inputs need it
  path = os.path.abspath(directory)
  try:
    with ocp.StandardCheckpointer() as checkpointer:
      restored = checkpointer.restore(path)
      restored = _typed_scalars(restored, _state_check.orbax_metadata_tree(checkpointer, path))
  except Exception as e:  # pylint: disable=broad-except
    raise CheckpointError(f'{directory!r}: orbax cannot restore it '
                          f'({_codec.cause_line(e)}).') from None
  return serialization.to_state_dict(restored)


def _write_limits(ocp, state_dict) -> dict:
  """The byte limits of orbax's writers for ``state_dict`` (PyTreeCheckpointHandler arguments).

  Arrays go to orbax's writers a bounded number of bytes at a time (a window of an eighth of
  the checkpoint, between 16 and 64 MB): StandardCheckpointer copies them all to host memory
  first (1.7x the file). A leaf is written whole, and orbax refuses a leaf of as many bytes as
  its limit or more (``requested_bytes >= limit``): the window is at least the largest leaf
  plus 1 MiB (which also absorbs the GB -> bytes rounding). Older orbax-checkpoint releases
  (0.11.13, the floor) have no device-to-host limit (``save_device_host_concurrent_gb``):
  there only the writes are bounded.
  (A limit of a few KB leaves orbax's waiting writes to be collected after its event loop
  closed: 'Event loop is closed' on stderr.)
  """
  sizes = [getattr(x, 'nbytes', 0) for x in jax.tree_util.tree_leaves(state_dict)]
  window = min(_WRITE_BYTES_AT_ONCE, max(_WRITE_BYTES_AT_ONCE // 4, sum(sizes) // 8))
  limit_gb = max(window, max(sizes, default=0) + (1 << 20)) / 1e9
  limits = {'save_concurrent_gb': limit_gb}
  if 'save_device_host_concurrent_gb' in inspect.signature(
      ocp.PyTreeCheckpointHandler).parameters:
    limits['save_device_host_concurrent_gb'] = limit_gb
  return limits


def write(directory, state_dict: dict) -> None:
  """Writes ``state_dict`` as a new orbax checkpoint ``directory`` (published when complete).

  Raises:
    CheckpointError: ``directory`` exists, the disk is full, or orbax fails (one line).
  """
  import orbax.checkpoint as ocp  # optional dependency: only orbax outputs need it
  checkpointers = []

  limits = _write_limits(ocp, state_dict)

  def save(tmp):
    checkpointer = ocp.AsyncCheckpointer(ocp.PyTreeCheckpointHandler(**limits))
    checkpointers.append(checkpointer)
    checkpointer.save(tmp, args=ocp.args.PyTreeSave(state_dict))
    checkpointer.wait_until_finished()
    checkpointer.close()

  def stop():
    # orbax writes from its own threads: they must be done before the directory is removed.
    for checkpointer in checkpointers:
      for step in (checkpointer.wait_until_finished, checkpointer.close):
        try:
          step()
        except Exception:  # pylint: disable=broad-except  # the save's own error is raised
          pass

  # orbax logs its writer threads' errors (a full disk: a traceback per thread) through absl's
  # logger before raising them here; the error raised below says it in one line.
  try:
    with _absl_quiet():
      _outputs.write_directory(directory, save, stop)
  except CheckpointError:
    raise
  except Exception as e:  # pylint: disable=broad-except  # orbax and tensorstore raise many types
    if _outputs.is_no_space(e):
      raise _outputs.no_space(os.fspath(directory)) from None
    raise CheckpointError(f'{os.fspath(directory)!r}: orbax could not write it '
                          f'({_codec.cause_line(e)}).') from None


@contextlib.contextmanager
def _absl_quiet():
  """orbax's absl log records held back (the one-line error raised says what they say)."""
  absl_logger = logging.getLogger('absl')
  level = absl_logger.level
  absl_logger.setLevel(logging.CRITICAL)
  try:
    yield
  finally:
    absl_logger.setLevel(level)


# ----------------------------------------------------------------------------- metadata only

def _location(text: str) -> Tuple[str, int]:
  """``(file relative to the checkpoint, end offset)`` of an OCDBT location such as
  ``value:ocdbt.process_0/:d/5b68...:0:1073632`` or ``btreenode::d/4fa2...:0:326``."""
  head, offset, length = text.rsplit(':', 2)
  _, base, relative = head.split(':', 2)
  return unquote(base + relative), int(offset) + int(length)


def _ocdbt_files(directory: str, ts) -> Dict[str, int]:
  """``{file: bytes it must have at least}`` for every file the OCDBT manifest of
  ``directory`` names: its b-tree nodes (read: a few hundred bytes each) and the data files
  their entries point into (not read)."""
  base = ts.KvStore.open(f'file://{os.path.abspath(directory)}/').result()
  manifest = ts.ocdbt.dump(base).result()
  needed: Dict[str, int] = {}

  def visit(node_location: str):
    name, end = _location(node_location)
    needed[name] = max(needed.get(name, 0), end)
    if not os.path.isfile(os.path.join(directory, name)) or (
        os.path.getsize(os.path.join(directory, name)) < end):
      return  # reported below, with the rest
    for entry in ts.ocdbt.dump(base, node_location).result().get('entries', []):
      for value in entry.values():
        if isinstance(value, str) and value.startswith('btreenode:'):
          visit(value)
        elif isinstance(value, str) and value.startswith('value:'):
          name, end = _location(value)
          needed[name] = max(needed.get(name, 0), end)

  for version in manifest.get('versions', [])[-1:]:   # the latest version is what restores
    visit(version['root']['location'])
  return needed


def check_data_files(directory: str) -> str:
  """Checks that the data files ``directory``'s OCDBT manifest names are there and at least as
  long as the bytes it references in them (their contents are not read); returns a note saying
  what was checked, or what was not.

  Raises:
    CheckpointError: a file it names is missing or shorter than referenced (one line naming
      it: plain orbax cannot restore the checkpoint).
  """
  names = os.listdir(directory)
  if 'manifest.ocdbt' not in names:
    per_process = sorted(n for n in names if n.startswith('ocdbt.process_'))
    if per_process:
      raise CheckpointError(f'{directory!r}: its manifest.ocdbt is missing (it has '
                            f'{per_process[0]}/); plain orbax cannot restore it.')
    return ('orbax data files not checked: not an OCDBT checkpoint (no manifest.ocdbt), only '
            'its metadata was read')
  import tensorstore as ts  # orbax's own dependency: only orbax inputs need it
  if not hasattr(getattr(ts, 'ocdbt', None), 'dump'):
    return ('orbax data files not checked: this tensorstore has no ocdbt.dump to read the '
            'manifest; only the metadata was read')
  try:
    needed = _ocdbt_files(directory, ts)
  except Exception as e:  # pylint: disable=broad-except  # tensorstore raises ValueError & co.
    raise CheckpointError(f'{directory!r}: its OCDBT manifest cannot be read '
                          f'({_codec.cause_line(e)}); plain orbax cannot restore it.') from None
  for name, end in sorted(needed.items()):
    path = os.path.join(directory, name)
    if not os.path.isfile(path):
      raise CheckpointError(f'{directory!r}: the data file {name!r} its OCDBT manifest names is '
                            'missing; plain orbax cannot restore it.')
    size = os.path.getsize(path)
    if size < end:
      raise CheckpointError(f'{directory!r}: the data file {name!r} has {size:,} bytes, its '
                            f'OCDBT manifest references {end:,}: truncated; plain orbax cannot '
                            'restore it.')
  return (f'orbax data: every file its OCDBT manifest names ({len(needed)}) is present and at '
          'least as long as referenced (sizes checked; contents not read or checksummed)')


def _small_value(directory: str, meta, zarr3: bool, ts):
  """The value of a small leaf (a step, a count, a carried scalar), read through tensorstore."""
  name = getattr(meta, 'name', None)
  if os.path.isfile(os.path.join(directory, 'manifest.ocdbt')):
    kvstore = {'driver': 'ocdbt', 'base': f'file://{os.path.abspath(directory)}/',
               'path': f'{name}/'}
  else:
    kvstore = {'driver': 'file', 'path': os.path.join(os.path.abspath(directory), name, '')}
  array = ts.open({'driver': 'zarr3' if zarr3 else 'zarr', 'kvstore': kvstore}).result()
  value = np.asarray(array.read().result(), dtype=np.dtype(meta.dtype))
  return value[()] if type(meta).__name__ == 'ScalarMetadata' else value


def read_meta(directory: str) -> Tuple[dict, List[str]]:
  """``(state dict, notes)`` of an orbax checkpoint from its metadata: arrays over
  ``_codec.SMALL_LEAF_BYTES`` as :class:`_codec.LeafMeta` (shape and dtype, never read),
  smaller ones (steps, counts, scalars) read; the data files checked
  (:func:`check_data_files`, whose note is the first).

  Raises:
    CheckpointError: orbax cannot read the metadata, or the data files are damaged.
  """
  import orbax.checkpoint as ocp  # optional dependency: only orbax inputs need it
  import tensorstore as ts  # orbax's own dependency
  path = os.path.abspath(directory)
  notes = [check_data_files(directory)]
  try:
    with _absl_quiet(), ocp.StandardCheckpointer() as checkpointer:
      step_metadata = checkpointer.metadata(path)
    item = getattr(step_metadata, 'item_metadata', step_metadata)
    zarr3 = bool(getattr(item, 'use_zarr3', False))
    tree = getattr(item, 'tree', item)
    if tree is None:
      raise ValueError('no tree metadata (_METADATA)')
  except Exception as e:  # pylint: disable=broad-except
    raise CheckpointError(f'{directory!r}: orbax cannot read its metadata '
                          f'({_codec.cause_line(e)}).') from None

  def leaf(meta, where):
    shape, dtype = getattr(meta, 'shape', None), getattr(meta, 'dtype', None)
    if shape is None or dtype is None:
      return meta   # None, an empty container, a string: as orbax keeps them
    info = _codec.LeafMeta(tuple(shape), np.dtype(dtype))
    if info.nbytes > _codec.SMALL_LEAF_BYTES:
      return info
    try:
      return _small_value(directory, meta, zarr3, ts)
    except Exception as e:  # pylint: disable=broad-except
      raise CheckpointError(f'{directory!r}: the leaf {where} cannot be read '
                            f'({_codec.cause_line(e)}).') from None

  def walk(node, where):
    if isinstance(node, dict):
      return {str(k): walk(v, f'{where}/{k}') for k, v in node.items()}
    if isinstance(node, (list, tuple)):
      return {str(i): walk(v, f'{where}/{i}') for i, v in enumerate(node)}
    return leaf(node, where or '/')

  return walk(tree, ''), notes
