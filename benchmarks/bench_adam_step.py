"""One jitted Adam step through the legacy API vs the same step written by hand with optax.

Run:  python benchmarks/bench_adam_step.py [--repeats N]

Both steps are compiled in this process and timed interleaved (median of N timed calls each,
after warm-up), on two trees: ~1000 small leaves, and a few large leaves. It also compares
XLA's cost analysis (flops, bytes accessed) of the two compiled steps: the adapter's work
(state translation, checks) happens at trace time, so the compiled programs should cost the same.
"""
import argparse
import statistics
import time
import warnings

import jax
import jax.numpy as jnp
import optax

import flax_optim_compat as optim

warnings.simplefilter('ignore', optim.FlaxOptimDeprecationWarning)


def trees():
  key = jax.random.PRNGKey(0)
  many = {f'layer{i:03d}': {'kernel': jax.random.normal(jax.random.fold_in(key, i), (8, 8)),
                            'bias': jnp.zeros(8)} for i in range(500)}
  few = {f'w{i}': jax.random.normal(jax.random.fold_in(key, i), (1024, 1024)) for i in range(4)}
  return {'~1000 leaves (500x[8,8] + 500x[8])': many, 'few large leaves (4x[1024,1024])': few}


def _time(fn, args, repeats):
  out = fn(*args)
  jax.block_until_ready(out)
  samples = []
  for _ in range(repeats):
    t0 = time.perf_counter()
    jax.block_until_ready(fn(*args))
    samples.append(time.perf_counter() - t0)
  return samples


def _cost(compiled):
  cost = compiled.cost_analysis()
  if isinstance(cost, (list, tuple)):
    cost = cost[0] if cost else {}
  return {k: cost.get(k) for k in ('flops', 'bytes accessed')}


def bench(params, repeats, lr=1e-3):
  grads = jax.tree_util.tree_map(lambda p: 0.01 * jnp.ones_like(p), params)

  ours_step = jax.jit(lambda opt, g: opt.apply_gradient(g))
  optimizer = optim.Adam(learning_rate=lr).create(params)

  tx = optax.adam(lr)

  def optax_step(p, s, g):
    updates, s = tx.update(g, s, p)
    return optax.apply_updates(p, updates), s

  optax_step = jax.jit(optax_step)
  opt_state = tx.init(params)

  cost_ours = _cost(ours_step.lower(optimizer, grads).compile())
  cost_optax = _cost(optax_step.lower(params, opt_state, grads).compile())

  ours, theirs = [], []
  for _ in range(5):  # interleave to share machine noise
    ours += _time(ours_step, (optimizer, grads), repeats // 5)
    theirs += _time(optax_step, (params, opt_state, grads), repeats // 5)
  return statistics.median(ours), statistics.median(theirs), cost_ours, cost_optax


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument('--repeats', type=int, default=100)
  args = parser.parse_args()
  print(f'jax {jax.__version__}, optax {optax.__version__}, backend {jax.default_backend()}, '
        f'{jax.devices()[0].device_kind}')
  print('| tree | ours (ms) | hand-written optax (ms) | ratio | flops ours/optax | bytes ours/optax |')
  print('|---|---|---|---|---|---|')
  for name, params in trees().items():
    ours, theirs, c_ours, c_optax = bench(params, args.repeats)
    print(f'| {name} | {ours * 1e3:.3f} | {theirs * 1e3:.3f} | {ours / theirs:.3f} | '
          f'{c_ours["flops"]:.4g}/{c_optax["flops"]:.4g} | '
          f'{c_ours["bytes accessed"]:.4g}/{c_optax["bytes accessed"]:.4g} |')


if __name__ == '__main__':
  main()
