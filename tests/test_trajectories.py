"""Differential tests: every golden trajectory of the legacy oracle, replayed on our library.

Fixtures come from ``python -m tools.oracle.gen_trajectories`` run in the legacy flax 0.5.3 venv
(tools/oracle/README.md); the driver that produced them (tests/oracle_specs.py) is the one
replayed here.
"""
import jax
import pytest
from flax import serialization
from flax.core import freeze

import flax_optim_compat as optim
from tests import _utils
from tests import oracle_specs


def _cases():
  for family in _utils.fixture_names('trajectories'):
    fixture = _utils.load_fixture('trajectories', f'{family}.msgpack')
    for name in fixture['cases']:
      yield pytest.param(family, name, id=f'{family}:{name}')


_FIXTURE_CACHE = {}


def _case(family, name):
  if family not in _FIXTURE_CACHE:
    _FIXTURE_CACHE[family] = _utils.load_fixture('trajectories', f'{family}.msgpack')
  return _FIXTURE_CACHE[family]['cases'][name]


@pytest.mark.filterwarnings('ignore::flax_optim_compat.FlaxOptimDeprecationWarning')
@pytest.mark.parametrize('family,name', list(_cases()))
def test_trajectory_matches_legacy(family, name):
  case = _case(family, name)
  ours = oracle_specs.run_trajectory(
      optim, case, jax=jax, to_state_dict=serialization.to_state_dict, freeze=freeze)
  expected = case['expected']
  assert sorted(ours) == sorted(expected)
  for step in expected:
    try:
      _utils.assert_trees_close(ours[step], expected[step])
    except AssertionError as e:
      raise AssertionError(f'{family}:{name} differs from legacy at step {step}: {e}') from None
