"""flax_optim_compat against hand-written optax and against flax 0.5.3, in one run.

Run (from a clone, with the README's venv):

  .venv/bin/python benchmarks/bench.py --quick          # < 3 minutes on 2 CPU cores
  .venv/bin/python benchmarks/bench.py --subset         # full-size trees; Adam beyond tiny
  .venv/bin/python benchmarks/bench.py                  # every case and optimizer
  .venv/bin/python benchmarks/bench.py --out results/x.json --cases tiny --optimizers Adam

For each case (tree) and optimizer it times, against the same update written with public optax
(``tx.update`` + ``optax.apply_updates``; see ``_cases.make_optax``):

* ``step``: one jitted, donated step (chained calls, dispatch included);
* ``lower`` / ``compile``: trace+lower and XLA compile of a fresh function (cold);
* ``eager``: an un-jitted step: ``Optimizer.apply_gradient`` called outside ``jit``, whatever the
  package does there (today: its cached compiled step, ``flax_optim_compat._compiled_step``), vs the
  optax step called un-jitted;
* ``create`` (vs ``tx.init``), ``to_bytes`` / ``from_bytes`` (vs the same calls on
  ``(params, opt_state)``), ``restore`` of a legacy checkpoint file with
  ``flax.training.checkpoints.restore_checkpoint`` vs ``serialization.msgpack_restore`` of the
  same bytes;
* ``memory_analysis()`` of the donated compiled step: temp bytes vs the largest leaf.

Ours and optax are timed interleaved (round after round) and each number is the minimum of the
round medians: the machine is shared and noisy. The legacy columns (eager, step, compile) come
from ``legacy_side.py``, the same code run by the legacy oracle interpreter (flax 0.5.3, jax
0.4.13) as a subprocess of this run; without that interpreter they are skipped with a note.
Prints a table of ratios and writes everything to JSON.
"""
import argparse
import datetime
import json
import os
import platform
import queue
import subprocess
import sys
import tempfile
import threading
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import jax  # pylint: disable=g-import-not-at-top
import optax  # pylint: disable=g-import-not-at-top
from flax import serialization  # pylint: disable=g-import-not-at-top
from flax.training import checkpoints  # pylint: disable=g-import-not-at-top

import flax_optim_compat as optim  # pylint: disable=g-import-not-at-top
import _cases  # pylint: disable=g-import-not-at-top

warnings.simplefilter('ignore', optim.FlaxOptimDeprecationWarning)

LEGACY_PYTHON = os.environ.get('FLAX_OPTIM_COMPAT_ORACLE_PYTHON',
                               os.path.expanduser('~/.cache/legacy-flax-oracle/bin/python'))
RESTORE_OPTIMIZERS = ('Adam', 'MultiOptimizer(Adam,Momentum)')

MODES = {
    'quick': dict(
        plan={'tiny': _cases.OPTIMIZERS,
              'many_small': ('Adam', 'Momentum'),
              'resnet_like': ('Adam',)},
        step_rounds=3, step_reps=5, eager_rounds=2, eager_reps=2, compile_reps=1,
        small_rounds=2, small_reps=3, legacy_row_timeout=40, dispatch=False,
        legacy_metrics={'many_small': ['eager']},
        note='quick mode: tiny (every optimizer), many_small (Adam, Momentum), '
             'resnet_like at 1/4 width (161 leaves, 2.0M params; Adam); few_large '
             'skipped; one cold compile per row (7 on tiny); legacy many_small: eager only '
             '(jax 0.4.13 compiles its 1000-leaf steps for minutes); legacy rows over 40 s '
             'are skipped; no dispatch breakdown'),
    'subset': dict(
        plan={'tiny': _cases.OPTIMIZERS, 'many_small': ('Adam',), 'resnet_like': ('Adam',),
              'few_large': ('Adam',)},
        step_rounds=3, step_reps=5, eager_rounds=2, eager_reps=3, compile_reps=2,
        small_rounds=2, small_reps=3, legacy_row_timeout=240,
        legacy_metrics={'many_small': ['eager']},
        note='subset mode: full-size trees; tiny (every optimizer), many_small, resnet_like '
             '(25.6M params) and few_large (4 x 4096x4096) with Adam only; fewer rounds than '
             'full; legacy many_small: eager only; legacy rows over 240 s are skipped'),
    'full': dict(
        plan={case: _cases.OPTIMIZERS for case in _cases.CASES},
        step_rounds=5, step_reps=10, eager_rounds=3, eager_reps=3, compile_reps=3,
        small_rounds=3, small_reps=3, legacy_row_timeout=240, legacy_metrics={},
        note='full mode: every case and optimizer; legacy rows over 240 s are skipped'),
}


