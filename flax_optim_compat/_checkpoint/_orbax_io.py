"""Orbax checkpoint directories: recognised, read and written (the strict restore reads their
metadata itself: ``_state_check.orbax_metadata``).

orbax is an optional dependency, imported by the functions that need it.
"""
import inspect
import logging
import os

import jax
import numpy as np
from flax import serialization

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


def _metadata_tree(checkpointer, directory: str):
  """orbax's metadata tree of ``directory`` (keys, shapes, dtypes; no array data)."""
  tree = checkpointer.metadata(directory)
  tree = getattr(tree, 'item_metadata', tree)  # orbax >= 0.9 wraps the tree
  return getattr(tree, 'tree', tree)


def read(directory: str) -> dict:
  """The state dict in an orbax checkpoint directory (NumPy/jax leaves; NumPy scalars as the
  type they were saved from)."""
  import orbax.checkpoint as ocp  # optional dependency: only orbax inputs need it
  path = os.path.abspath(directory)
  try:
    with ocp.StandardCheckpointer() as checkpointer:
      restored = checkpointer.restore(path)
      restored = _typed_scalars(restored, _metadata_tree(checkpointer, path))
  except Exception as e:  # pylint: disable=broad-except
    raise CheckpointError(f'{directory!r}: orbax cannot restore it ({type(e).__name__}: '
                          f'{str(e).splitlines()[0] if str(e) else ""}).') from None
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
  absl_logger = logging.getLogger('absl')
  level = absl_logger.level
  absl_logger.setLevel(logging.CRITICAL)
  try:
    _outputs.write_directory(directory, save, stop)
  except CheckpointError:
    raise
  except Exception as e:  # pylint: disable=broad-except  # orbax and tensorstore raise many types
    if _outputs.is_no_space(e):
      raise _outputs.no_space(os.fspath(directory)) from None
    detail = str(e).splitlines()[0] if str(e) else ''
    raise CheckpointError(f'{os.fspath(directory)!r}: orbax could not write it '
                          f'({type(e).__name__}: {detail}).') from None
  finally:
    absl_logger.setLevel(level)
