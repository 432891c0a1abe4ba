"""Checkpoint outputs, published the POSIX way: all or nothing, never over an existing path.

Missing folders above the output are made first (``--out new_ckpts/checkpoint_1000``) and
removed again when the output fails.

A file is written to a temporary file in the output's own directory, flushed and fsynced, then
linked to its name (``link`` fails if the name exists: of two writers exactly one wins) and
the temporary name removed. A directory is written inside a temporary directory next to it and
renamed with ``renameat2(RENAME_NOREPLACE)`` (or, where the kernel or file system lacks it,
``rename``, which cannot replace the non-empty directory another writer published). Whatever
happens (an error, a full disk, Ctrl-C), the temporary file or directory is removed before the
exception leaves; a Ctrl-C that arrives while it is being removed waits until it is, and one
that arrives while the output is being published removes it again (all or nothing).
"""
import contextlib
import ctypes
import errno
import os
import shutil
import signal
import tempfile
import threading
import time
from typing import Callable

from flax import serialization

from . import _codec
from ._codec import CheckpointError

_NO_SPACE = (errno.ENOSPC, errno.EDQUOT)
_RENAME_NOREPLACE = 1


def check_new(path) -> str:
  """The absolute ``path``; CheckpointError if it exists, or if a missing folder above it
  cannot be made (a file stands where a folder should be)."""
  path = os.path.abspath(os.fspath(path))
  if os.path.lexists(path):
    raise CheckpointError(_exists(path))
  parent = ancestor = os.path.dirname(path)
  while not os.path.isdir(ancestor):
    if os.path.lexists(ancestor) or os.path.dirname(ancestor) == ancestor:
      raise CheckpointError(f'cannot make the output directory {parent!r}: {ancestor!r} is '
                            'not a directory.')
    ancestor = os.path.dirname(ancestor)
  return path


@contextlib.contextmanager
def _parent_folders(path: str):
  """Makes the missing folders above ``path`` (as ``mkdir -p``, as flax's ``save_checkpoint``
  makes its workdir); removes those it made again if the body fails (all or nothing)."""
  missing = []
  folder = os.path.dirname(path)
  while not os.path.isdir(folder):
    missing.append(folder)
    folder = os.path.dirname(folder)
  made = []
  try:
    for folder in reversed(missing):
      try:
        os.mkdir(folder)
        made.append(folder)
      except FileExistsError:   # another writer made it meanwhile: not ours to remove
        if not os.path.isdir(folder):
          raise
    yield
  except BaseException:
    for folder in reversed(made):
      with contextlib.suppress(OSError):   # only if still empty
        os.rmdir(folder)
    raise


def _exists(path: str) -> str:
  return f'{path!r} already exists; choose a new output path (nothing was overwritten).'


def is_no_space(error: BaseException) -> bool:
  """Whether ``error`` (or an exception it was raised from) says the disk is full."""
  seen = set()
  while error is not None and id(error) not in seen:
    seen.add(id(error))
    if isinstance(error, OSError) and error.errno in _NO_SPACE:
      return True
    if 'No space left on device' in str(error) or 'Disk quota exceeded' in str(error):
      return True
    error = error.__cause__ or error.__context__
  return False


def no_space(path: str) -> CheckpointError:
  return CheckpointError(f'no space left on the device of {path!r} (nothing was written).')


@contextlib.contextmanager
def deferred_interrupt():
  """Runs the block with SIGINT held back (main thread only); a Ctrl-C is raised after it.

  Yields a list that is non-empty once a Ctrl-C is pending.
  """
  pending = []
  if threading.current_thread() is not threading.main_thread():
    yield pending
    return
  previous = signal.signal(signal.SIGINT, lambda signum, frame: pending.append(signum))
  try:
    yield pending
  finally:
    signal.signal(signal.SIGINT, previous)
    if pending and callable(previous):
      previous(signal.SIGINT, None)
    elif pending and previous == signal.default_int_handler:
      raise KeyboardInterrupt


def _umask() -> int:
  umask = os.umask(0)
  os.umask(umask)
  return umask


def _fsync_directory(directory: str) -> None:
  try:
    fd = os.open(directory, os.O_RDONLY)
  except OSError:
    return
  try:
    os.fsync(fd)
  except OSError:
    pass  # some file systems cannot fsync a directory; the data itself was synced
  finally:
    os.close(fd)


def _link_no_replace(tmp: str, path: str) -> None:
  """Gives the complete file ``tmp`` the name ``path`` unless ``path`` exists."""
  try:
    os.link(tmp, path)
  except FileExistsError:
    raise CheckpointError(_exists(path)) from None
  except OSError as e:
    if e.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK,
                       errno.ENOSYS):
      raise
    _rename_no_replace(tmp, path)  # a file system without hard links
  else:
    os.unlink(tmp)


def _renameat2():
  try:
    libc = ctypes.CDLL(None, use_errno=True)
    function = libc.renameat2
  except (OSError, AttributeError):
    return None
  function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                       ctypes.c_uint]
  return function