# ----------------------------------------------------------------------------- legacy side

def run_legacy(rows, mode, cfg, ckpt_dir, log):
  """Legacy-oracle rows ``{(case, optimizer): {...}}``; a row over the timeout is recorded as such."""
  if not os.path.exists(LEGACY_PYTHON):
    return {}, f'legacy columns skipped: no oracle interpreter at {LEGACY_PYTHON}'
  results, versions, pending = {}, None, list(rows)
  while pending:
    job = dict(rows=pending, quick=mode == 'quick',
               eager_rounds=cfg['eager_rounds'], eager_reps=cfg['eager_reps'],
               compile_reps=cfg['compile_reps'], step_rounds=cfg['step_rounds'],
               step_reps=cfg['step_reps'], ckpt_dir=ckpt_dir,
               ckpt_optimizers=RESTORE_OPTIMIZERS)
    env = dict(os.environ, JAX_PLATFORMS='cpu', PYTHONWARNINGS='ignore')
    env.pop('XLA_FLAGS', None)
    proc = subprocess.Popen([LEGACY_PYTHON, os.path.join(HERE, 'legacy_side.py'), json.dumps(job)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(l) for l in proc.stdout] + [lines.put(None)],
                     daemon=True).start()
    first = True
    while pending:
      try:
        line = lines.get(timeout=cfg['legacy_row_timeout'] + (60 if first else 0))
      except queue.Empty:
        case, opt_name, _ = pending.pop(0)
        results[(case, opt_name)] = {'timeout_s': cfg['legacy_row_timeout']}
        log(f'  legacy {case} {opt_name}: over {cfg["legacy_row_timeout"]} s, skipped')
        proc.kill()
        proc.wait()
        break
      if line is None:  # crashed: record the row it was on and go on after it
        case, opt_name, _ = pending.pop(0)
        results[(case, opt_name)] = {'error': 'legacy side exited'}
        break
      data = json.loads(line)
      if first:
        versions, first = data['versions'], False
        continue
      key = (data.pop('case'), data.pop('optimizer'))
      pending.pop(0)
      results[key] = data
      log(f'  legacy {key[0]} {key[1]}: ' + ', '.join(
          f'{k}={v:.4g}' if isinstance(v, float) else f'{k}={v}' for k, v in data.items()))
    else:
      proc.wait()
  return results, f'legacy: flax {versions and versions["flax"]}, jax {versions and versions["jax"]}'


# ----------------------------------------------------------------------------- our side

def _memory(compiled, largest_leaf):
  try:
    m = compiled.memory_analysis()
  except Exception:  # pylint: disable=broad-except
    return None
  if m is None:
    return None
  return {'temp_bytes': int(m.temp_size_in_bytes), 'argument_bytes': int(m.argument_size_in_bytes),
          'output_bytes': int(m.output_size_in_bytes), 'alias_bytes': int(m.alias_size_in_bytes),
          'temp_over_largest_leaf': m.temp_size_in_bytes / largest_leaf}


