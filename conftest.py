"""Suite set-up, before anything imports jax: 8 simulated CPU devices for the pmap/mesh tests, and
one directory for the whole run, shared by its pytest-xdist workers (``run_dir()``); under
pytest-xdist, the heaviest test files first (``HEAVY_FIRST``).

That directory holds what is built once per run: the package's wheel and sdist
(``tests/_utils.built_dists``) and a jax compilation cache. Many tests compile the same XLA
program through a different ``jax.jit`` object: the dict and FrozenDict variants of a golden
trajectory, the routes of a pmap case, a checkpoint case before and after its restore. jax's
in-memory cache is per jitted function; its persistent cache is keyed by the compiled program,
so with it each distinct program is compiled once per process, and about once per run: the
two pytest-xdist workers share their finished entries (``tests/_shared_cache.py``; the
README's test command on 2 idle cores, the same machine and tree: 593 s of pytest's clock and
1064 CPU s with a cache per worker, 510 s and 899 CPU s shared). A child a test waits on may
share its process's cache (``tests/_isolated.waited_child_cache``: the both-ways runs, the
legacy-name programs, the docs' blocks); other children keep jax's defaults. The directory is
removed at the end of the run (nothing outlives the session). Set
``FLAX_OPTIM_COMPAT_TEST_CACHE=0`` to run the suite without the compilation cache.
"""
import os
import shutil
import tempfile

import pytest

os.environ['XLA_FLAGS'] = ' '.join(
    [os.environ.get('XLA_FLAGS', ''), '--xla_force_host_platform_device_count=8']).strip()
os.environ.setdefault('JAX_PLATFORMS', 'cpu')

# Programs the tests run in their own processes (tests/fixtures/legacy_names/programs/...,
# migrate's example projects, two of which have a train.py), not test modules:
# --doctest-modules would import them.
collect_ignore_glob = ['tests/fixtures/*', 'tests/migrate/examples/*']

# Set by the process that made the run's directory, for its pytest-xdist workers.
RUN_DIR = 'FLAX_OPTIM_COMPAT_TEST_RUN_DIR'
_OWN_DIR = None   # the directory this process made and removes


def pytest_configure(config):
  global _OWN_DIR
  directory = os.environ.get(RUN_DIR)
  if not directory:
    directory = _OWN_DIR = tempfile.mkdtemp(prefix='flax_optim_compat_tests_')
    os.environ[RUN_DIR] = directory
  if os.environ.get('FLAX_OPTIM_COMPAT_TEST_CACHE', '1').lower() in ('0', 'false', 'no', 'off'):
    return
  import jax  # pylint: disable=g-import-not-at-top
  if jax.config.jax_compilation_cache_dir:
    return  # the user's own cache
  # One cache directory per process: jax writes an entry in place and without a lock (no
  # eviction), so a process could read another's half-written executable; a first clean-clone
  # run with one directory shared by every process aborted inside jaxlib. The workers share
  # their entries through tests/_shared_cache.py instead, whole files only.
  worker = os.environ.get('PYTEST_XDIST_WORKER', 'main')
  own = os.path.join(directory, 'jax_cache', worker)
  jax.config.update('jax_compilation_cache_dir', own)
  jax.config.update('jax_persistent_cache_min_compile_time_secs', 0.0)
  jax.config.update('jax_persistent_cache_min_entry_size_bytes', 0)
  # jax's default puts a GPU autotuning folder inside the cache directory into every program's
  # key, so two directories never share a key; on a CPU the folder is unused.
  jax.config.update('jax_persistent_cache_enable_xla_caches', 'none')
  if worker != 'main':
    from tests import _shared_cache  # pylint: disable=g-import-not-at-top
    config.pluginmanager.register(
        _shared_cache.SharedCache(own, os.path.join(directory, 'jax_cache', 'shared')),
        'shared_jax_cache')


# The test files that cost the most, heaviest first: CPU seconds of each file alone (pytest and
# its children, `tools/suite_orders.sh alone`, jax 0.10, 2 cores). pytest-xdist's loadfile hands
# the files to its two workers in the order they are collected (setup.cfg:
# --no-loadscope-reorder; its default order, by number of tests, started some of these last,
# where one file alone was the run's last minutes). Started first, they run beside the many
# short files instead of after them.
HEAVY_FIRST = (
    'tests/test_trajectories.py',                          # 127
    'tests/migrate/test_migrate_equivalence_corpus.py',    # 102
    'tests/test_compiled_step.py',                         # 78
    'tests/migrate/test_migrate.py',                       # 74
    'tests/test_legacy_names.py',                          # 57
    'tests/checkpoint/test_convert_tx.py',                 # 57
    'tests/checkpoint/test_probe.py',                      # 46
    'tests/test_multiprocess.py',                          # 45
    'tests/migrate/test_migrate_equivalence.py',           # 44
    'tests/test_pmap.py',                                  # 44
    'tests/test_generic.py',                               # 44
    'tests/checkpoint/test_convert.py',                    # 40
    'tests/test_docs.py',                                  # 39
    'tests/test_import_alias.py',                          # 34
    'tests/cli/test_cli.py',                               # 30
    'tests/migrate/test_migrate_equivalence_checkpoint.py',  # 27
)


def pytest_collection_modifyitems(session, config, items):
  """In a pytest-xdist worker: the files of HEAVY_FIRST first, in its order; every other file
  after them, in collection order. One process (``-n 0``) keeps the order it was given."""
  if not os.environ.get('PYTEST_XDIST_WORKER'):
    return
  missing = [path for path in HEAVY_FIRST if not (config.rootpath / path).exists()]
  if missing:
    raise pytest.UsageError(f'conftest.py HEAVY_FIRST names files that do not exist: {missing}')
  rank = {path: i for i, path in enumerate(HEAVY_FIRST)}
  items.sort(key=lambda item: rank.get(item.nodeid.split('::', 1)[0], len(rank)))


def pytest_unconfigure(config):
  if _OWN_DIR is not None:
    shutil.rmtree(_OWN_DIR, ignore_errors=True)
    os.environ.pop(RUN_DIR, None)
