"""Runs a real program both ways on synthetic data: legacy on this package, migrated without it.

    python tools/corpus/both_ways.py PROGRAM DRIVER [--steps N] [--also DIR] [--workdir DIR]
                                     [--site DIR] [--devices N] [--json OUT]

PROGRAM is a program folder of a corpus tree (``CORPUS/<id>``); DRIVER a script under
``tools/corpus/drivers/`` that trains the program for a few steps on synthetic inputs through the
program's own modules (its model, its optimizer factory or the statements of its main function
that build the optimizer, its train step), then prints, as its last stdout line, a JSON list of
floats: the loss of every step, then every final parameter.

The folder is copied twice into the work folder (``legacy/<name>``, ``migrated/<name>``); the
second copy is migrated as a user does (``migrate FOLDER --write --report``). The driver then
runs as ``python DRIVER PROGRAM_COPY STEPS [SITE]`` (``SITE``: ``--site``, a folder of
pip-installable libraries the program needs, such as ml_collections, put last on sys.path):

* *legacy*: in the copy as it was, ``from flax import optim`` being this checkout's package (the
  import alias), as users run their old code;
* *migrated*: in the migrated copy, in a process where neither this package nor ``flax.optim``
  can be imported.

Printed (and written with ``--json``): the migration's outcome (sites rewritten / refused /
flagged, the weakest exactness the report claims), each side's status, and the two trajectories
compared: max absolute difference, max relative difference, whether they are bit-equal and
whether they are within the report's claim. A NaN or an infinity on either side is never equal.
"""
import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
from tests import _isolated  # noqa: E402
from tests import _migrate_harness as harness  # noqa: E402

# The migrated side runs the driver as `python DRIVER ARGS` would, after the blocker prelude:
# the driver's folder first on sys.path (where `import _driver` finds the drivers' shared code).
_RUN_PATH = '''
import os, runpy, sys
sys.argv = {argv!r}
sys.path.insert(0, os.path.dirname(sys.argv[0]))
runpy.run_path(sys.argv[0], run_name='__main__')
'''