def measure_row(case, opt_name, params, grads, cfg, ckpt_file, log):
  opt_def = _cases.make_def(optim, opt_name)
  if opt_def is None:
    return {'skipped': 'flax_optim_compat.from_optax does not exist yet'}
  tx = _cases.make_optax(opt_name)
  optax_step = _cases.optax_step_fn(tx)
  out = {}
  largest = _cases.count(params)[2]
  rounds, reps = cfg['small_rounds'], cfg['small_reps']

  # create / init
  t = _cases.interleaved({'ours': lambda: opt_def.create(params), 'optax': lambda: tx.init(params)},
                         rounds, reps)
  out['create'] = t
  optimizer = _cases.block(opt_def.create(params))
  opt_state = _cases.block(tx.init(params))

  # cold trace+lower and compile, alternating
  lowers, compiles = {'ours': [], 'optax': []}, {'ours': [], 'optax': []}
  # one cold compile per round, the minimum kept: tiny steps compile in ~10-300 ms, where one
  # disturbance decides a ratio, so they take samples_for's tiny round count
  n_compiles, _ = _cases.samples_for(case, cfg['compile_reps'], 1)
  for _ in range(n_compiles):
    lo, co, ours_compiled = _cases.cold_compile(lambda: _cases.legacy_api_step,
                                                (optimizer, grads), donate=(0,))
    lowers['ours'].append(lo)
    compiles['ours'].append(co)
    lo, co, optax_compiled = _cases.cold_compile(lambda: _cases.optax_step_fn(tx),
                                                 (params, opt_state, grads), donate=(0, 1))
    lowers['optax'].append(lo)
    compiles['optax'].append(co)
  out['lower'] = {k: min(v) for k, v in lowers.items()}
  out['compile'] = {k: min(v) for k, v in compiles.items()}
  out['memory'] = {'ours': _memory(ours_compiled, largest),
                   'optax': _memory(optax_compiled, largest)}

  # jitted donated step, chained
  copy = lambda tree: jax.tree_util.tree_map(lambda x: x.copy(), tree)
  ours = _cases.chained(ours_compiled, copy(optimizer), grads, n_carry=1)
  theirs = _cases.chained(optax_compiled, copy(params), copy(opt_state), grads, n_carry=2)
  ours(), theirs()
  out['step'] = _cases.interleaved({'ours': ours, 'optax': theirs},
                                   *_cases.samples_for(case, cfg['step_rounds'], cfg['step_reps']))
  del ours, theirs

  # eager (un-jitted) step
  fns = {'ours': lambda: optimizer.apply_gradient(grads),
         'optax': lambda: optax_step(params, opt_state, grads)}
  for fn in fns.values():
    _cases.timed(fn)
  out['eager'] = _cases.interleaved(
      fns, *_cases.samples_for(case, cfg['eager_rounds'], cfg['eager_reps']))

  # serialization
  b_ours = serialization.to_bytes(optimizer)
  b_optax = serialization.to_bytes((params, opt_state))
  out['to_bytes'] = _cases.interleaved(
      {'ours': lambda: serialization.to_bytes(optimizer),
       'optax': lambda: serialization.to_bytes((params, opt_state))}, rounds, reps)
  out['from_bytes'] = _cases.interleaved(
      {'ours': lambda: serialization.from_bytes(optimizer, b_ours),
       'optax': lambda: serialization.from_bytes((params, opt_state), b_optax)}, rounds, reps)
  out['bytes'] = {'ours': len(b_ours), 'optax': len(b_optax)}

  if ckpt_file is not None:
    def read():
      with open(ckpt_file, 'rb') as f:
        return f.read()
    # The same restore of the optax layout ((params, opt_state), written here): flax's own
    # per-call cost of restore_checkpoint, without this package.
    optax_dir = os.path.dirname(ckpt_file) + '--optax'
    os.makedirs(optax_dir, exist_ok=True)
    with open(os.path.join(optax_dir, 'checkpoint_1'), 'wb') as f:
      f.write(b_optax)
    out['restore'] = _cases.interleaved(
        {'restore_checkpoint': lambda: checkpoints.restore_checkpoint(
            os.path.dirname(ckpt_file), target=optimizer),
         'restore_checkpoint_optax': lambda: checkpoints.restore_checkpoint(
             optax_dir, target=(params, opt_state)),
         'from_bytes': lambda: serialization.from_bytes(optimizer, read()),
         'msgpack_restore': lambda: serialization.msgpack_restore(read())}, rounds, reps)
  log(f'  ours {case} {opt_name}: step {out["step"]["ours"] * 1e3:.3f}/'
      f'{out["step"]["optax"] * 1e3:.3f} ms, eager {out["eager"]["ours"] * 1e3:.2f}/'
      f'{out["eager"]["optax"] * 1e3:.2f} ms')
  return out


