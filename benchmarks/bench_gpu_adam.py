"""Adam on one GPU, >= 1e8 float32 params: our jitted step against plain optax and the HBM bound.

Run on a machine with a GPU, from a clone (needs only jax with its GPU plugin, flax, optax and
msgpack; the package is read from the clone):

  PYTHONPATH=. python benchmarks/bench_gpu_adam.py --out benchmarks/results/gpu_adam.json
  PYTHONPATH=. python benchmarks/bench_gpu_adam.py --quick          # a small tree, any device

Trees (``--configs``): ``big`` = 30 leaves of 4096x1024 (125.8M params), ``many`` = 1000 leaves
of 400x256 (102.4M params). Sides, each one jitted step with its inputs donated, on the same
params and gradients:

* ``ours``: ``optim.Adam(...).create(params)``, ``optimizer.apply_gradient(grads)``;
* ``optax``: hand-written ``optax.adam`` (``tx.update``, ``optax.apply_updates``);
* ``copy``: ``x * 2`` over one float32 array of the same size: the memory bandwidth a fused
  elementwise kernel reaches here (4 bytes read and 4 written per element).

The HBM bound of an Adam step is 28 bytes per param: params, grads, first and second moments
read (16 bytes), params and both moments written (12 bytes). ``bound`` is that at the measured
``copy`` bandwidth; ``nominal`` at the card's data-sheet bandwidth (H100 SXM 3.35 TB/s, H200
4.8 TB/s).

Timing: a repetition is ``--chain`` chained steps then one ``block_until_ready``; a round times
``--reps`` repetitions of each side, the sides alternating (order reversed every other round);
a figure is the median of the rounds' medians with [min-max]; a ratio is the median of the
per-round ratios [min-max].
"""
import argparse
import json
import os
import platform
import statistics
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import jax  # pylint: disable=g-import-not-at-top
import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
import optax  # pylint: disable=g-import-not-at-top

import flax_optim_compat as optim  # pylint: disable=g-import-not-at-top

CONFIGS = {'big': (30, (4096, 1024)), 'many': (1000, (400, 256)), 'tiny': (10, (64, 64))}
NOMINAL_TBPS = {'H100': 3.35, 'H200': 4.8}
BYTES_PER_PARAM = 28
LR, B1, B2, EPS = 1e-3, 0.9, 0.999, 1e-8


def _tree(count, shape, seed):
  """``count`` leaves of ``shape``, 100 to a block: ``{'block_0': {'w_0': ..., ...}, ...}``."""
  tree = {}
  for i, key in enumerate(jax.random.split(jax.random.PRNGKey(seed), count)):
    tree.setdefault(f'block_{i // 100}', {})[f'w_{i}'] = (
        jax.random.normal(key, shape, jnp.float32) * 0.01)
  return tree


def _sides(params):
  """``{name: (step, state)}``: a jitted donated step and its first state, per side."""
  opt_def = optim.Adam(learning_rate=LR, beta1=B1, beta2=B2, eps=EPS)
  ours = jax.jit(lambda opt, g: opt.apply_gradient(g), donate_argnums=0)
  tx = optax.adam(LR, b1=B1, b2=B2, eps=EPS)

  def optax_step(state, g):
    p, s = state
    updates, s = tx.update(g, s, p)
    return optax.apply_updates(p, updates), s

  copy_in = jnp.zeros((sum(x.size for x in jax.tree_util.tree_leaves(params)),), jnp.float32)
  copy = jax.jit(lambda x, g: x * 2.0, donate_argnums=0)
  fresh = lambda: jax.tree_util.tree_map(jnp.copy, params)
  return {
      'ours': (ours, opt_def.create(fresh())),
      'optax': (jax.jit(optax_step, donate_argnums=0), (fresh(), tx.init(params))),
      'copy': (copy, copy_in),
  }


def _run(step, state, grads, chain):
  for _ in range(chain):
    state = step(state, grads)
  jax.block_until_ready(state)
  return state


def _summary(values):
  return {'median': statistics.median(values), 'min': min(values), 'max': max(values)}