def run_side(driver, program, steps, *, isolated, workdir, timeout, site=None, devices=None):
  """Runs the driver on one copy; returns (trajectory or None, error text or '')."""
  argv = [str(driver), str(program), str(steps)]
  if site:
    argv.append(str(pathlib.Path(site).resolve()))
  if isolated:
    env = {k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', 'PYTHONSTARTUP')}
    # The package's start-up hook (its .pth file) stays off: no alias, and no removed jax names
    # given back, which the migrated program must not need.
    env.update(harness.isolated_env(FLAX_OPTIM_COMPAT_ALIAS='0', FLAX_OPTIM_COMPAT_LEGACY_JAX='0'))
    cmd = [sys.executable, '-c', _isolated.prelude() + _RUN_PATH.format(argv=argv)]
  else:
    env = harness.legacy_env(workdir)
    cmd = [sys.executable, *argv]
  if devices:   # the machine both sides run on, not a flag of the program (drivers set none)
    env['XLA_FLAGS'] = (env.get('XLA_FLAGS', '') +
                        f' --xla_force_host_platform_device_count={devices}').strip()
  try:
    proc = subprocess.run(cmd, cwd=program, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)
  except subprocess.TimeoutExpired:
    return None, f'timed out after {timeout} s'
  if proc.returncode:
    return None, f'exited {proc.returncode}:\n{proc.stderr[-3000:]}'
  try:
    return harness.trajectory(proc.stdout), ''
  except (AssertionError, ValueError) as e:
    return None, f'no trajectory: {e}\n{proc.stdout[-1000:]}'


def compare(before, after):
  """Differences of two trajectories; non-finite values on either side are never equal."""
  if before.shape != after.shape:
    return {'equal': False, 'reason': f'lengths {before.shape[0]} vs {after.shape[0]}'}
  finite = bool(np.all(np.isfinite(before)) and np.all(np.isfinite(after)))
  diff = np.abs(before - after)
  scale = np.maximum(np.abs(before), np.finfo(np.float32).tiny)
  return {
      'equal': finite and bool(np.array_equal(before, after)),
      'finite': finite,
      'n': int(before.shape[0]),
      'max_abs': float(np.max(diff)) if finite else float('nan'),
      'max_rel': float(np.max(diff / scale)) if finite else float('nan'),
  }


def within_claim(before, after, claim):
  try:
    harness.assert_equivalent(before, after, claim)
    return True
  except AssertionError:
    return False


def migration_summary(migration):
  sites = migration.report.get('sites', [])
  counts = {}
  for record in sites:
    counts[record['status']] = counts.get(record['status'], 0) + 1
  claims = [r['exactness'] for r in sites if r['status'] == 'rewritten' and 'exactness' in r]
  claims += [r['exactness'] for r in migration.report.get('optimizers', []) if 'exactness' in r]
  claim = max(claims, key=harness.EXACTNESS.index) if claims else None
  not_rewritten = [f"{r['path']}:{r['line']}: {r['code']} {r['status']}: {r['message']}"
                   for r in sites if r['status'] != 'rewritten']
  return {'returncode': migration.returncode, 'sites': counts, 'claim': claim,
          'not_rewritten': not_rewritten}


def both_ways(program, driver, steps, workdir, timeout, also=(), reuse=False, site=None,
              devices=None):
  program = pathlib.Path(program).resolve()
  driver = pathlib.Path(driver).resolve()
  legacy = workdir / 'legacy' / program.name
  migrated = workdir / 'migrated' / program.name
  reuse = reuse and legacy.is_dir() and migrated.is_dir()
  for dest in () if reuse else (legacy, migrated):
    shutil.copytree(program, dest)
    # A package the program imports from elsewhere in its repository: beside the copy (on the
    # driver's sys.path), the same on both sides, not migrated.
    for extra in also:
      extra = pathlib.Path(extra).resolve()
      shutil.copytree(extra, dest.parent / extra.name)
  if not reuse:
    summary = migration_summary(harness.migrate_folder(migrated))
    (workdir / 'migration.json').write_text(json.dumps(summary))
  result = {'program': str(program), 'driver': driver.name, 'steps': steps,
            'migration': json.loads((workdir / 'migration.json').read_text())}
  before, result['legacy_error'] = run_side(driver, legacy, steps, isolated=False,
                                            workdir=workdir, timeout=timeout, site=site,
                                            devices=devices)
  after, result['migrated_error'] = run_side(driver, migrated, steps, isolated=True,
                                             workdir=workdir, timeout=timeout, site=site,
                                            devices=devices)
  if before is not None and after is not None:
    result['compare'] = compare(before, after)
    claim = result['migration']['claim']
    result['within_claim'] = within_claim(before, after, claim) if claim else None
    result['losses'] = {'legacy': before[:steps].tolist(), 'migrated': after[:steps].tolist()}
  return result


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  ap.add_argument('program')
  ap.add_argument('driver')
  ap.add_argument('--steps', type=int, default=5)
  ap.add_argument('--also', action='append', default=[],
                  help='a folder the program imports (a package of its repository)')
  ap.add_argument('--workdir', help='a new folder for the copies (default: a temporary one)')
  ap.add_argument('--reuse', action='store_true',
                  help='run the drivers again on the copies already in --workdir')
  ap.add_argument('--site', help='a folder of pip-installable libraries the program needs '
                  '(ml_collections, ...; `pip install --target DIR --no-deps`), on both sides')
  ap.add_argument('--devices', type=int,
                  help='simulated CPU devices on both sides (XLA_FLAGS), for a pmapped step')
  ap.add_argument('--json', help='write the result here')
  ap.add_argument('--timeout', type=int, default=900, help='seconds per side')
  args = ap.parse_args(argv)
  workdir = pathlib.Path(args.workdir or tempfile.mkdtemp(prefix='both_ways_')).resolve()
  workdir.mkdir(parents=True, exist_ok=True)
  result = both_ways(args.program, args.driver, args.steps, workdir, args.timeout, args.also,
                     args.reuse, args.site, args.devices)
  text = json.dumps(result, indent=1)
  if args.json:
    pathlib.Path(args.json).write_text(text + '\n')
  print(text)
  ok = 'compare' in result and result['within_claim'] is not False
  return 0 if ok else 1


if __name__ == '__main__':
  sys.exit(main())
