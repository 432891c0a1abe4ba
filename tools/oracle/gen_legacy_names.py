"""Golden values of tests/legacy_scripts/legacy_names.py, run by flax 0.5.3 on jax 0.4.13.

Run in the legacy oracle venv, from the repository root::

    ~/.cache/legacy-flax-oracle/bin/python -m tools.oracle.gen_legacy_names

The script runs unchanged in a child of this interpreter, in an empty temporary directory (it
writes its checkpoint under a relative path), and its JSON line goes to
tests/fixtures/legacy_names/legacy_names.json.

jax 0.4.13 had already removed four of the names the script uses; the child gets them back first
(a sitecustomize on its path) from their definitions in the last jax that had them, so their
values are still computed by the oracle's jax and not by flax_optim_compat:

* ``jax.tree_multimap`` (removed in jax 0.3.16): jax 0.3.5-0.3.15 defined it as ``tree_map``;
* ``jax.ops.index_update`` / ``index_add`` / ``index_mul`` / ``index_min`` / ``index_max``
  (removed in jax 0.3.2): jax 0.2.22-0.3.1 computed them with the scatter of
  ``x.at[idx].set/add/multiply/min/max(y)``, and ``jax.ops.index`` returned its subscript;
* ``jax.experimental.optimizers`` (removed in jax 0.3.16): jax 0.2.25-0.3.15 made it an alias of
  ``jax.example_libraries.optimizers``;
* ``jax.tree_util.tree_multimap`` (as ``jax.tree_multimap``), ``jax.profiler.StepTraceContext``
  (renamed ``StepTraceAnnotation`` in jax 0.2.12) and ``jax.config.enable_omnistaging()`` (a
  no-op once jax 0.2.12 made omnistaging permanent).
"""
import json
import os
import subprocess
import sys
import tempfile

from tools import oracle

SCRIPT = os.path.join(oracle.ROOT, 'tests', 'legacy_scripts', 'legacy_names.py')
OUT = os.path.join(oracle.FIXTURES, 'legacy_names', 'legacy_names.json')

# Written as the child's sitecustomize, after the oracle's own (imported first by it).
_ERA_NAMES = '''\
import importlib, sys
_site = importlib.import_module('_oracle_sitecustomize')
import jax, jax.ops
import jax.example_libraries.optimizers as _optimizers
jax.tree_multimap = jax.tree_util.tree_map


class _Index:
  def __getitem__(self, idx):
    return idx


jax.ops.index = _Index()


def _at(method):
  def index_op(x, idx, y, indices_are_sorted=False, unique_indices=False):
    return getattr(jax.numpy.asarray(x).at[idx], method)(
        y, indices_are_sorted=indices_are_sorted, unique_indices=unique_indices)
  return index_op


for _name, _method in (('index_update', 'set'), ('index_add', 'add'),
                       ('index_mul', 'multiply'), ('index_min', 'min'), ('index_max', 'max')):
  setattr(jax.ops, _name, _at(_method))
jax.tree_util.tree_multimap = jax.tree_util.tree_map
jax.profiler.StepTraceContext = jax.profiler.StepTraceAnnotation
jax.config.enable_omnistaging = lambda: None
sys.modules['jax.experimental.optimizers'] = _optimizers
import jax.experimental
jax.experimental.optimizers = _optimizers
'''


def _oracle_sitecustomize():
  import sitecustomize  # pylint: disable=import-outside-toplevel  # the oracle venv's own
  return sitecustomize.__file__


def main():
  with tempfile.TemporaryDirectory() as tmp:
    site_dir = os.path.join(tmp, 'site')
    work = os.path.join(tmp, 'work')
    os.makedirs(site_dir)
    os.makedirs(work)
    with open(_oracle_sitecustomize(), encoding='utf-8') as f:
      own = f.read()
    with open(os.path.join(site_dir, '_oracle_sitecustomize.py'), 'w', encoding='utf-8') as f:
      f.write(own)
    with open(os.path.join(site_dir, 'sitecustomize.py'), 'w', encoding='utf-8') as f:
      f.write(_ERA_NAMES)
    # 8 CPU devices, as the suite has (conftest.py): the device_put_* values are per device.
    env = dict(os.environ, JAX_PLATFORMS='cpu', PYTHONPATH=site_dir,
               XLA_FLAGS='--xla_force_host_platform_device_count=8')
    proc = subprocess.run([sys.executable, SCRIPT], cwd=work, env=env, capture_output=True,
                          text=True, check=False)
    if proc.returncode:
      raise SystemExit(f'legacy_names.py failed in the oracle:\n{proc.stderr[-4000:]}')
  values = json.loads(proc.stdout.strip().splitlines()[-1])
  os.makedirs(os.path.dirname(OUT), exist_ok=True)
  with open(OUT, 'w', encoding='utf-8') as f:
    json.dump(values, f, indent=1, sort_keys=True)
    f.write('\n')
  print(f'wrote {os.path.relpath(OUT, oracle.ROOT)}')


if __name__ == '__main__':
  main()
