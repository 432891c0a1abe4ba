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
  oracle.write_msgpack(os.path.join(out_dir, f'{family}.msgpack'),
                       {'family': family, 'cases': cases}, f'{len(cases)} cases, ')


def main(argv=None):
  oracle.main_over(__doc__, catalogue.TRAJECTORY_FAMILIES, generate, OUT_DIR,
                   'families of catalogue.TRAJECTORY_FAMILIES', argv)


if __name__ == '__main__':
  main()
