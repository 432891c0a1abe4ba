"""Time and peak memory of ``inspect`` / ``convert`` on a large legacy Adam checkpoint.

    python benchmarks/bench_convert.py                 # a ~1 GB checkpoint
    python benchmarks/bench_convert.py --size-mb 64    # smaller, for a quick run

Writes a legacy Adam checkpoint (``{'target', 'state': {'step', 'param_states'}}``, float32
[1024, 1024] leaves, so params are a third of the file) to a temporary directory, then runs
each measurement in a fresh interpreter (so peak RSS is its own):

* ``msgpack_restore``: read the file, ``flax.serialization.msgpack_restore`` of its bytes (the
  reference; its time is also reported without the read);
* ``inspect``: ``convert.inspect(path)``;
* ``to_optax``: ``convert.to_optax(path, Adam(...))`` (jax arrays in memory);
* ``--to optax`` / ``--to train-state`` / ``--to orbax``: the CLI's ``convert PATH --to ...
  --out OUT`` (read, restore, write);
* ``orbax_save``: ``msgpack_restore`` of the file, then orbax's ``StandardCheckpointer().save``
  of the same arrays: what plain orbax alone takes to write them (``--to orbax``'s floor);
* ``--to legacy``: the CLI's ``convert`` of the ``--to train-state`` output back to a legacy
  file (its input is that file, about the size of the legacy one).

Peak memory is the peak RSS (``VmHWM``, reset after imports) minus the RSS after imports, as a
multiple of the input file's size; time as a multiple of ``msgpack_restore``'s (read + parse).
Not a test: numbers depend on the machine (note its load).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
_LEAF = (1024, 1024)


def _status_bytes(field: str) -> int:
  with open('/proc/self/status') as f:
    for line in f:
      if line.startswith(field + ':'):
        return int(line.split()[1]) * 1024
  raise KeyError(field)


def _reset_peak() -> None:
  """Resets the peak RSS (VmHWM) to the current RSS (Linux >= 4.0), so imports do not count."""
  with open('/proc/self/clear_refs', 'w') as f:
    f.write('5')


def write_checkpoint(path: str, size_mb: float) -> int:
  """A legacy Adam checkpoint of about ``size_mb`` MB; returns its size in bytes."""
  import numpy as np
  from flax_optim_compat import convert

  leaf_bytes = 4 * _LEAF[0] * _LEAF[1]
  n = max(1, int(size_mb * 1e6 / (3 * leaf_bytes)))
  rng = np.random.default_rng(0)
  target = {f'layer_{i:03d}': {'kernel': rng.standard_normal(_LEAF, np.float32)}
            for i in range(n)}
  param_states = {k: {'kernel': {'grad_ema': 0.01 * v['kernel'],
                                 'grad_sq_ema': np.square(v['kernel']) * np.float32(1e-3)}}
                  for k, v in target.items()}
  convert.write_msgpack(path, {'target': target, 'state': {
      'step': np.asarray(1000, np.int32), 'param_states': param_states}})
  return os.path.getsize(path)


def measure(what: str, path: str, out: str) -> dict:
  import warnings
  from flax import serialization
  import flax_optim_compat as optim
  from flax_optim_compat._cli import _main as _cli
  from flax_optim_compat import convert

  warnings.simplefilter('ignore', optim.FlaxOptimDeprecationWarning)
  _reset_peak()
  base = _status_bytes('VmRSS')
  result = {}
  start = time.perf_counter()
  if what == 'msgpack_restore':
    with open(path, 'rb') as f:
      data = f.read()
    mid = time.perf_counter()
    serialization.msgpack_restore(data)  # the tree is dropped at once
    result['restore_only_s'] = time.perf_counter() - mid
  elif what == 'orbax_save':
    # The plain-orbax floor of `--to orbax`: parse the file, save the same arrays with orbax's
    # StandardCheckpointer (no conversion).
    import orbax.checkpoint as ocp
    with open(path, 'rb') as f:
      tree = serialization.msgpack_restore(f.read())
    checkpointer = ocp.StandardCheckpointer()
    checkpointer.save(out, tree)
    checkpointer.wait_until_finished()
    checkpointer.close()
  elif what == 'inspect':
    info = convert.inspect(path)
    result['summary'] = info.summary()
  elif what == 'to_optax':
    params, tx, opt_state = convert.to_optax(path, optim.Adam(1e-3))
    import jax
    jax.block_until_ready((params, opt_state))
  elif what.startswith('--to '):
    code = _cli.main(['convert', path, '--optimizer', 'Adam(1e-3)', '--to', what[5:],
                      '--out', out])
    assert code == 0
  result['seconds'] = time.perf_counter() - start
  result['peak_extra_bytes'] = _status_bytes('VmHWM') - base
  return result


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--size-mb', type=float, default=1000.0)
  parser.add_argument('--repeat', type=int, default=1, help='runs per measurement (min taken)')
  parser.add_argument('--json', help='also write the rows to this JSON file')
  parser.add_argument('--measure', nargs=3, metavar=('WHAT', 'PATH', 'OUT'), help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.measure:
    print(json.dumps(measure(*args.measure)))
    return

  with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, 'checkpoint_1000')
    size = write_checkpoint(path, args.size_mb)
    converted = os.path.join(tmp, 'converted.msgpack')
    subprocess.run([sys.executable, '-m', 'flax_optim_compat', 'convert', path, '--optimizer',
                    'Adam(1e-3)', '--to', 'train-state', '--out', converted], check=True,
                   capture_output=True, env=dict(os.environ, PYTHONPATH=ROOT))
    print(f'legacy Adam checkpoint: {size / 1e6:,.0f} MB ({path}); its --to train-state: '
          f'{os.path.getsize(converted) / 1e6:,.0f} MB')
    rows = {}
    for what in ('msgpack_restore', 'inspect', 'to_optax', '--to optax', '--to train-state',
                 '--to orbax', 'orbax_save', '--to legacy'):
      source = converted if what == '--to legacy' else path
      best = None
      for _ in range(args.repeat):
        out = os.path.join(tmp, 'out')
        subprocess.run(['rm', '-rf', out], check=True)
        done = subprocess.run([sys.executable, os.path.abspath(__file__), '--measure', what,
                               source, out], capture_output=True, text=True, check=True,
                              env=dict(os.environ, PYTHONPATH=ROOT))
        result = json.loads(done.stdout.strip().splitlines()[-1])
        result['input_bytes'] = os.path.getsize(source)
        if best is None or result['seconds'] < best['seconds']:
          best = result
      rows[what] = best
    ref = rows['msgpack_restore']['seconds']
    print(f'{"":18s} {"seconds":>8s} {"x restore":>10s} {"peak extra":>12s} {"x input":>8s}')
    for what, r in rows.items():
      print(f'{what:18s} {r["seconds"]:8.2f} {r["seconds"] / ref:10.2f} '
            f'{r["peak_extra_bytes"] / 1e6:10,.0f} MB {r["peak_extra_bytes"] / r["input_bytes"]:8.2f}')
    print(f'(msgpack_restore alone, file already in memory: '
          f'{rows["msgpack_restore"]["restore_only_s"]:.2f} s; --to orbax / orbax_save: '
          f'{rows["--to orbax"]["seconds"] / rows["orbax_save"]["seconds"]:.2f})')
    if args.json:
      with open(args.json, 'w') as f:
        json.dump({'file_bytes': size, 'rows': rows}, f, indent=1)


if __name__ == '__main__':
  main()
