"""Start-up shims of the legacy oracle venv (installed there as sitecustomize.py by setup.sh).

They touch no optimizer code. flax 0.5.3 predates jax 0.4.13 in two places the generators use:

* ``flax.serialization`` refers to ``jax.xla.DeviceArray``, which jax 0.4.13 no longer has: the
  name is pointed at ``jax.Array``;
* ``flax.training.checkpoints`` imports ``tensorflow.io.gfile`` and two jax modules of the old
  GlobalDeviceArray API: without TensorFlow, a ``gfile`` on the local file system and empty
  stand-ins for the GDA modules are registered, so ``save_checkpoint`` / ``restore_checkpoint``
  work on local paths and write the same msgpack bytes.

Never used by the suite or by the package: only the oracle interpreter imports it.
"""
import glob
import importlib.util
import os
import shutil
import sys
import types


def _registered(name):
  """The module ``name`` from sys.modules, or a new empty one registered under that name."""
  if name not in sys.modules:
    sys.modules[name] = types.ModuleType(name)
  return sys.modules[name]


def _stub_gda_modules():
  serialization = _registered('jax.experimental.gda_serialization.serialization')
  _registered('jax.experimental.gda_serialization').serialization = serialization
  serialization.get_tensorstore_spec = lambda *args, **kwargs: None
  serialization.GlobalAsyncCheckpointManager = type('GlobalAsyncCheckpointManager', (), {})
  _registered('jax.experimental.global_device_array').GlobalDeviceArray = type(
      'GlobalDeviceArray', (), {})


class _LocalFile:
  """The part of ``tf.io.gfile.GFile`` that flax 0.5.3's checkpoints use, on a local file."""

  def __init__(self, path, mode):
    self._path = path
    self._file = open(path, mode)  # pylint: disable=consider-using-with

  def __enter__(self):
    return self

  def __exit__(self, *exc_info):
    self._file.close()

  def read(self, n=-1):
    return self._file.read(n)

  def write(self, data):
    return self._file.write(data)

  def seek(self, position):
    return self._file.seek(position)

  def seekable(self):
    return True

  def size(self):
    return os.path.getsize(self._path)


def _rename(src, dst, overwrite=False):
  if os.path.exists(dst) and not overwrite:
    raise OSError(f'{dst} exists')
  os.replace(src, dst)


def _remove_tree(path):
  if os.path.isdir(path):
    shutil.rmtree(path)
  else:
    os.remove(path)


def _stub_gfile():
  if importlib.util.find_spec('tensorflow') is not None:
    return  # a real TensorFlow is used as it is
  tf, tf_io, gfile = (_registered('tensorflow'), _registered('tensorflow.io'),
                      _registered('tensorflow.io.gfile'))
  tf.io, tf_io.gfile = tf_io, gfile
  gfile.GFile = _LocalFile
  gfile.exists = os.path.exists
  gfile.isdir = os.path.isdir
  gfile.glob = lambda pattern: sorted(glob.glob(pattern))
  gfile.makedirs = lambda path: os.makedirs(path, exist_ok=True)
  gfile.remove = os.remove
  gfile.rename = _rename
  gfile.rmtree = _remove_tree


try:
  import jax  # pylint: disable=g-import-not-at-top
  if not hasattr(jax.xla, 'DeviceArray'):
    jax.xla.DeviceArray = jax.Array
  _stub_gda_modules()
  _stub_gfile()
except Exception as exc:  # pylint: disable=broad-except  (never break interpreter start-up)
  print(f'legacy oracle sitecustomize: {exc!r}', file=sys.stderr)
