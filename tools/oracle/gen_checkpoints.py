"""Golden checkpoints in both directions, between the legacy flax.optim and flax_optim_compat.

Run in the legacy oracle venv, from the repository root::

    ~/.cache/legacy-flax-oracle/bin/python -m tools.oracle.gen_checkpoints \\
        [--modern-python PY] [--out DIR] [CASE ...]

For every case of ``catalogue.CHECKPOINTS`` (all if none are named) it

1. trains the legacy optimizer (or a train state holding one) for STEPS_BEFORE steps and writes
   it with legacy ``flax.training.checkpoints.save_checkpoint`` to
   tests/fixtures/checkpoints/legacy/<case>/checkpoint_3 (kept byte-for-byte as written);
2. restores that file into a fresh legacy template and continues STEPS_AFTER steps (jit, and
   eager for the cases marked ``eager``): the oracle's own trajectory the tests compare with;
3. runs this module in the modern venv (``--write-ours``; PY is ``--modern-python`` or the
   ``FLAX_OPTIM_COMPAT_DEV_PYTHON`` environment variable, e.g. ``.venv/bin/python``), which
   trains flax_optim_compat on the same inputs and writes tests/fixtures/checkpoints/ours/<case>/
   checkpoint_3 (modern ``save_checkpoint`` with the msgpack backend) and checks that those
   bytes are exactly ``flax.serialization.to_bytes`` of the same object;
4. restores our files in the legacy library (``restore_checkpoint`` and ``from_bytes``) and
   continues STEPS_AFTER steps there, recording the result;

and stores inputs and results in tests/fixtures/checkpoints/expected.msgpack (cases not named
keep their entries). The tests (tests/test_checkpoints.py) never need the oracle venv: they
replay our side on the legacy files and check the recorded legacy restores and continuations of
our files. Regenerate after changing a case, or when an optimizer's numerics or state layout
change (the tests say so).
"""
import argparse
import json
import os
import shutil
import subprocess
import tempfile
import warnings

from tools import oracle

oracle.use_eight_cpu_devices()
warnings.simplefilter('ignore')

import jax  # noqa: E402
import numpy as np  # noqa: E402
from flax import serialization  # noqa: E402
from flax import struct  # noqa: E402
from flax.core import freeze  # noqa: E402
from flax.training import checkpoints  # noqa: E402

from tests import catalogue  # noqa: E402
from tests import checkpoint_specs as specs  # noqa: E402

OUT = os.path.join(oracle.FIXTURES, 'checkpoints')
STEP = specs.STEPS_BEFORE


def _side(optim, dynamic_scale_cls):
  kw = dict(jax=jax, freeze=freeze)
  create = lambda case: specs.create(optim, case, struct=struct,
                                     dynamic_scale_cls=dynamic_scale_cls, **kw)
  run = lambda obj, case, steps, jit=True: specs.run(
      obj, case, steps, to_state_dict=serialization.to_state_dict, jit=jit, **kw)
  return create, run


def _max_rel(actual, expected):
  """max over leaves of max|a - e| / max|e| (0 for equal trees)."""
  worst = 0.0
  for a, e in zip(jax.tree_util.tree_leaves(actual), jax.tree_util.tree_leaves(expected)):
    a, e = np.asarray(a, np.float64), np.asarray(e, np.float64)
    scale = np.max(np.abs(e)) if e.size else 0.0
    diff = np.max(np.abs(a - e)) if a.size else 0.0
    worst = max(worst, float(diff / scale) if scale else float(diff))
  return worst


def _fresh_dir(path):
  shutil.rmtree(path, ignore_errors=True)
  os.makedirs(path)
  return path


def write_ours(cases_file, out):
  """Modern venv: flax_optim_compat trains each case and writes its checkpoint files."""
  import flax  # pylint: disable=g-import-not-at-top
  import flax_optim_compat as optim  # pylint: disable=g-import-not-at-top
  from flax_optim_compat import dynamic_scale  # pylint: disable=g-import-not-at-top

  flax.config.update('flax_use_orbax_checkpointing', False)
  create, run = _side(optim, dynamic_scale.DynamicScale)
  with open(cases_file, 'rb') as f:
    cases = serialization.msgpack_restore(f.read())
  report = {}
  for name, case in cases.items():
    try:
      obj = create(case)
    except NotImplementedError as e:
      report[name] = f'not implemented: {e}'
      continue
    obj, _ = run(obj, case, specs.BEFORE)
    directory = _fresh_dir(os.path.join(out, 'ours', name))
    path = checkpoints.save_checkpoint(directory, obj, STEP)
    with open(path, 'rb') as f:
      assert f.read() == serialization.to_bytes(obj), 'save_checkpoint != to_bytes'
    report[name] = 'written'
  print(json.dumps(report))