def measure_dispatch(cfg):
  """Host-side cost of one jitted, donated Adam step on 1000 small leaves: ours vs optax, by part.

  ``call_*`` is the time until the jitted call returns (jax dispatches asynchronously, so this is
  the Python/pytree/argument-handling cost), ``step_*`` the time until the result is ready.
  """
  shapes = _cases.case_shapes('many_small')
  params = _cases.make_tree(shapes, 0)
  grads = _cases.make_tree(shapes, 1, scale=1e-2)
  opt_def, tx = _cases.make_def(optim, 'Adam'), _cases.make_optax('Adam')
  optimizer, opt_state = opt_def.create(params), tx.init(params)
  ours = jax.jit(_cases.legacy_api_step, donate_argnums=0)
  theirs = jax.jit(_cases.optax_step_fn(tx), donate_argnums=(0, 1))
  copy = lambda tree: jax.tree_util.tree_map(lambda x: x.copy(), tree)
  steps = {'ours': _cases.chained(ours, copy(optimizer), grads, n_carry=1),
           'optax': _cases.chained(theirs, copy(params), copy(opt_state), grads, n_carry=2)}
  leaves_o, treedef_o = jax.tree_util.tree_flatten((optimizer, grads))
  leaves_x, treedef_x = jax.tree_util.tree_flatten(((params, opt_state), grads))
  parts = {
      'flatten_ours': lambda: jax.tree_util.tree_flatten((optimizer, grads)),
      'flatten_optax': lambda: jax.tree_util.tree_flatten(((params, opt_state), grads)),
      'unflatten_ours': lambda: treedef_o.unflatten(leaves_o),
      'unflatten_optax': lambda: treedef_x.unflatten(leaves_x),
  }
  for fn in list(steps.values()) + list(parts.values()):
    _cases.timed(fn)
  rounds, reps = cfg['step_rounds'], cfg['step_reps']
  t = {f'call_{k}': v for k, v in _cases.interleaved(steps, rounds, reps, _cases.returned).items()}
  t.update({f'step_{k}': v for k, v in _cases.interleaved(steps, rounds, reps).items()})
  t.update(_cases.interleaved(parts, rounds, reps))
  t['leaves'] = {'ours': len(leaves_o), 'optax': len(leaves_x)}
  t['treedef_nodes'] = {'ours': treedef_o.num_nodes, 'optax': treedef_x.num_nodes}
  return t


# ----------------------------------------------------------------------------- report

def _ratio(a, b):
  return None if a is None or b is None or not b else a / b


def ratios(row, legacy):
  def get(metric, side):
    return (row.get(metric) or {}).get(side)
  r = {}
  for metric in ('step', 'lower', 'compile', 'create', 'to_bytes', 'from_bytes'):
    r[f'{metric} ours/optax'] = _ratio(get(metric, 'ours'), get(metric, 'optax'))
  r['eager ours/optax'] = _ratio(get('eager', 'ours'), get('eager', 'optax'))
  if legacy and 'eager_s' in legacy:
    r['eager ours/legacy'] = _ratio(get('eager', 'ours'), legacy['eager_s'])
  if legacy and 'step_s' in legacy:
    r['step ours/legacy'] = _ratio(get('step', 'ours'), legacy['step_s'])
  if legacy and 'compile_s' in legacy:
    r['lower+compile ours/legacy'] = _ratio(get('lower', 'ours') + get('compile', 'ours'),
                                            legacy['lower_s'] + legacy['compile_s'])
  if 'restore' in row:
    r['restore/msgpack'] = _ratio(row['restore']['restore_checkpoint'],
                                  row['restore']['msgpack_restore'])
    r['file from_bytes/msgpack'] = _ratio(row['restore']['from_bytes'],
                                          row['restore']['msgpack_restore'])
    r['restore ours/optax'] = _ratio(row['restore']['restore_checkpoint'],
                                     row['restore'].get('restore_checkpoint_optax'))
  mem = (row.get('memory') or {}).get('ours')
  if mem:
    r['temp/largest leaf'] = mem['temp_over_largest_leaf']
  return r


