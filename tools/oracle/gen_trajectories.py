"""Golden trajectories of the legacy flax.optim: tests/fixtures/trajectories/<FAMILY>.msgpack.

Run in the legacy oracle venv, from the repository root::

    ~/.cache/legacy-flax-oracle/bin/python -m tools.oracle.gen_trajectories [FAMILY ...]

One file per family of ``catalogue.TRAJECTORY_FAMILIES`` (all by default). Each holds the cases
(optimizer spec, target, grads, per-step overrides, container, jit or eager) and what the legacy
library produced: the state dict of the optimizer after creation and after every step. The
driver is tests/oracle_specs.py, the same code tests/test_trajectories.py replays on
flax_optim_compat.

Cases marked ``'oracle': 'composed'`` (a MultiOptimizer with a WeightNorm group, which legacy
MultiOptimizer cannot take) get their expectation from legacy runs of each group on its own
sub-tree (tools/oracle/_composed.py); the composition is checked here against legacy
MultiOptimizer itself on every path-traversal case legacy can run.
"""
import argparse
import os
import warnings

warnings.simplefilter('ignore')

import jax  # noqa: E402
from flax import optim  # noqa: E402
from flax import serialization  # noqa: E402
from flax.core import freeze  # noqa: E402

from tests import catalogue  # noqa: E402
from tests import oracle_specs  # noqa: E402
from tools import oracle  # noqa: E402
from tools.oracle import _composed  # noqa: E402

warnings.simplefilter('ignore')  # flax.optim re-enables its DeprecationWarnings on import

OUT_DIR = os.path.join(oracle.FIXTURES, 'trajectories')
# The composition reproduces legacy MultiOptimizer to float32 rounding.
COMPOSED_ATOL = 1e-5


def _run(case):
  return oracle_specs.run_trajectory(optim, case, jax=jax, freeze=freeze,
                                     to_state_dict=serialization.to_state_dict)


def _checkable_by_composition(case):
  spec = case['optimizer']
  return spec['name'] == 'MultiOptimizer' and all(
      traversal['kind'] == 'path_contains' for traversal, _ in spec['groups'])


def generate(family, out_dir=OUT_DIR):
  cases = oracle_specs.make_cases(family)
  for name, case in cases.items():
    if case.get('oracle') == 'composed':
      case['expected'] = _composed.run_composed(case, _run)
      continue
    case['expected'] = _run(case)
    if _checkable_by_composition(case):
      diff = _composed.max_abs_diff(_composed.run_composed(case, _run), case['expected'])
      print(f'  {name}: composition vs legacy MultiOptimizer max abs diff {diff:.3g}')
      assert diff <= COMPOSED_ATOL, diff
  os.makedirs(out_dir, exist_ok=True)
  path = os.path.join(out_dir, f'{family}.msgpack')
  with open(path, 'wb') as f:
    f.write(serialization.msgpack_serialize({'family': family, 'cases': cases}))
  print(f'{path}: {len(cases)} cases, {os.path.getsize(path)} bytes')


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--out', default=OUT_DIR, help=f'output directory (default: {OUT_DIR})')
  parser.add_argument('families', nargs='*', help='families of catalogue.TRAJECTORY_FAMILIES (default: all)')
  args = parser.parse_args(argv)
  unknown = sorted(set(args.families) - set(catalogue.TRAJECTORY_FAMILIES))
  if unknown:
    parser.error(f'unknown families {unknown}; known: {sorted(catalogue.TRAJECTORY_FAMILIES)}')
  for family in args.families or list(catalogue.TRAJECTORY_FAMILIES):
    generate(family, args.out)


if __name__ == '__main__':
  main()