def generate(names, modern_python, out):
  from flax import optim  # pylint: disable=g-import-not-at-top
  from flax.optim import dynamic_scale  # pylint: disable=g-import-not-at-top
  warnings.simplefilter('ignore')  # flax.optim re-enables its DeprecationWarnings on import

  create, run = _side(optim, dynamic_scale.DynamicScale)
  cases = {name: specs.make_case(name) for name in names}
  expected = {}
  for name, case in cases.items():
    obj, _ = run(create(case), case, specs.BEFORE)
    directory = _fresh_dir(os.path.join(out, 'legacy', name))
    path = checkpoints.save_checkpoint(directory, obj, STEP)
    _, uninterrupted = run(obj, case, specs.AFTER)
    continued = {}
    for mode in specs.modes(case):
      restored = checkpoints.restore_checkpoint(directory, target=create(case))
      after, continued[mode] = run(restored, case, specs.AFTER, jit=mode == 'jit')
      eager_file = catalogue.CHECKPOINTS[name].eager_file
      if mode == 'eager' and eager_file:
        checkpoints.save_checkpoint(_fresh_dir(os.path.join(out, 'legacy', eager_file)),
                                    after, STEP + specs.STEPS_AFTER)
    expected[name] = {'case': case, 'file': os.path.relpath(path, out), 'continued': continued,
                      # restore + continue vs never checkpointed, in the legacy library itself
                      'legacy_restart_max_rel': _max_rel(continued['jit'], uninterrupted)}
    if case['kind'] == 'plain':
      expected[name]['created_bytes'] = serialization.to_bytes(create(case))
    print(f'{name}: legacy checkpoint {os.path.getsize(path)} bytes')

  with tempfile.TemporaryDirectory() as tmp:
    cases_file = os.path.join(tmp, 'cases.msgpack')
    with open(cases_file, 'wb') as f:
      f.write(serialization.msgpack_serialize(cases))
    done = subprocess.run(
        [modern_python, '-m', 'tools.oracle.gen_checkpoints', '--out', out,
         '--write-ours', cases_file],
        cwd=oracle.ROOT, check=True, capture_output=True, text=True)
  report = json.loads(done.stdout.strip().splitlines()[-1])

  for name, case in cases.items():
    status = report.get(name, 'missing')
    result = {'status': status}
    if status == 'written':
      directory = os.path.join(out, 'ours', name)
      with open(os.path.join(directory, f'checkpoint_{STEP}'), 'rb') as f:
        written = f.read()
      via_checkpoint = checkpoints.restore_checkpoint(directory, target=create(case))
      via_bytes = serialization.from_bytes(create(case), written)
      result['restored'] = serialization.to_state_dict(via_checkpoint)
      result['restored_from_bytes'] = serialization.to_state_dict(via_bytes)
      _, result['continued'] = run(via_checkpoint, case, specs.AFTER)
      _, from_bytes_continued = run(via_bytes, case, specs.AFTER)
      result['continued_from_bytes_last'] = from_bytes_continued[-1]
    expected[name]['from_ours'] = result
    print(f'{name}: ours {status}')

  oracle.update_msgpack(os.path.join(out, 'expected.msgpack'), expected)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--write-ours', metavar='CASES_FILE', help=argparse.SUPPRESS)
  parser.add_argument('--modern-python', default=os.environ.get('FLAX_OPTIM_COMPAT_DEV_PYTHON'),
                      help='python of a venv with flax_optim_compat installed (.ci/run makes .venv)')
  parser.add_argument('--out', default=OUT, help=f'output directory (default: {OUT})')
  parser.add_argument('cases', nargs='*', help='case names (default: all)')
  args = parser.parse_args(argv)
  unknown = sorted(set(args.cases) - set(catalogue.CHECKPOINTS))
  if unknown:
    parser.error(f'unknown cases {unknown}; known: {sorted(catalogue.CHECKPOINTS)}')
  if args.write_ours:
    write_ours(args.write_ours, args.out)
  elif not args.modern_python:
    parser.error('pass --modern-python PY (or set FLAX_OPTIM_COMPAT_DEV_PYTHON): the python of a '
                 'venv where flax_optim_compat and modern flax are installed')
  else:
    generate(args.cases or list(catalogue.CHECKPOINTS), args.modern_python, args.out)


if __name__ == '__main__':
  main()