COLUMNS = ('step ours/optax', 'lower ours/optax', 'compile ours/optax', 'eager ours/optax',
           'eager ours/legacy', 'step ours/legacy',
           'lower+compile ours/legacy', 'create ours/optax', 'to_bytes ours/optax',
           'from_bytes ours/optax', 'restore/msgpack', 'file from_bytes/msgpack',
           'restore ours/optax', 'temp/largest leaf')
SHORT = ('step/optax', 'lower/optax', 'compile/optax', 'eager/optax',
         'eager/legacy', 'step/legacy', 'compile/legacy', 'create/init',
         'to_bytes', 'from_bytes', 'restore/raw', 'from_bytes/raw', 'restore/optax',
         'temp/leaf')


def table(results):
  lines = ['| case | optimizer | ' + ' | '.join(SHORT) + ' |',
           '|---|---|' + '---|' * len(SHORT)]
  for res in results:
    r = res.get('ratios')
    if not r:
      lines.append(f'| {res["case"]} | {res["optimizer"]} | ' +
                   (res.get('ours', {}).get('skipped') or 'skipped') + ' |')
      continue
    cells = ['' if r.get(c) is None else f'{r[c]:.2f}' for c in COLUMNS]
    lines.append(f'| {res["case"]} | {res["optimizer"]} | ' + ' | '.join(cells) + ' |')
  return '\n'.join(lines)


def geomeans(results):
  import math  # pylint: disable=g-import-not-at-top
  out = {}
  for c in COLUMNS:
    vals = [res['ratios'][c] for res in results
            if res.get('ratios') and res['ratios'].get(c)]
    if vals:
      out[c] = {'geomean': math.exp(sum(math.log(v) for v in vals) / len(vals)),
                'max': max(vals), 'n': len(vals)}
  return out


def _cpu_model():
  try:
    with open('/proc/cpuinfo') as f:
      return next((l.split(':', 1)[1].strip() for l in f if l.startswith('model name')), None)
  except OSError:
    return platform.processor() or None


def _git_describe():
  """``git describe`` of the measured package's checkout (a worktree under PYTHONPATH too)."""
  try:
    return subprocess.run(['git', 'describe', '--always', '--dirty'],
                          cwd=os.path.dirname(os.path.abspath(optim.__file__)), text=True,
                          capture_output=True, check=True).stdout.strip()
  except (OSError, subprocess.CalledProcessError):
    return None


