"""flax_optim_compat against plain optax as the number of leaves grows, in one process.

Run (from a clone, with the README's venv):

  .venv/bin/python benchmarks/bench_leaves.py --quick     # < 2 minutes on 2 CPU cores
  .venv/bin/python benchmarks/bench_leaves.py             # more rounds, 1000/3000 leaves too
  .venv/bin/python benchmarks/bench_leaves.py --large     # + restore of a ~1 GB Adam file
  .venv/bin/python benchmarks/bench_leaves.py --parts restore step --leaves 300

Trees: ``n`` float32 leaves of shape (32, 32) in a nested dict (blocks of 100). Parts:

* ``restore`` (Adam): ``serialization.from_bytes(optimizer, data)``, ``optimizer.restore_state``
  of the decoded state dict and ``checkpoints.restore_checkpoint`` of the same file, against
  ``serialization.msgpack_restore(data)`` (the raw parse) and against the same calls on a
  plain optax ``flax.training.train_state.TrainState`` (``optax.adamw``, same params);
* ``first`` (Adam): restore + one jitted, donated, already compiled training step, until the
  result is ready: what a resumed run pays before its second step; ours vs the optax
  ``TrainState``;
* ``step``: one jitted, donated step (chained calls, dispatch included) of SGD, Momentum and
  Adam: ours (``Optimizer``), ``proto`` (``prototypes/flat_optimizer.py``: the same
  optimizer as one pytree node of flat leaves, not adopted), plain optax, and ``floor``: our
  very step function taking and returning a flat list of leaves (no tree nodes to flatten);
  and, for each side, the cost of flattening what it carries and rebuilding it from the
  leaves (what jax does to a jitted call's arguments and results), without the compute;
* ``trace``: of a fresh jitted step (Adam), each phase timed: ``jit(f).trace`` (Python
  tracing), ``.lower()`` (to StableHLO) and ``.compile()`` (XLA); ours vs optax.

Timing: the sides of a comparison alternate within each round (their order reversed every
other round), each round takes the median of its repetitions, and a figure is the median of
the rounds with their [min-max]; a ratio is the median of the per-round ratios [min-max]. The
machine this was written on is shared (2 cores): read the spread before a ratio.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, 'prototypes'))

import flax  # pylint: disable=g-import-not-at-top
import jax  # pylint: disable=g-import-not-at-top
import optax  # pylint: disable=g-import-not-at-top
from flax import serialization  # pylint: disable=g-import-not-at-top
from flax.training import checkpoints  # pylint: disable=g-import-not-at-top
from flax.training import train_state  # pylint: disable=g-import-not-at-top

import flax_optim_compat as optim  # pylint: disable=g-import-not-at-top
import _cases  # pylint: disable=g-import-not-at-top
import flat_optimizer  # pylint: disable=g-import-not-at-top

warnings.simplefilter('ignore', optim.FlaxOptimDeprecationWarning)

MODES = {
    'quick': dict(restore=(10, 300, 1000), first=(10, 300), step=(10, 300), trace=(10, 300),
                  rounds=3, reps=5, step_reps=20, trace_rounds=3),
    'full': dict(restore=(10, 300, 1000, 3000), first=(10, 300, 1000), step=(10, 300, 3000),
                 trace=(10, 300, 3000), rounds=7, reps=7, step_reps=30, trace_rounds=3),
}
STEP_OPTIMIZERS = ('SGD', 'Momentum', 'Adam')
LARGE_SHAPES = {f'w{i:02d}': (2048, 2048) for i in range(20)}  # 83.9M params: a 1.0 GB Adam file


def leaf_tree(n):
  """``n`` leaves of (32, 32) in blocks of 100: {'block0': {'leaf00': ..., ...}, ...}."""
  return {f'block{b}': {f'leaf{i % 100:02d}': (32, 32)
                        for i in range(100 * b, min(n, 100 * b + 100))}
          for b in range((n + 99) // 100)}


# ----------------------------------------------------------------------------- timing

def rounds(fns, n_rounds, reps, clock=_cases.timed):
  """``{name: [round medians]}``; names alternate inside a round, reversed every other round."""
  out = {name: [] for name in fns}
  names = list(fns)
  for r in range(n_rounds):
    for name in (names if r % 2 == 0 else names[::-1]):
      out[name].append(statistics.median(clock(fns[name])[0] for _ in range(reps)))
  return out


def spread(values, scale=1e3):
  return {'median': statistics.median(values) * scale, 'min': min(values) * scale,
          'max': max(values) * scale}


def ratio(num, den):
  per_round = [a / b for a, b in zip(num, den)]
  return {'median': statistics.median(per_round), 'min': min(per_round), 'max': max(per_round)}


def fmt(s, unit='ms'):
  return f'{s["median"]:.3g} {unit} [{s["min"]:.3g}-{s["max"]:.3g}]'


def fmt_ratio(r):
  return f'{r["median"]:.2f} [{r["min"]:.2f}-{r["max"]:.2f}]'


# ----------------------------------------------------------------------------- fixtures

def _copy(tree):
  return jax.tree_util.tree_map(lambda x: x.copy(), tree)


def adam_pair(shapes):
  """``(optimizer, train_state, grads)``: ours and the optax TrainState of the same params."""
  params = _cases.make_tree(shapes, 0)
  grads = _cases.make_tree(shapes, 1, scale=1e-2)
  optimizer = _cases.make_def(optim, 'Adam').create(params)
  state = train_state.TrainState.create(apply_fn=None, params=params,
                                        tx=_cases.make_optax('Adam'))
  return jax.block_until_ready((optimizer, state, grads))


def _ours_step(optimizer, grads):
  return optimizer.apply_gradient(grads)


def _optax_step(state, grads):
  return state.apply_gradients(grads=grads)


# ----------------------------------------------------------------------------- parts

def measure_restore(n, shapes, cfg, first, log):
  optimizer, state, grads = adam_pair(shapes)
  ours_bytes, optax_bytes = serialization.to_bytes(optimizer), serialization.to_bytes(state)
  decoded = serialization.msgpack_restore(ours_bytes)
  tmp = tempfile.mkdtemp(prefix='bench-leaves-')
  dirs = {'ours': os.path.join(tmp, 'ours'), 'optax': os.path.join(tmp, 'optax')}
  for side, data in (('ours', ours_bytes), ('optax', optax_bytes)):
    os.makedirs(dirs[side])
    with open(os.path.join(dirs[side], 'checkpoint_1'), 'wb') as f:
      f.write(data)
  fns = {
      'msgpack_restore': lambda: serialization.msgpack_restore(ours_bytes),
      'optax msgpack_restore': lambda: serialization.msgpack_restore(optax_bytes),
      'from_bytes': lambda: serialization.from_bytes(optimizer, ours_bytes),
      'restore_state': lambda: optimizer.restore_state(decoded),
      'restore_checkpoint': lambda: checkpoints.restore_checkpoint(dirs['ours'], optimizer),
      'optax from_bytes': lambda: serialization.from_bytes(state, optax_bytes),
      'optax restore_checkpoint': lambda: checkpoints.restore_checkpoint(dirs['optax'], state),
  }
  for fn in fns.values():
    fn()
  t = rounds(fns, cfg['rounds'], cfg['reps'])
  out = {'bytes': len(ours_bytes), 'times_ms': {k: spread(v) for k, v in t.items()}, 'ratios': {
      'from_bytes / msgpack_restore': ratio(t['from_bytes'], t['msgpack_restore']),
      'restore_state / msgpack_restore': ratio(t['restore_state'], t['msgpack_restore']),
      'restore_checkpoint / optax': ratio(t['restore_checkpoint'],
                                          t['optax restore_checkpoint']),
      'from_bytes / optax': ratio(t['from_bytes'], t['optax from_bytes']),
      # the legacy layout's own parse cost: one more map per parameter state
      'msgpack_restore / optax': ratio(t['msgpack_restore'], t['optax msgpack_restore'])}}
  if first:
    ours = jax.jit(_ours_step, donate_argnums=0)
    theirs = jax.jit(_optax_step, donate_argnums=0)
    fns = {'ours': lambda: ours(serialization.from_bytes(optimizer, ours_bytes), grads),
           'optax': lambda: theirs(serialization.from_bytes(state, optax_bytes), grads)}
    for fn in fns.values():  # compiles (the restored leaves are NumPy: same avals)
      _cases.timed(fn)
    t = rounds(fns, cfg['rounds'], max(3, cfg['reps'] // 2))
    out['first_step_ms'] = {k: spread(v) for k, v in t.items()}
    out['ratios']['restore + first step / optax'] = ratio(t['ours'], t['optax'])
  log(f'  restore {n} leaves: ' + '; '.join(
      f'{k} {fmt_ratio(v)}' for k, v in out['ratios'].items()))
  return out


def _flatten_and_rebuild(tree):
  treedef = jax.tree_util.tree_structure(tree)
  return lambda: treedef.unflatten(jax.tree_util.tree_flatten(tree)[0])


def measure_step(n, shapes, cfg, log):
  params = _cases.make_tree(shapes, 0)
  grads = _cases.make_tree(shapes, 1, scale=1e-2)
  out = {}
  for name in STEP_OPTIMIZERS:
    opt_def, tx = _cases.make_def(optim, name), _cases.make_optax(name)
    optimizer, opt_state = opt_def.create(params), tx.init(params)
    leaves, treedef = jax.tree_util.tree_flatten(optimizer)
    flat_step = lambda ls, g, treedef=treedef: jax.tree_util.tree_leaves(
        _cases.legacy_api_step(treedef.unflatten(ls), g))
    fns = {
        'ours': _cases.chained(jax.jit(_cases.legacy_api_step, donate_argnums=0),
                               _copy(optimizer), grads, n_carry=1),
        'proto': _cases.chained(jax.jit(_cases.legacy_api_step, donate_argnums=0),
                                flat_optimizer.from_optimizer(_copy(optimizer)), grads,
                                n_carry=1),
        'optax': _cases.chained(jax.jit(_cases.optax_step_fn(tx), donate_argnums=(0, 1)),
                                _copy(params), _copy(opt_state), grads, n_carry=2),
        'floor': _cases.chained(jax.jit(flat_step, donate_argnums=0), _copy(leaves), grads,
                                n_carry=1),
    }
    for fn in fns.values():
      fn(), fn()
    reps = cfg['step_reps'] if n < 1000 else max(5, cfg['step_reps'] // 4)
    t = rounds(fns, cfg['rounds'], reps)
    # the argument handling alone: flatten the carried tree, rebuild it from its leaves
    proto = jax.tree_util.tree_map(lambda x: x, flat_optimizer.from_optimizer(optimizer))
    carried = {'ours': (optimizer, grads), 'proto': (proto, grads),
               'optax': ((params, opt_state), grads), 'floor': (leaves, grads)}
    host = rounds({k: _flatten_and_rebuild(tree) for k, tree in carried.items()},
                  cfg['rounds'], reps * 5)
    out[name] = {'times_us': {k: spread(v, 1e6) for k, v in t.items()},
                 'ratios': {f'{k} / optax': ratio(t[k], t['optax'])
                            for k in ('ours', 'proto', 'floor')},
                 'host_us': {k: spread(v, 1e6) for k, v in host.items()},
                 'treedef_nodes': {'ours': treedef.num_nodes,
                                   'optax': jax.tree_util.tree_structure(
                                       (params, opt_state)).num_nodes}}
    log(f'  step {n} leaves {name}: ' + ', '.join(
        f'{k} {fmt(v, "us")}' for k, v in out[name]['times_us'].items()) + '; ' + ', '.join(
            f'{k} {fmt_ratio(v)}' for k, v in out[name]['ratios'].items()) + '; host: ' + ', '.join(
            f'{k} {fmt(v, "us")}' for k, v in out[name]['host_us'].items()))
  return out


def measure_trace(n, shapes, cfg, log):
  params = _cases.make_tree(shapes, 0)
  grads = _cases.make_tree(shapes, 1, scale=1e-2)
  opt_def, tx = _cases.make_def(optim, 'Adam'), _cases.make_optax('Adam')
  sides = {'ours': (lambda: _cases.legacy_api_step, (opt_def.create(params), grads), (0,)),
           'optax': (lambda: _cases.optax_step_fn(tx), (params, tx.init(params), grads), (0, 1))}
  phases = {side: {'trace': [], 'lower': [], 'compile': []} for side in sides}
  names = list(sides)
  for r in range(cfg['trace_rounds']):
    for side in (names if r % 2 == 0 else names[::-1]):
      make, args, donate = sides[side]
      step = make()
      # a new function object each time: jax caches traces by function identity
      jitted = jax.jit(lambda *a, step=step: step(*a), donate_argnums=donate)
      t0 = time.perf_counter()
      traced = jitted.trace(*args)
      t1 = time.perf_counter()
      lowered = traced.lower()
      t2 = time.perf_counter()
      lowered.compile()
      t3 = time.perf_counter()
      for phase, seconds in (('trace', t1 - t0), ('lower', t2 - t1), ('compile', t3 - t2)):
        phases[side][phase].append(seconds)
  out = {'times_ms': {side: {p: spread(v) for p, v in ph.items()} for side, ph in phases.items()},
         'ratios': {p: ratio(phases['ours'][p], phases['optax'][p])
                    for p in ('trace', 'lower', 'compile')}}
  log(f'  trace {n} leaves Adam: ' + '; '.join(
      f'{p} {fmt(out["times_ms"]["ours"][p])} vs {fmt(out["times_ms"]["optax"][p])} = '
      f'{fmt_ratio(out["ratios"][p])}' for p in ('trace', 'lower', 'compile')))
  return out


# ----------------------------------------------------------------------------- report

def print_tables(report):
  res = report['results']
  if res.get('restore'):
    print('\nrestore (Adam), ratio: median of rounds [min-max]')
    keys = list(next(iter(res['restore'].values()))['ratios'])
    print('| leaves | file MB | msgpack_restore ms | from_bytes ms | ' + ' | '.join(keys) + ' |')
    print('|---:|---:|---:|---:|' + '---:|' * len(keys))
    for n, row in res['restore'].items():
      t = row['times_ms']
      print(f'| {n} | {row["bytes"] / 1e6:.1f} | {fmt(t["msgpack_restore"], "")} | '
            f'{fmt(t["from_bytes"], "")} | ' + ' | '.join(
                fmt_ratio(row['ratios'][k]) if k in row['ratios'] else '' for k in keys) + ' |')
  if res.get('step'):
    print('\njitted donated step, µs: median of rounds [min-max]; ratio to optax per round')
    print('| leaves | optimizer | ours | proto | optax | floor | ours/optax | proto/optax | '
          'floor/optax |')
    print('|---:|---|---:|---:|---:|---:|---:|---:|---:|')
    for n, rows in res['step'].items():
      for name, row in rows.items():
        t, r = row['times_us'], row['ratios']
        print(f'| {n} | {name} | ' + ' | '.join(fmt(t[k], '') for k in
                                              ('ours', 'proto', 'optax', 'floor')) + ' | ' +
              ' | '.join(fmt_ratio(r[f'{k} / optax']) for k in ('ours', 'proto', 'floor')) + ' |')
    print('\nwhat each side carries, µs to flatten it and rebuild it from its leaves (what jax '
          'does to the arguments and results of every jitted call)')
    print('| leaves | optimizer | ours | proto | optax | floor |')
    print('|---:|---|---:|---:|---:|---:|')
    for n, rows in res['step'].items():
      for name, row in rows.items():
        print(f'| {n} | {name} | ' + ' | '.join(fmt(row['host_us'][k], '') for k in
                                              ('ours', 'proto', 'optax', 'floor')) + ' |')
  if res.get('trace'):
    print('\ncold trace / lower / compile (Adam), ms: ours vs optax, ratio per round')
    print('| leaves | phase | ours | optax | ours/optax |')
    print('|---:|---|---:|---:|---:|')
    for n, row in res['trace'].items():
      for p in ('trace', 'lower', 'compile'):
        print(f'| {n} | {p} | {fmt(row["times_ms"]["ours"][p], "")} | '
              f'{fmt(row["times_ms"]["optax"][p], "")} | {fmt_ratio(row["ratios"][p])} |')


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--quick', action='store_true', help='< 2 minutes on 2 cores')
  parser.add_argument('--large', action='store_true', help='also restore a ~1 GB Adam file')
  parser.add_argument('--parts', nargs='*', default=['restore', 'first', 'step', 'trace'],
                      choices=['restore', 'first', 'step', 'trace'])
  parser.add_argument('--leaves', nargs='*', type=int, help='only these leaf counts')
  parser.add_argument('--rounds', type=int, help='override the mode\'s rounds')
  parser.add_argument('--out', default=None, help='JSON path (default results/leaves-<mode>.json)')
  args = parser.parse_args()
  mode = 'quick' if args.quick else 'full'
  cfg = dict(MODES[mode])
  if args.rounds:
    cfg['rounds'] = cfg['trace_rounds'] = args.rounds
  flax.config.update('flax_use_orbax_checkpointing', False)  # legacy files are msgpack
  started = time.time()
  log = lambda msg: print(f'[{time.time() - started:6.1f}s] {msg}', flush=True)
  pick = lambda ns: [n for n in ns if not args.leaves or n in args.leaves]
  results = {'restore': {}, 'step': {}, 'trace': {}}
  parts = set(args.parts)
  if parts & {'restore', 'first'}:
    for n in pick(sorted(set(cfg['restore']) | set(cfg['first']))):
      results['restore'][n] = measure_restore(n, leaf_tree(n), cfg,
                                              'first' in parts and n in cfg['first'], log)
    if args.large:
      big = dict(cfg, rounds=3, reps=1)
      results['restore']['1GB (20 x 2048x2048)'] = measure_restore(
          20, LARGE_SHAPES, big, 'first' in parts, log)
  if 'step' in parts:
    for n in pick(cfg['step']):
      results['step'][n] = measure_step(n, leaf_tree(n), cfg, log)
  if 'trace' in parts:
    for n in pick(cfg['trace']):
      results['trace'][n] = measure_trace(n, leaf_tree(n), cfg, log)
  report = {'meta': {'mode': mode, 'cfg': cfg, 'jax': jax.__version__,
                     'optax': optax.__version__, 'flax': flax.__version__,
                     'backend': jax.default_backend(), 'cpu_count': os.cpu_count(),
                     'seconds': round(time.time() - started, 1)},
            'results': {k: {str(n): v for n, v in rows.items()} for k, rows in results.items()}}
  print_tables(report)
  out = args.out or os.path.join(HERE, 'results', f'leaves-{mode}.json')
  os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
  with open(out, 'w') as f:
    json.dump(report, f, indent=1)
  log(f'wrote {out}')


if __name__ == '__main__':
  main()
