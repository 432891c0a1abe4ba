"""Tree assertions, fixture loading and trace counting: the one helper module of the suite."""
import contextlib
import functools
import hashlib
import importlib.metadata
import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import jax
import numpy as np
from flax import serialization

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'fixtures')

# The legacy library itself differs by ~1e-6 relative between eager and jit over 20 float32
# steps, and optax associates some products differently from legacy, so a
# tighter bound than 1e-5 is not meaningful.
RTOL = 1e-5

# The checkpoints flax 0.5.3 wrote (tools/oracle/gen_checkpoints.py): one folder per case.
LEGACY_CHECKPOINTS = os.path.join(FIXTURES, 'checkpoints', 'legacy')


def forward_formats():
  """The ``--to`` names that convert a legacy checkpoint: every registered output format but
  the ones that read a converted one back (``legacy``)."""
  from flax_optim_compat import convert  # pylint: disable=g-import-not-at-top
  return [f.name for f in convert.output_formats() if not f.reads_converted]


def legacy_checkpoint(name):
  """The path of the one checkpoint file flax 0.5.3 wrote for checkpoint case ``name``."""
  directory = os.path.join(LEGACY_CHECKPOINTS, name)
  (file_name,) = os.listdir(directory)
  return os.path.join(directory, file_name)


def legacy_checkpoint_tree(name):
  """That file's state dict, as ``flax.serialization.msgpack_restore`` reads it."""
  with open(legacy_checkpoint(name), 'rb') as f:
    return serialization.msgpack_restore(f.read())


def run_cli(capsys, *argv):
  """``(exit code, stdout, stderr)`` of ``flax-optim-compat ARGV...`` run in this process."""
  from flax_optim_compat._cli import _main as _cli  # pylint: disable=g-import-not-at-top
  code = _cli.main(list(argv))
  out, err = capsys.readouterr()
  return code, out, err


def sha256(path):
  with open(path, 'rb') as f:
    return hashlib.sha256(f.read()).hexdigest()


def load_fixture(*parts):
  with open(os.path.join(FIXTURES, *parts), 'rb') as f:
    return serialization.msgpack_restore(f.read())


@functools.lru_cache(maxsize=None)
def pmap_fixture(name):
  """The legacy 8-device golden of pmap case ``name`` (read once per process; do not mutate)."""
  return load_fixture('pmap', f'{name}.msgpack')


def assert_trees_close_as(actual, expected, what, rtol=None):
  """:func:`assert_trees_close`, its message prefixed with ``what``."""
  try:
    assert_trees_close(actual, expected, rtol=RTOL if rtol is None else rtol)
  except AssertionError as e:
    raise AssertionError(f'{what}: {e}') from None


def fixture_names(subdir, ext='.msgpack'):
  return sorted(n[:-len(ext)] for n in os.listdir(os.path.join(FIXTURES, subdir)) if n.endswith(ext))


def dtype_of(x):
  return np.dtype(x.dtype) if hasattr(x, 'dtype') else np.result_type(x)


def _is_array(x):
  return isinstance(x, (np.ndarray, np.generic, jax.Array))


def max_rel_diff(actual, expected):
  """max|a - e| / max|e| over one leaf ("max rel" throughout the suite and the guide); 0 for two all-zero leaves.

  A NaN on either side is never equal: the result is then ``inf``, even where both sides hold a
  NaN at the same place (a test that means "NaN where the oracle has NaN" says so with
  ``assert_trees_close(..., nan_where_expected=True)``, which checks the NaN positions apart).
  """
  a = np.asarray(actual, np.float64)
  e = np.asarray(expected, np.float64)
  if a.size == 0:
    return 0.0
  if np.isnan(a).any() or np.isnan(e).any():
    return np.inf
  diff = np.abs(a - e)
  scale = np.max(np.abs(e))
  worst = np.max(diff)
  if np.isnan(worst):  # inf - inf
    return np.inf
  return float(worst / scale) if scale > 0 else float(worst / np.finfo(np.float32).tiny)


def assert_trees_close(actual, expected, rtol=RTOL, path='', check_dtype=True, stats=None,
                       nan_where_expected=False):
  """Same nested-dict keys, same ``None``s, same leaf shapes and dtypes, values within ``rtol``.

  ``rtol`` bounds max|a - e| / max|e| per leaf (exact equality for all-zero leaves). Works on
  state dicts (nested dicts) and on any pytree whose containers are dicts/FrozenDicts.
  ``stats``, if a dict, collects the worst 'abs' and 'rel' differences seen. A NaN fails, unless
  ``nan_where_expected``: then each leaf must hold NaN exactly where ``expected`` does (checked
  apart) and the other values are compared.
  """
  if isinstance(expected, dict) or hasattr(expected, 'items') and not _is_array(expected):
    assert hasattr(actual, 'items') and not _is_array(actual), (
        f'{path or "/"}: expected a dict, got {type(actual).__name__}')
    assert set(actual.keys()) == set(expected.keys()), (
        f'{path or "/"}: keys differ: {sorted(actual.keys())} != {sorted(expected.keys())}')
    for key in expected:
      assert_trees_close(actual[key], expected[key], rtol, f'{path}/{key}', check_dtype, stats,
                         nan_where_expected)
    return
  if expected is None or isinstance(expected, (tuple, list)) and not expected:
    assert actual == expected, f'{path}: expected {expected!r}, got {actual!r}'
    return
  assert np.shape(actual) == np.shape(expected), (
      f'{path}: shape {np.shape(actual)} != expected {np.shape(expected)}')
  if check_dtype:
    assert dtype_of(actual) == dtype_of(expected), (
        f'{path}: dtype {dtype_of(actual)} != expected {dtype_of(expected)}')
  if nan_where_expected:
    a_nan = np.isnan(np.asarray(actual, np.float64))
    e_nan = np.isnan(np.asarray(expected, np.float64))
    assert np.array_equal(a_nan, e_nan), (
        f'{path}: NaN at {np.argwhere(a_nan).tolist()}, expected at {np.argwhere(e_nan).tolist()}')
    actual = np.where(a_nan, 0.0, np.asarray(actual, np.float64))
    expected = np.where(e_nan, 0.0, np.asarray(expected, np.float64))
  rel = max_rel_diff(actual, expected)
  if stats is not None:
    diff = np.abs(np.asarray(actual, np.float64) - np.asarray(expected, np.float64))
    stats['abs'] = max(stats.get('abs', 0.0), float(np.nanmax(diff)) if diff.size else 0.0)
    stats['rel'] = max(stats.get('rel', 0.0), rel)
  assert rel <= rtol, (
      f'{path}: max rel diff {rel:.3g} > {rtol:g}\nactual={np.asarray(actual)}\n'
      f'expected={np.asarray(expected)}')


