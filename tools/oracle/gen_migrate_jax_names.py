"""Golden trajectories of migrate's removed-jax-name examples, run by jax 0.4.13.

Run in the legacy oracle venv, from the repository root::

    ~/.cache/legacy-flax-oracle/bin/python -m tools.oracle.gen_migrate_jax_names

Each ``tests/migrate/examples/jax_names/<name>_before.py`` whose names jax 0.4.13 still has runs unchanged
in a child of this interpreter; its trajectory (the JSON list it prints last) goes to
tests/fixtures/migrate_jax_names.json, which the tests compare the rewritten ``<name>_after.py``
(run on today's jax) with, bit for bit. The examples of names jax had already removed by
0.4.13 (``jax.ops.index_update``, ``jax.tree_multimap``, ``jax.experimental.optimizers``) are
listed in ``BEFORE_0_4`` and are checked against hand math in the tests instead.
"""
import json
import os
import subprocess
import sys

import jax

from tools import oracle

EXAMPLES = os.path.join(os.path.dirname(oracle.FIXTURES), 'migrate', 'examples', 'jax_names')
OUT = os.path.join(oracle.FIXTURES, 'migrate_jax_names.json')
BEFORE_0_4 = ('removed_before_0_4',)


def _trajectory(path):
  # The CPU devices the suite's processes have (conftest.py): device_put_before.py puts rows on
  # each of them.
  env = dict(os.environ, JAX_PLATFORMS='cpu',
             XLA_FLAGS='--xla_force_host_platform_device_count=8')
  env.pop('PYTHONPATH', None)
  proc = subprocess.run([sys.executable, path], env=env, capture_output=True, text=True,
                        check=False)
  if proc.returncode:
    raise SystemExit(f'{path} failed:\n{proc.stderr[-4000:]}')
  return json.loads(proc.stdout.strip().splitlines()[-1])


def main():
  names = sorted(n[:-len('_before.py')] for n in os.listdir(EXAMPLES)
                 if n.endswith('_before.py') and n[:-len('_before.py')] not in BEFORE_0_4)
  golden = {'jax': jax.__version__,
            'trajectories': {n: _trajectory(os.path.join(EXAMPLES, f'{n}_before.py'))
                             for n in names}}
  with open(OUT, 'w') as f:
    json.dump(golden, f, indent=1)
    f.write('\n')
  print(f'{OUT}: {", ".join(names)}')


if __name__ == '__main__':
  main()
