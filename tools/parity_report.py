"""Replays every golden trajectory (tests/fixtures/trajectories) on flax_optim_compat and prints
the worst difference from the legacy oracle per family and mode.

Run in the dev environment (not the oracle venv), from the repository root:
``python tools/parity_report.py [FAMILY ...]`` or ``python -m tools.parity_report``.
max abs = max |ours - legacy| over all steps, leaves and elements (params and state);
max rel = max over steps and leaves of (max abs diff in the leaf / max |legacy| in the leaf).
"""
import os
import sys
import warnings

# Run as a script (`python tools/parity_report.py`), the repository root is not on sys.path.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
from flax import serialization  # noqa: E402
from flax.core import freeze  # noqa: E402

import flax_optim_compat as optim  # noqa: E402
from tests import _utils  # noqa: E402
from tests import oracle_specs  # noqa: E402

warnings.simplefilter('ignore', optim.FlaxOptimDeprecationWarning)


def main(families):
  print('| family | mode | cases | max abs | max rel |')
  print('|---|---|---|---|---|')
  for family in families or _utils.fixture_names('trajectories'):
    fixture = _utils.load_fixture('trajectories', f'{family}.msgpack')
    for mode in ('jit', 'eager'):
      stats, n = {}, 0
      for name, case in fixture['cases'].items():
        if case['jit'] != (mode == 'jit'):
          continue
        n += 1
        ours = oracle_specs.run_trajectory(optim, case, jax=jax, freeze=freeze,
                                           to_state_dict=serialization.to_state_dict)
        for step, expected in case['expected'].items():
          _utils.assert_trees_close(ours[step], expected, rtol=float('inf'), stats=stats)
      if n:
        print(f'| {family} | {mode} | {n} | {stats.get("abs", 0):.2g} | {stats.get("rel", 0):.2g} |')


if __name__ == '__main__':
  main(sys.argv[1:])