def _package_source():
  """Where the measured package comes from, without this machine's absolute paths."""
  package = os.path.dirname(os.path.abspath(optim.__file__))
  if os.path.dirname(package) == os.path.dirname(HERE):
    return 'this checkout'
  return 'a checkout on PYTHONPATH outside this one (see "git")'


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--quick', action='store_true', help='subset, < 3 minutes on 2 cores')
  parser.add_argument('--subset', action='store_true',
                      help='full-size trees, every optimizer on tiny, Adam on every other case')
  parser.add_argument('--out', default=None, help='JSON path (default results/<mode>-latest.json)')
  parser.add_argument('--cases', nargs='*', help='only these cases')
  parser.add_argument('--optimizers', nargs='*', help='only these optimizers')
  parser.add_argument('--no-legacy', action='store_true', help='skip the oracle subprocess')
  args = parser.parse_args()
  mode = 'quick' if args.quick else 'subset' if args.subset else 'full'
  cfg = MODES[mode]
  started = time.time()
  log = lambda msg: print(f'[{time.time() - started:6.1f}s] {msg}', flush=True)
  plan = [(case, opt) for case, opts in cfg['plan'].items() for opt in opts
          if (not args.cases or case in args.cases)
          and (not args.optimizers or opt in args.optimizers)]
  notes = [cfg['note'],
           'WeightNorm(Adam): optax has no weight normalisation; its optax column is '
           '_cases.weight_norm_transform(optax.adamw), the same math written by hand; '
           'from_optax(adamw): its optax column injects the hyper-params as from_optax does '
           '(optax.inject_hyperparams(optax.adamw))',
           f'device: {jax.default_backend()} ({jax.devices()[0].device_kind}), '
           f'{os.cpu_count()} cores; no GPU was available for this run'
           if jax.default_backend() == 'cpu' else f'device: {jax.devices()[0].device_kind}']
  notes.append(f'flax_optim_compat {optim.__version__} from {_package_source()}')

  log(f'flax_optim_compat {optim.__version__}: {optim.__file__}')
  ckpt_dir = tempfile.mkdtemp(prefix='bench-ckpt-')
  legacy, legacy_note = {}, 'legacy columns skipped (--no-legacy)'
  if not args.no_legacy:
    log(f'legacy side ({LEGACY_PYTHON})')
    legacy_rows = [[c, o, cfg['legacy_metrics'].get(c, ['eager', 'compile', 'step'])]
                   for c, o in plan if o != 'from_optax(adamw)']
    legacy, legacy_note = run_legacy(legacy_rows, mode, cfg, ckpt_dir, log)
  notes.append(legacy_note)

  results = []
  for case in dict.fromkeys(c for c, _ in plan):
    shapes = _cases.case_shapes(case, quick=mode == 'quick')
    params = _cases.make_tree(shapes, 0)
    grads = _cases.make_tree(shapes, 1, scale=1e-2)
    n_leaves, n_params, largest = _cases.count(params)
    log(f'{case}: {n_leaves} leaves, {n_params:,} params, largest leaf {largest:,} bytes')
    for opt_name in [o for c, o in plan if c == case]:
      ckpt_file = None
      if opt_name in RESTORE_OPTIMIZERS:
        ckpt_file = os.path.join(ckpt_dir, f'{case}--{opt_name}', 'checkpoint_1')
        if not os.path.exists(ckpt_file):  # no legacy file: ours has the same layout
          os.makedirs(os.path.dirname(ckpt_file), exist_ok=True)
          with open(ckpt_file, 'wb') as f:
            f.write(serialization.to_bytes(
                _cases.make_def(optim, opt_name).create(params).apply_gradient(grads)))
          notes.append(f'restore {case} {opt_name}: file written by this package (no legacy file)')
      row = measure_row(case, opt_name, params, grads, cfg, ckpt_file, log)
      res = {'case': case, 'optimizer': opt_name, 'leaves': n_leaves, 'params': n_params,
             'ours': row, 'legacy': legacy.get((case, opt_name))}
      if 'skipped' not in row:
        res['ratios'] = ratios(row, res['legacy'])
      results.append(res)
    del params, grads

  dispatch = {}
  if cfg.get('dispatch', True):
    log('dispatch (many_small, Adam)')
    dispatch = measure_dispatch(cfg)
  summary = geomeans(results)
  report = {
      'meta': {'date': datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds'),
               'mode': mode, 'jax': jax.__version__, 'optax': optax.__version__,
               'flax_optim_compat': optim.__version__, 'python': platform.python_version(),
               'machine': platform.machine(), 'cpu': _cpu_model(), 'cpu_count': os.cpu_count(),
               'backend': jax.default_backend(), 'seconds': round(time.time() - started, 1),
               'git': _git_describe()},
      'notes': notes, 'results': results, 'dispatch': dispatch, 'summary': summary}
  print()
  print(table(results))
  print()
  print('geomean (max) over rows: ' + ', '.join(
      f'{k} {v["geomean"]:.2f} ({v["max"]:.2f})' for k, v in summary.items()))
  if dispatch:
    print('dispatch, many_small Adam (us): ' + ', '.join(
        f'{k} {v * 1e6:.0f}' for k, v in dispatch.items() if isinstance(v, float)))
  for note in notes:
    print(f'note: {note}')
  out = args.out or os.path.join(HERE, 'results', f'{mode}-latest.json')
  os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
  with open(out, 'w') as f:
    json.dump(report, f, indent=1, default=lambda x: x.item() if hasattr(x, 'item') else str(x))
  log(f'wrote {out}')


if __name__ == '__main__':
  main()
