"""Golden runs of the branch-defs example programs, by the real flax 0.5.3.

Run in the legacy oracle venv, from the repository root::

    ~/.cache/legacy-flax-oracle/bin/python -m tools.oracle.gen_migrate_branch_defs [NAME ...]

Each program of tests/migrate/examples/branch_defs (``train.py``, which
tests/migrate/test_migrate_branch_defs.py migrates and runs both ways) runs unchanged, as a user
runs it, in a child of this interpreter on 8 simulated CPU devices, where `from flax import
optim` is flax 0.5.3's own. What it prints goes to tests/fixtures/migrate_branch_defs/<NAME>.json:
the lines that say where a run raised (``... raised TypeError at call 0``: overriding the groups
of a def without groups) and its trajectory (the JSON list it prints last).
"""
import json
import os
import subprocess
import sys
import tempfile

from tools import oracle

EXAMPLES = os.path.join(oracle.ROOT, 'tests', 'migrate', 'examples', 'branch_defs')
OUT_DIR = os.path.join(oracle.FIXTURES, 'migrate_branch_defs')
NAMES = sorted(n for n in os.listdir(EXAMPLES) if os.path.isdir(os.path.join(EXAMPLES, n)))


def generate(name, out_dir=OUT_DIR):
  import flax  # pylint: disable=g-import-not-at-top
  assert flax.__version__ == '0.5.3', f'run this in the legacy oracle venv, not flax {flax.__version__}'
  env = dict(os.environ, JAX_PLATFORMS='cpu', XLA_FLAGS=' '.join(
      [os.environ.get('XLA_FLAGS', ''), '--xla_force_host_platform_device_count=8']).strip())
  env.pop('PYTHONPATH', None)
  with tempfile.TemporaryDirectory() as tmp:
    proc = subprocess.run([sys.executable, os.path.join(EXAMPLES, name, 'train.py')], cwd=tmp,
                          env=env, capture_output=True, text=True, check=False)
  if proc.returncode:
    raise SystemExit(f'{name} failed:\n{proc.stderr[-4000:]}')
  lines = proc.stdout.strip().splitlines()
  golden = {'program': name, 'flax': flax.__version__,
            'raised': [line for line in lines if 'raised' in line],
            'trajectory': [float(v) for v in json.loads(lines[-1])]}
  os.makedirs(out_dir, exist_ok=True)
  path = os.path.join(out_dir, f'{name}.json')
  with open(path, 'w') as f:
    json.dump(golden, f, indent=1)
    f.write('\n')
  print(f'{path}: {len(golden["trajectory"])} values, {len(golden["raised"])} raised')


if __name__ == '__main__':
  oracle.main_over(__doc__, NAMES, generate, OUT_DIR, 'program')
