"""Orbax checkpoint directories: recognised, read (values or metadata) and written.

orbax is an optional dependency, imported by the functions that need it.
"""
import os

import jax
import numpy as np
from flax import serialization

from . import _outputs
from ._codec import CheckpointError

_MARKERS = frozenset({'_METADATA', '_CHECKPOINT_METADATA', 'manifest.ocdbt', '_sharding',
                      'checkpoint', 'd'})


def is_orbax_dir(path: str) -> bool:
  """Whether the directory ``path`` holds files orbax writes."""
  names = set(os.listdir(path))
  return bool(names & _MARKERS) or any(n.startswith('ocdbt') for n in names)


def read(directory: str) -> dict:
  """The state dict in an orbax checkpoint directory (NumPy/jax leaves)."""
  import orbax.checkpoint as ocp  # optional dependency: only orbax inputs need it
  try:
    with ocp.StandardCheckpointer() as checkpointer:
      restored = checkpointer.restore(os.path.abspath(directory))
  except Exception as e:  # pylint: disable=broad-except
    raise CheckpointError(f'{directory!r}: orbax cannot restore it ({type(e).__name__}: '
                          f'{str(e).splitlines()[0] if str(e) else ""}).') from None
  return serialization.to_state_dict(restored)


def _plain(node):
  """Orbax's metadata tree as a state dict of ``jax.ShapeDtypeStruct`` leaves."""
  if isinstance(node, dict):
    return {str(k): _plain(v) for k, v in node.items()}
  if isinstance(node, (list, tuple)):
    return {str(i): _plain(v) for i, v in enumerate(node)}
  shape, dtype = getattr(node, 'shape', None), getattr(node, 'dtype', None)
  if shape is not None and dtype is not None:
    return jax.ShapeDtypeStruct(tuple(shape), np.dtype(dtype))
  return node


def metadata(checkpointer, directory) -> dict:
  """What ``checkpointer`` wrote in ``directory``: keys, shapes and dtypes, no array data."""
  tree = checkpointer.metadata(directory)
  tree = getattr(tree, 'item_metadata', tree)  # orbax >= 0.9 wraps the tree
  return _plain(getattr(tree, 'tree', tree))


def write(directory, state_dict: dict) -> None:
  """Writes ``state_dict`` as a new orbax checkpoint ``directory`` (published when complete)."""
  import orbax.checkpoint as ocp  # optional dependency: only orbax outputs need it

  def save(tmp):
    with ocp.StandardCheckpointer() as checkpointer:
      checkpointer.save(tmp, state_dict)
      checkpointer.wait_until_finished()

  _outputs.write_directory(directory, save)
