"""Golden trajectories of the migration corpus, run by the real flax 0.5.3.

Run in the legacy oracle venv, from the repository root::

    ~/.cache/legacy-flax-oracle/bin/python -m tools.oracle.gen_migrate_corpus [SCRIPT ...]

Each script of tests/legacy_scripts/migrate (the legacy-style training scripts that
tests/migrate/test_migrate_equivalence_corpus.py migrates and runs both ways) runs unchanged, as a user runs it,
in a child of this interpreter, where `from flax import optim` is flax 0.5.3's own. Its
trajectory (the JSON list it prints last) goes to tests/fixtures/migrate_corpus/<SCRIPT>.json;
for the train-state script also the run resumed from its own checkpoint (saved at
CHECKPOINT_STEP, resumed to RESUME_STEP).

Regenerating gives the same files byte for byte except pmap_replicate.json: jax 0.4.13's
all-reduce over 8 simulated CPU devices sums in a run-dependent order (seen between two runs:
4.8e-7 abs, 5.9e-6 relative after 20 steps; the test compares with rtol 1e-5).
"""
import json
import os
import subprocess
import sys
import tempfile

from tools import oracle

from tests import _migrate_harness as harness

OUT_DIR = os.path.join(oracle.FIXTURES, 'migrate_corpus')


def _run(name, args, cwd):
  env = dict(os.environ, JAX_PLATFORMS='cpu')
  env.pop('PYTHONPATH', None)
  proc = subprocess.run([sys.executable, str(harness.CORPUS / name), *map(str, args)], cwd=cwd,
                        env=env, capture_output=True, text=True, check=False)
  if proc.returncode:
    raise SystemExit(f'{name} {args} failed:\n{proc.stderr[-4000:]}')
  return [float(v) for v in harness.trajectory(proc.stdout)]


def generate(name, out_dir=OUT_DIR):
  with tempfile.TemporaryDirectory() as tmp:
    golden = {'script': name, 'flax': _flax_version(),
              'args': [str(a) for a in harness.SCRIPTS[name].args],
              'trajectory': _run(name, harness.corpus_args(name, os.path.join(tmp, 'run')), tmp)}
    if name == harness.CHECKPOINT_SCRIPT:
      workdir = os.path.join(tmp, 'resume')
      _run(name, [workdir, harness.CHECKPOINT_STEP], tmp)
      golden['checkpoint_step'] = harness.CHECKPOINT_STEP
      golden['resume_step'] = harness.RESUME_STEP
      golden['resumed_trajectory'] = _run(name, [workdir, harness.RESUME_STEP], tmp)
  os.makedirs(out_dir, exist_ok=True)
  path = os.path.join(out_dir, name.replace('.py', '.json'))
  with open(path, 'w') as f:
    json.dump(golden, f, indent=1)
    f.write('\n')
  print(f'{path}: {len(golden["trajectory"])} values')


def _flax_version():
  import flax  # pylint: disable=g-import-not-at-top
  assert flax.__version__ == '0.5.3', f'run this in the legacy oracle venv, not flax {flax.__version__}'
  return flax.__version__


if __name__ == '__main__':
  oracle.main_over(__doc__, list(harness.SCRIPTS), generate, OUT_DIR, 'script')