def _rename_no_replace(tmp: str, path: str) -> None:
  """Renames ``tmp`` to ``path``; CheckpointError if ``path`` exists (or appeared meanwhile)."""
  renameat2 = _renameat2()
  if renameat2 is not None:
    at_cwd = -100  # AT_FDCWD
    if renameat2(at_cwd, os.fsencode(tmp), at_cwd, os.fsencode(path), _RENAME_NOREPLACE) == 0:
      return
    code = ctypes.get_errno()
    if code == errno.EEXIST:
      raise CheckpointError(_exists(path))
    if code not in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
      raise OSError(code, os.strerror(code), path)
  if os.path.lexists(path):
    raise CheckpointError(_exists(path))
  try:
    os.rename(tmp, path)  # a directory cannot replace a non-empty one, nor a file a directory
  except OSError as e:
    if e.errno in (errno.EEXIST, errno.ENOTEMPTY, errno.EISDIR, errno.ENOTDIR):
      raise CheckpointError(_exists(path)) from None
    raise


def write_file(path, write: Callable) -> None:
  """Calls ``write(f)`` on a temporary file next to ``path``; publishes it when complete.

  Raises:
    CheckpointError: ``path`` exists (before or by the time the file is complete), a folder
      above it cannot be made, or the disk is full.
  """
  path = check_new(path)
  with _parent_folders(path):
    _write_file(path, write)


def write_msgpack(path, tree) -> None:
  """Writes ``tree`` (a state dict, or what ``flax.serialization.to_state_dict`` makes one of)
  as flax msgpack to the new file ``path``, leaf by leaf (:func:`write_file`)."""
  state_dict = serialization.to_state_dict(tree)
  write_file(path, lambda f: _codec.encode(f, state_dict))


def replace_file(path, write: Callable) -> None:
  """Calls ``write(f)`` on a temporary file next to the existing file ``path``; renames it over
  ``path`` when complete (the file's mode kept): ``path`` holds the old bytes or the new ones."""
  path = os.path.abspath(path)
  _write_file(path, write, replace=os.stat(path).st_mode & 0o7777)


def _write_file(path: str, write: Callable, replace=None) -> None:
  """``replace``: the mode of the file ``path`` that the new one replaces (None: a new file)."""
  tmp = None
  try:
    with deferred_interrupt():
      fd, tmp = tempfile.mkstemp(prefix=f'.{os.path.basename(path)}.', suffix='.tmp',
                                 dir=os.path.dirname(path))
    with os.fdopen(fd, 'wb') as f:
      write(f)
      f.flush()
      os.fsync(f.fileno())
    # mkstemp creates 0600; give the file the usual mode, or the mode of the one it replaces
    os.chmod(tmp, 0o666 & ~_umask() if replace is None else replace)
    with deferred_interrupt() as interrupted:
      if replace is None:
        _link_no_replace(tmp, path)
      else:
        os.replace(tmp, path)
      tmp = None
      if interrupted and replace is None:  # Ctrl-C while publishing: all or nothing, and ours
        os.unlink(path)
    _fsync_directory(os.path.dirname(path))
  except OSError as e:
    if is_no_space(e):
      raise no_space(path) from None
    raise
  finally:
    if tmp is not None:
      with deferred_interrupt():
        with contextlib.suppress(FileNotFoundError):
          os.unlink(tmp)


def _remove_when_settled(path, settle: float = 0.2, timeout: float = 10.0) -> None:
  """Removes ``path`` and makes sure it stays removed, for at most ``timeout`` seconds.

  After a failed write a library's own threads may still finish writes they had started
  (tensorstore, under orbax, creates the folders it writes into): remove, wait ``settle``
  seconds, and again while the path has come back.
  """
  deadline = time.monotonic() + timeout
  while True:
    shutil.rmtree(path, ignore_errors=True)
    time.sleep(settle)
    if not os.path.lexists(path) or time.monotonic() > deadline:
      return


def write_directory(directory, write: Callable, stop: Callable = lambda: None) -> None:
  """Calls ``write(tmp)`` for a path in a temporary directory; renames it to ``directory``.

  ``stop()`` is called before the temporary directory is removed after a failure or an
  interrupt: it must return once nothing writes there any more (e.g. after waiting for a
  library's writer threads).

  Raises:
    CheckpointError: ``directory`` exists (before or by the time the output is complete), a
      folder above it cannot be made, or the disk is full.
  """
  directory = check_new(directory)
  with _parent_folders(directory):
    _write_directory(directory, write, stop)


def _write_directory(directory: str, write: Callable, stop: Callable) -> None:
  tmp_parent = None
  try:
    with deferred_interrupt():
      tmp_parent = tempfile.mkdtemp(prefix=f'.{os.path.basename(directory)}.', suffix='.tmp',
                                    dir=os.path.dirname(directory))
    tmp = os.path.join(tmp_parent, 'checkpoint')
    try:
      write(tmp)
    except BaseException:
      with deferred_interrupt():
        stop()
        _remove_when_settled(tmp_parent)
      raise
    with deferred_interrupt() as interrupted:
      _rename_no_replace(tmp, directory)
      if interrupted:  # Ctrl-C while publishing: all or nothing, and it was ours
        shutil.rmtree(directory, ignore_errors=True)
    _fsync_directory(os.path.dirname(directory))
  except OSError as e:
    if is_no_space(e):
      raise no_space(directory) from None
    raise
  finally:
    if tmp_parent is not None:
      with deferred_interrupt():
        shutil.rmtree(tmp_parent, ignore_errors=True)