def assert_trees_equal_types(actual, expected):
  """Same treedef (container types included, e.g. FrozenDict vs dict) and leaf dtypes."""
  assert jax.tree_util.tree_structure(actual) == jax.tree_util.tree_structure(expected), (
      f'{jax.tree_util.tree_structure(actual)} != {jax.tree_util.tree_structure(expected)}')
  for a, e in zip(jax.tree_util.tree_leaves(actual), jax.tree_util.tree_leaves(expected)):
    assert dtype_of(a) == dtype_of(e), f'{dtype_of(a)} != {dtype_of(e)}'


class TraceCounter:
  """Wraps a function so ``jax.jit`` of it counts how often it is traced."""

  def __init__(self, fn):
    self.count = 0
    self._fn = fn
    functools.update_wrapper(self, fn)

  def __call__(self, *args, **kwargs):
    self.count += 1
    return self._fn(*args, **kwargs)


def offline_build_possible() -> bool:
  """setuptools with PEP 660 (>=64) and a bdist_wheel (wheel, or setuptools>=70.1) are here."""
  try:
    version = importlib.metadata.version('setuptools')
  except importlib.metadata.PackageNotFoundError:
    return False
  major_minor = tuple(int(p) for p in version.split('.')[:2] if p.isdigit())
  if major_minor < (64,):
    return False
  return major_minor >= (70, 1) or importlib.util.find_spec('wheel') is not None


# ----------------------------------------------------------------------------- built once a run

REPO = pathlib.Path(__file__).resolve().parents[1]
# The files a build of the package reads (setup.py puts README.md and docs/*.md in the long
# description).
BUILD_INPUTS = ('setup.py', 'setup.cfg', 'MANIFEST.in', 'README.md', 'LICENSE',
                '_flax_optim_compat_alias.py') + tuple(
                    f'docs/{p.name}' for p in sorted((REPO / 'docs').glob('*.md')))


@functools.lru_cache(maxsize=None)
def run_dir() -> pathlib.Path:
  """The directory this test run's processes share (conftest.py makes it; removed at the end);
  a fresh one when the suite's conftest did not run."""
  directory = os.environ.get('FLAX_OPTIM_COMPAT_TEST_RUN_DIR')
  return pathlib.Path(directory or tempfile.mkdtemp(prefix='flax_optim_compat_tests_'))


@contextlib.contextmanager
def _run_lock(name):
  """Holds ``run_dir()/name.lock``: one process of the run at a time (pytest-xdist workers)."""
  with open(run_dir() / f'{name}.lock', 'w') as lock:
    try:
      import fcntl  # pylint: disable=g-import-not-at-top
    except ImportError:  # not on POSIX: each worker builds its own
      yield
      return
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
      yield
    finally:
      fcntl.flock(lock, fcntl.LOCK_UN)


def _build(args, cwd):
  proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, (
      f'{args!r} failed ({proc.returncode}):\nSTDOUT:\n{proc.stdout}\nSTDERR:\n{proc.stderr}')


def built_dists():
  """``(wheel, sdist)`` of the working tree's package, built offline once per test run.

  The build reads a copy of :data:`BUILD_INPUTS` and the package (nothing is written into the
  checkout). Every test that needs a built package (tests/test_packaging.py's checks, the
  regular installs of tests/test_import_alias.py) shares these two files: a build takes
  10-20 s. Needs :func:`offline_build_possible`. Do not modify the files.
  """
  out = run_dir() / 'dists'
  with _run_lock('dists'):
    if not (out / 'done').exists():
      shutil.rmtree(out, ignore_errors=True)
      project = out / 'project'
      (project / 'docs').mkdir(parents=True)
      for name in BUILD_INPUTS:
        shutil.copy2(REPO / name, project / name)
      shutil.copytree(REPO / 'flax_optim_compat', project / 'flax_optim_compat',
                      ignore=shutil.ignore_patterns('__pycache__', '*.pyc'))
      _build([sys.executable, '-m', 'pip', 'wheel', '--no-deps', '--no-build-isolation',
              '--no-index', '--disable-pip-version-check', '-q', '-w', str(out), str(project)],
             cwd=out)
      _build([sys.executable, 'setup.py', '-q', 'sdist', '-d', str(out)], cwd=project)
      (out / 'done').write_text('')
  wheel, = out.glob('*.whl')
  sdist, = out.glob('*.tar.gz')
  return wheel, sdist
