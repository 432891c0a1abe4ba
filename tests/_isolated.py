"""Run Python code in a fresh interpreter where this package cannot be imported.

A conversion or a migrated script that claims to need only plain optax/flax/orbax is proven in
such a process: the blocker below sits first on ``sys.meta_path`` before the code runs, so
``import flax_optim_compat``, ``from flax import optim`` and the alias module all raise
``ModuleNotFoundError``; the alias start-up hook is also switched off through its environment
variable. The child's stdout is returned, so the code can print JSON for the test to read.
"""
import os
import subprocess
import sys
from typing import Optional, Sequence

from flax_optim_compat import _legacy_jax

# Modules the child must not import (the package, its flax.optim alias, flax.optim itself).
BLOCKED = ('flax_optim_compat', '_flax_optim_compat_alias', 'flax.optim')

_PRELUDE = '''\
import importlib.abc, sys
_BLOCKED = {blocked!r}
class _Blocker(importlib.abc.MetaPathFinder):
  def find_spec(self, name, path=None, target=None):
    if any(name == b or name.startswith(b + '.') for b in _BLOCKED):
      raise ModuleNotFoundError(f'{{name}} is blocked in this isolated process', name=name)
    return None
sys.meta_path.insert(0, _Blocker())
for _name in list(sys.modules):
  if any(_name == b or _name.startswith(b + '.') for b in _BLOCKED):
    del sys.modules[_name]
'''


# The environment variables that choose flax's flags the legacy API sets (FLAX_RETURN_FROZENDICT,
# FLAX_USE_ORBAX_CHECKPOINTING): no child inherits them, so that each side runs with what its
# own code sets (a flag given to the migrated side would hide what the rewrite must keep).
FLAX_FLAG_VARIABLES = tuple(flag.upper() for flag, _, _ in _legacy_jax.FLAX_DEFAULTS)


def waited_child_cache() -> dict:
  """Environment that lets a child share this process's jax compilation cache (conftest.py).

  The two sides of a both-ways run compile the same XLA programs (the legacy API's step is an
  optax transformation), and each child starts with nothing compiled: sharing the cache saves
  about a quarter of migrate's equivalence tests (test_migrate_equivalence.py alone, one
  process: 78 CPU s without, 57 with). Only for a child the caller waits on (``subprocess.run``),
  one at a time, that is not killed on purpose: jax writes an entry in place and without a lock,
  so two writers, or a reader beside a killed writer, could meet a half-written executable.
  Empty when this process has no cache (``FLAX_OPTIM_COMPAT_TEST_CACHE=0``); a cache the user
  set through the environment reaches every child anyway.
  """
  import jax  # pylint: disable=g-import-not-at-top
  directory = jax.config.jax_compilation_cache_dir
  if not directory:
    return {}
  return {'JAX_COMPILATION_CACHE_DIR': directory,
          'JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS': '0',
          'JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES': '0',
          # what goes into a program's key, as in this process (conftest.py)
          'JAX_PERSISTENT_CACHE_ENABLE_XLA_CACHES':
              jax.config.jax_persistent_cache_enable_xla_caches or ''}


def prelude() -> str:
  """The source that makes the blocked modules unimportable (first lines of the child)."""
  return _PRELUDE.format(blocked=BLOCKED)


def run_isolated(code: str, *, args: Sequence[str] = (), cwd: Optional[str] = None,
                 timeout: float = 300, env: Optional[dict] = None) -> subprocess.CompletedProcess:
  """Runs ``code`` (a script's text) in a child interpreter without this package.

  Raises ``AssertionError`` with the child's stderr when it exits non-zero, so a failing child
  shows its own traceback in the test report.
  """
  child_env = {k: v for k, v in os.environ.items()
               if k not in ('PYTHONPATH', 'PYTHONSTARTUP', *FLAX_FLAG_VARIABLES)}
  child_env['FLAX_OPTIM_COMPAT_ALIAS'] = '0'
  child_env.setdefault('JAX_PLATFORMS', 'cpu')
  child_env.update(waited_child_cache())
  if env:
    child_env.update(env)
  proc = subprocess.run([sys.executable, '-c', prelude() + code, *args], cwd=cwd, env=child_env,
                        capture_output=True, text=True, timeout=timeout, check=False)
  if proc.returncode:
    raise AssertionError(f'isolated child exited {proc.returncode}:\n{proc.stderr[-4000:]}')
  return proc
