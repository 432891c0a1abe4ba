"""Checkpoint I/O of a large Adam optimizer: this library vs raw msgpack, and vs legacy flax.

Run:  python benchmarks/bench_checkpoint_io.py [--size 50] [--repeats 3] [--no-legacy]

``--size`` is the number of parameters in millions (50 gives a ~573 MiB file: params and
Adam's two moments, float32), in leaves of 1M parameters. Every operation runs in its own
fresh process (so one operation's allocations do not hide another's peak), ``--repeats``
times; the report gives the median seconds and the peak resident memory the operation added
(Linux ``VmHWM``, reset just before it) in multiples of the file size:

* ``msgpack_restore``  ``flax.serialization.msgpack_restore`` of the file's bytes (the floor);
* ``from_bytes``       ``flax.serialization.from_bytes(template, data)``;
* ``save msgpack``     ``flax.training.checkpoints.save_checkpoint`` with the msgpack backend;
* ``restore msgpack``  ``restore_checkpoint`` of that file into a template;
* ``save orbax`` / ``restore orbax``  the same with today's default Orbax backend (ours only).

With the legacy oracle venv present (``--legacy-python``, default
``~/.cache/legacy-flax-oracle/bin/python``), the same operations run there on flax 0.5.3's own
``flax.optim`` (same tree, same file size), for a side-by-side on one machine.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

OPS = ('msgpack_restore', 'from_bytes', 'save msgpack', 'restore msgpack', 'save orbax',
       'restore orbax')
LEGACY_OPS = OPS[:4]
DEFAULT_LEGACY = os.path.expanduser('~/.cache/legacy-flax-oracle/bin/python')
LEAF = 1_000_000


# ----------------------------------------------------------------------------- worker side

def _peak_reset():
  try:
    with open('/proc/self/clear_refs', 'w') as f:
      f.write('5')
    return True
  except OSError:
    return False


def _status_kib(field):
  with open('/proc/self/status') as f:
    for line in f:
      if line.startswith(field + ':'):
        return int(line.split()[1])
  return 0


def _optimizer(optim, jnp, np, size_m):
  rng = np.random.default_rng(0)
  params = {f'layer{i:03d}': jnp.asarray(rng.standard_normal(LEAF, np.float32).reshape(1000, 1000))
            for i in range(size_m)}
  optimizer = optim.Adam(learning_rate=1e-3).create(params)
  grads = {k: jnp.ones_like(v) for k, v in params.items()}
  return optimizer.apply_gradient(grads)  # non-zero moments, step 1


def _worker(op, size_m, directory):
  warnings.simplefilter('ignore')
  import jax
  import jax.numpy as jnp
  import numpy as np
  import flax
  from flax import serialization
  from flax.training import checkpoints
  try:
    from flax import optim  # legacy flax <= 0.5.3
  except ImportError:
    import flax_optim_compat as optim

  optimizer = _optimizer(optim, jnp, np, size_m)
  template = optimizer.optimizer_def.create(
      jax.tree_util.tree_map(jnp.zeros_like, optimizer.target))
  path = os.path.join(directory, 'checkpoint_1')
  data = None
  if op in ('msgpack_restore', 'from_bytes'):
    with open(path, 'rb') as f:
      data = f.read()
  orbax = op.endswith('orbax')
  if (op.startswith('save') or op.startswith('restore')) and hasattr(
      flax.config, 'flax_use_orbax_checkpointing'):  # legacy flax has msgpack only
    flax.config.update('flax_use_orbax_checkpointing', orbax)
  target_dir = os.path.join(directory, 'orbax' if orbax else 'msgpack')
  if op.startswith('save'):
    shutil.rmtree(target_dir, ignore_errors=True)
  jax.block_until_ready((optimizer, template))
  base_kib = _status_kib('VmRSS')
  reset = _peak_reset()
  t0 = time.perf_counter()
  if op == 'msgpack_restore':
    out = serialization.msgpack_restore(data)
  elif op == 'from_bytes':
    out = serialization.from_bytes(template, data)
  elif op.startswith('save'):
    checkpoints.save_checkpoint(target_dir, optimizer, 1, overwrite=True)
    out = None
  else:
    out = checkpoints.restore_checkpoint(target_dir, template)
  jax.block_until_ready(out)
  seconds = time.perf_counter() - t0
  peak_kib = _status_kib('VmHWM') if reset else 0
  if op == 'from_bytes' or op.startswith('restore'):  # same values as saved
    want, got = optimizer.state.param_states['layer000'], out.state.param_states['layer000']
    assert np.array_equal(np.asarray(want.grad_sq_ema), np.asarray(got.grad_sq_ema)), op
    assert int(out.state.step) == 1, op
  print(json.dumps({'seconds': seconds, 'added_bytes': max(0, peak_kib - base_kib) * 1024}))


def _write_file(size_m, directory):
  warnings.simplefilter('ignore')
  import jax.numpy as jnp
  import numpy as np
  from flax import serialization
  try:
    from flax import optim
  except ImportError:
    import flax_optim_compat as optim
  data = serialization.to_bytes(_optimizer(optim, jnp, np, size_m))
  with open(os.path.join(directory, 'checkpoint_1'), 'wb') as f:
    f.write(data)


# ----------------------------------------------------------------------------- driver side

def _run(python, args, env=None):
  out = subprocess.run([python, os.path.abspath(__file__)] + args, capture_output=True,
                       text=True, env=env)
  if out.returncode:
    raise RuntimeError(f'{python} {args} failed:\n{out.stderr[-3000:]}')
  return json.loads(out.stdout.strip().splitlines()[-1])


def _series(python, ops, size_m, repeats, directory, env=None):
  subprocess.run([python, os.path.abspath(__file__), '--_write', directory, '--size',
                  str(size_m)], check=True, capture_output=True, env=env)
  file_size = os.path.getsize(os.path.join(directory, 'checkpoint_1'))
  results = {}
  for op in ops:
    runs = [_run(python, ['--_op', op, '--_dir', directory, '--size', str(size_m)], env)
            for _ in range(repeats)]
    results[op] = (statistics.median(r['seconds'] for r in runs),
                   max(r['added_bytes'] for r in runs) / file_size)
  return file_size, results


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--size', type=int, default=50, help='parameters, in millions')
  parser.add_argument('--repeats', type=int, default=3)
  parser.add_argument('--legacy-python', default=DEFAULT_LEGACY)
  parser.add_argument('--no-legacy', action='store_true')
  parser.add_argument('--_op', help=argparse.SUPPRESS)
  parser.add_argument('--_dir', help=argparse.SUPPRESS)
  parser.add_argument('--_write', help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args._write:
    return _write_file(args.size, args._write)
  if args._op:
    return _worker(args._op, args.size, args._dir)

  env = dict(os.environ, JAX_PLATFORMS='cpu')
  columns = {}
  with tempfile.TemporaryDirectory() as directory:
    file_size, columns['ours'] = _series(sys.executable, OPS, args.size, args.repeats,
                                         directory)
  if not args.no_legacy and os.path.exists(args.legacy_python):
    legacy_env = {k: v for k, v in env.items() if k != 'PYTHONPATH'}
    with tempfile.TemporaryDirectory() as directory:
      _, columns['legacy'] = _series(args.legacy_python, LEGACY_OPS, args.size, args.repeats,
                                     directory, legacy_env)
  print(f'Adam, {args.size}M params, file {file_size / 2**20:.0f} MiB; median of '
        f'{args.repeats} fresh processes; peak = resident memory added, x file size')
  print(f'{"operation":<18}' + ''.join(f'{name + " s":>12}{name + " peak":>14}'
                                        for name in columns))
  for op in OPS:
    row = f'{op:<18}'
    for results in columns.values():
      seconds, peak = results.get(op, (float('nan'), float('nan')))
      row += f'{seconds:>12.3f}{peak:>14.2f}'
    print(row)
  ours = columns['ours']
  print(f'from_bytes / msgpack_restore (ours): '
        f'{ours["from_bytes"][0] / ours["msgpack_restore"][0]:.2f}x')
  if 'legacy' in columns:
    legacy = columns['legacy']
    print(f'from_bytes / msgpack_restore (legacy): '
          f'{legacy["from_bytes"][0] / legacy["msgpack_restore"][0]:.2f}x')


if __name__ == '__main__':
  main()
