"""Ways of making a restored file's NumPy leaves into jax arrays, timed (not adopted).

Run:  python benchmarks/prototypes/to_device.py [--leaves 1000] [--rounds 5]

For the Adam state dict of ``--leaves`` params of (32, 32) (3 x leaves arrays, read-only NumPy
as ``msgpack_restore`` gives them), each round times, interleaved:

* ``msgpack_restore``: the raw parse (the reference);
* ``device_put(list)``: one ``jax.device_put`` of the list (the package's restore before
  leaves stayed NumPy);
* ``asarray each``: ``jnp.asarray`` per leaf;
* ``jit identity``: one jitted, donated identity over the list, already compiled; and its
  cost for a new tree structure (trace + compile of the identity, once per structure).

Restored leaves stay NumPy instead: any of these costs a multiple of the parse, and the first
jitted step moves NumPy leaves itself, as it does a plain optax train state's.
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # pylint: disable=g-import-not-at-top
import numpy as np  # pylint: disable=g-import-not-at-top
from flax import serialization  # pylint: disable=g-import-not-at-top


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--leaves', type=int, default=1000)
  parser.add_argument('--rounds', type=int, default=5)
  args = parser.parse_args()
  rng = np.random.default_rng(0)
  tree = {f'p{i}': {name: rng.standard_normal((32, 32)).astype(np.float32)
                    for name in ('param', 'grad_ema', 'grad_sq_ema')}
          for i in range(args.leaves)}
  data = serialization.msgpack_serialize(tree)
  leaves = jax.tree_util.tree_leaves(serialization.msgpack_restore(data))

  t0 = time.perf_counter()
  identity = jax.jit(lambda xs: xs, donate_argnums=0)
  jax.block_until_ready(identity(list(leaves)))
  first = time.perf_counter() - t0

  fns = {
      'msgpack_restore': lambda: serialization.msgpack_restore(data),
      'device_put(list)': lambda: jax.device_put(leaves),
      'asarray each': lambda: [jax.numpy.asarray(x) for x in leaves],
      'jit identity': lambda: identity(list(leaves)),
  }
  times = {name: [] for name in fns}
  for r in range(args.rounds):
    for name in (list(fns) if r % 2 == 0 else list(fns)[::-1]):
      samples = []
      for _ in range(3):
        t = time.perf_counter()
        jax.block_until_ready(fns[name]())
        samples.append(time.perf_counter() - t)
      times[name].append(statistics.median(samples))
  parse = times['msgpack_restore']
  print(f'{len(leaves)} leaves of (32, 32) float32; ms, median of {args.rounds} rounds [min-max]; '
        'x the parse (per round)')
  for name, values in times.items():
    ratios = [v / p for v, p in zip(values, parse)]
    print(f'  {name:18s} {statistics.median(values) * 1e3:8.1f} [{min(values) * 1e3:.1f}-'
          f'{max(values) * 1e3:.1f}]  {statistics.median(ratios):5.2f}x  '
          f'({statistics.median(values) / len(leaves) * 1e6:.1f} µs a leaf)')
  print('  jit identity, first call for a new tree structure (trace + compile): '
        f'{first * 1e3:.0f} ms')


if __name__ == '__main__':
  main()