def bench(name, rounds, reps, chain):
  count, shape = CONFIGS[name]
  params = _tree(count, shape, 0)
  grads = jax.tree_util.tree_map(lambda p: p * 0.5 + 1e-3, _tree(count, shape, 1))
  n = sum(x.size for x in jax.tree_util.tree_leaves(params))
  sides = _sides(params)
  states = {}
  for side, (step, state) in sides.items():       # compile and warm up
    states[side] = _run(step, state, grads, 2)
  # Same numbers: ours and optax after the same steps (2 each so far).
  ours_p = jax.tree_util.tree_leaves(states['ours'].target)
  optax_p = jax.tree_util.tree_leaves(states['optax'][0])
  max_diff = max(float(jnp.max(jnp.abs(a - b))) for a, b in zip(ours_p, optax_p))
  per_round = {side: [] for side in sides}
  order = list(sides)
  for r in range(rounds):
    for side in (order if r % 2 == 0 else order[::-1]):
      step = sides[side][0]
      times = []
      for _ in range(reps):
        t0 = time.perf_counter()
        states[side] = _run(step, states[side], grads, chain)
        times.append((time.perf_counter() - t0) / chain)
      per_round[side].append(statistics.median(times))
  device = jax.devices()[0]
  kind = device.device_kind
  nominal = next((v for k, v in NOMINAL_TBPS.items() if k in kind), None)
  copy_bw = [8 * n / t / 1e12 for t in per_round['copy']]
  bound = [BYTES_PER_PARAM * n / (bw * 1e12) for bw in copy_bw]
  result = {
      'config': name, 'leaves': count, 'shape': list(shape), 'params': n,
      'device': kind, 'platform': device.platform,
      'ms': {side: _summary([t * 1e3 for t in ts]) for side, ts in per_round.items()},
      'ours/optax': _summary([a / b for a, b in zip(per_round['ours'], per_round['optax'])]),
      'copy_TBps': _summary(copy_bw),
      'bound_ms': _summary([b * 1e3 for b in bound]),
      'ours/bound': _summary([a / b for a, b in zip(per_round['ours'], bound)]),
      'optax/bound': _summary([a / b for a, b in zip(per_round['optax'], bound)]),
      'max_abs_diff_after_2_steps': max_diff,
  }
  if nominal:
    nominal_ms = BYTES_PER_PARAM * n / (nominal * 1e12) * 1e3
    result['nominal_TBps'] = nominal
    result['nominal_bound_ms'] = nominal_ms
    result['ours/nominal_bound'] = _summary([t * 1e3 / nominal_ms for t in per_round['ours']])
    result['optax/nominal_bound'] = _summary([t * 1e3 / nominal_ms for t in per_round['optax']])
  return result


def _fmt(s, digits=3):
  return f"{s['median']:.{digits}f} [{s['min']:.{digits}f}-{s['max']:.{digits}f}]"


def main(argv=None):
  warnings.simplefilter('ignore', optim.FlaxOptimDeprecationWarning)
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--configs', nargs='+', default=['big', 'many'], choices=sorted(CONFIGS))
  parser.add_argument('--rounds', type=int, default=7)
  parser.add_argument('--reps', type=int, default=5)
  parser.add_argument('--chain', type=int, default=10)
  parser.add_argument('--quick', action='store_true', help='the tiny tree, 3 rounds')
  parser.add_argument('--out', default=None, help='write the results as JSON here')
  args = parser.parse_args(argv)
  if args.quick:
    args.configs, args.rounds, args.reps, args.chain = ['tiny'], 3, 3, 5
  results = []
  for name in args.configs:
    r = bench(name, args.rounds, args.reps, args.chain)
    results.append(r)
    print(f"{name}: {r['params'] / 1e6:.1f}M params in {r['leaves']} leaves on {r['device']}")
    print(f"  step ms: ours {_fmt(r['ms']['ours'])}  optax {_fmt(r['ms']['optax'])}  "
          f"ours/optax {_fmt(r['ours/optax'])}")
    print(f"  copy {_fmt(r['copy_TBps'], 2)} TB/s -> HBM bound {_fmt(r['bound_ms'])} ms; "
          f"ours/bound {_fmt(r['ours/bound'])}  optax/bound {_fmt(r['optax/bound'])}")
    if 'nominal_bound_ms' in r:
      print(f"  nominal {r['nominal_TBps']} TB/s -> {r['nominal_bound_ms']:.3f} ms; ours/nominal "
            f"{_fmt(r['ours/nominal_bound'])}  optax/nominal {_fmt(r['optax/nominal_bound'])}")
    print(f"  max |ours - optax| after 2 steps: {r['max_abs_diff_after_2_steps']:.3g}")
  meta = {'jax': jax.__version__, 'optax': optax.__version__, 'python': platform.python_version(),
          'argv': sys.argv[1:], 'date': time.strftime('%Y-%m-%d')}
  if args.out:
    with open(args.out, 'w', encoding='utf-8') as f:
      json.dump({'meta': meta, 'results': results}, f, indent=1)
    print(f'wrote {args.out}')


if __name__ == '__main__':
  main()
