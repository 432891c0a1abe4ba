"""Checkpoint outputs written to a temporary path next to them and published when complete."""
import os
import shutil
import tempfile
from typing import Callable

from ._codec import CheckpointError


def check_new(path) -> str:
  """The absolute ``path``; CheckpointError if it exists or its directory does not."""
  path = os.path.abspath(os.fspath(path))
  if os.path.lexists(path):
    raise CheckpointError(f'{path!r} already exists; choose a new output path (nothing was '
                          'overwritten).')
  parent = os.path.dirname(path)
  if not os.path.isdir(parent):
    raise CheckpointError(f'the output directory {parent!r} does not exist.')
  return path


def write_file(path, write: Callable) -> None:
  """Calls ``write(f)`` on a temporary file next to ``path``, renamed to ``path`` when complete."""
  path = check_new(path)
  fd, tmp = tempfile.mkstemp(prefix=f'.{os.path.basename(path)}.', suffix='.tmp',
                             dir=os.path.dirname(path))
  try:
    with os.fdopen(fd, 'wb') as f:
      write(f)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; give the file the usual mode
    os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp):
      os.remove(tmp)
    raise


def write_directory(directory, write: Callable) -> None:
  """Calls ``write(tmp)`` for a path in a temporary directory, renamed to ``directory``."""
  directory = check_new(directory)
  tmp_parent = tempfile.mkdtemp(prefix=f'.{os.path.basename(directory)}.', suffix='.tmp',
                                dir=os.path.dirname(directory))
  try:
    tmp = os.path.join(tmp_parent, 'checkpoint')
    write(tmp)
    os.replace(tmp, directory)
  finally:
    shutil.rmtree(tmp_parent, ignore_errors=True)
