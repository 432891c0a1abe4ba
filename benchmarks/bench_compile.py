"""Cold trace+lower and XLA compile of one step: ours vs hand-written optax, before vs after.

Run (from a clone, with the README's venv):

  .venv/bin/python benchmarks/bench_compile.py                       # this checkout
  .venv/bin/python benchmarks/bench_compile.py --before /tmp/old     # and another checkout

``bench.py`` times compiles twice per row among many other things; this script only compiles,
each repetition of each side (ours, optax) in a fresh process (nothing cached by jax),
alternating between the checkouts so both see the same machine, and reports the minimum over
``--reps`` repetitions. Rows are ``--cases`` x ``--optimizers`` (defaults: every optimizer
on ``tiny``; Adam and MultiOptimizer(Adam,Momentum) on ``many_small`` and ``resnet_like``,
WeightNorm(Adam) on ``resnet_like``). With ``--before``, that checkout's package is imported instead of this
one's (``PYTHONPATH``); the trees, the optax side and the timing code are this checkout's
(``_cases.py``).
"""
import argparse
import json
import os
import subprocess
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_ROWS = ([('tiny', name) for name in (
    'Adam', 'Momentum', 'LAMB', 'Adafactor', 'SGD', 'WeightNorm(Adam)',
    'MultiOptimizer(Adam,Momentum)', 'from_optax(adamw)')] +
                [(case, name) for case in ('many_small', 'resnet_like') for name in (
                    'Adam', 'WeightNorm(Adam)', 'MultiOptimizer(Adam,Momentum)')
                 if (case, name) != ('many_small', 'WeightNorm(Adam)')])  # ~1 min per compile


def _worker(rows, who):
  """One cold lower+compile per row of one side (``who``: ours or optax), in a fresh process.

  One side per process: whichever side ran second would find jax's per-shape caches (e.g. of
  ``jnp`` functions) filled by the first.
  """
  warnings.simplefilter('ignore')
  sys.path.insert(0, HERE)
  import jax  # pylint: disable=g-import-not-at-top
  import _cases  # pylint: disable=g-import-not-at-top
  import flax_optim_compat as optim  # pylint: disable=g-import-not-at-top
  out = {}
  trees = {}
  for case, name in rows:
    if case not in trees:
      shapes = _cases.case_shapes(case)
      trees[case] = (_cases.make_tree(shapes, 0), _cases.make_tree(shapes, 1, scale=1e-2))
    params, grads = trees[case]
    opt_def = _cases.make_def(optim, name)
    if opt_def is None:  # from_optax(adamw) in a checkout that predates from_optax
      continue
    tx = _cases.make_optax(name)
    # Warm-up on a 2-leaf tree of other shapes: nothing of it is reused by the timed compile
    # but Python-level state (jax's first-use setup, imports).
    small = {'a': {'kernel': jax.numpy.ones((2, 3))}, 'b': {'bias': jax.numpy.ones(5)}}
    small_grads = jax.tree_util.tree_map(jax.numpy.ones_like, small)
    if who == 'ours':
      _cases.cold_compile(lambda: _cases.legacy_api_step, (opt_def.create(small), small_grads),
                          donate=(0,))
      timed = _cases.cold_compile(lambda: _cases.legacy_api_step,
                                  (opt_def.create(params), grads), donate=(0,))
    else:
      _cases.cold_compile(lambda: _cases.optax_step_fn(tx), (small, tx.init(small), small_grads),
                          donate=(0, 1))
      timed = _cases.cold_compile(lambda: _cases.optax_step_fn(tx),
                                  (params, tx.init(params), grads), donate=(0, 1))
    out[f'{case}|{name}'] = {who: timed[:2]}
  print(json.dumps(out))


def _run(rows, package_dir, who):
  env = dict(os.environ, JAX_PLATFORMS=os.environ.get('JAX_PLATFORMS', 'cpu'))
  if package_dir:
    env['PYTHONPATH'] = os.path.abspath(package_dir)
  proc = subprocess.run([sys.executable, os.path.abspath(__file__), '--_rows', json.dumps(rows),
                         '--_side', who], capture_output=True, text=True, env=env, check=False)
  if proc.returncode:
    raise RuntimeError(f'worker failed ({package_dir or "this checkout"}):\n{proc.stderr[-3000:]}')
  return json.loads(proc.stdout.strip().splitlines()[-1])


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--reps', type=int, default=3)
  parser.add_argument('--before', help='another checkout (its root, holding flax_optim_compat/)')
  parser.add_argument('--cases', nargs='*')
  parser.add_argument('--optimizers', nargs='*')
  parser.add_argument('--out', help='JSON path for the raw minima')
  parser.add_argument('--_rows', help=argparse.SUPPRESS)
  parser.add_argument('--_side', help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args._rows:
    return _worker([tuple(r) for r in json.loads(args._rows)], args._side)
  rows = [(c, o) for c, o in DEFAULT_ROWS
          if (not args.cases or c in args.cases) and (not args.optimizers or o in args.optimizers)]
  sides = {'after': None} if not args.before else {'before': args.before, 'after': None}
  best = {side: {} for side in sides}
  for rep in range(args.reps):
    for side, package_dir in sides.items():
      for who in ('ours', 'optax'):
        print(f'rep {rep + 1}/{args.reps}: {side} {who}', file=sys.stderr, flush=True)
        for key, times in _run(rows, package_dir, who).items():
          row = best[side].setdefault(key, {})
          lower, compile_ = times[who]
          old = row.get(who, (float('inf'), float('inf')))
          row[who] = (min(old[0], lower), min(old[1], compile_))
  if args.out:
    with open(args.out, 'w') as f:
      json.dump(best, f, indent=1)
  print(f'min of {args.reps} fresh processes; ms; ratio = ours / hand-written optax')
  header = '| case | optimizer |'
  for side in sides:
    header += f' {side} lower (ours/optax) | {side} compile (ours/optax) |'
  print(header)
  print('|---|---|' + '---:|---:|' * len(sides))
  for case, name in rows:
    line = f'| {case} | {name} |'
    for side in sides:
      row = best[side].get(f'{case}|{name}')
      if not row:
        line += ' n/a | n/a |'
        continue
      (lo, co), (olo, oco) = row['ours'], row['optax']
      line += (f' {lo * 1e3:.0f}/{olo * 1e3:.0f} = {lo / olo:.2f} |'
               f' {co * 1e3:.0f}/{oco * 1e3:.0f} = {co / oco:.2f} |')
    print(line)


if __name__ == '__main__':
  main()
