"""What the equivalence tests share (test_migrate_equivalence*.py: the corpus, the checkpoint
path, every rule's examples; three files so that pytest-xdist runs them on different workers):
the goldens, the tolerance against flax 0.5.3, the tool's known gaps."""
import pytest

from tests import _migrate_harness as harness

GOLDENS = harness.REPO / 'tests' / 'fixtures' / 'migrate_corpus'

# The legacy run against flax 0.5.3: legacy itself is not bit-reproducible between its eager
# and jitted paths, nor across XLA releases (fusion changes rounding), and jax 0.4.13's
# all-reduce over 8 CPU devices sums in a run-dependent order; a relative 1e-5 (~80 ulp) covers
# 20-25 steps of that. The absolute 1e-6 is for values passing near zero.
ORACLE_RTOL, ORACLE_ATOL = 1e-5, 1e-6

# Known gaps of the tool: the tests stay and must fail (strict xfail) until the tool is fixed.
# NOT_MIGRATED: scripts the tool refuses; WRONG_NUMBERS: migrated, but not within the claimed
# exactness.
NOT_MIGRATED = {}
WRONG_NUMBERS = {}


def script_params(names, gaps):
  """``names`` as parameters, those in ``gaps`` marked strict xfail with their reason."""
  return [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=gaps[n]))
          if n in gaps else n for n in names]


def trajectory_of(runs, name):
  """One script's trajectory of ``harness.run_corpus``, or its error as the test's failure."""
  value = runs[name]
  if isinstance(value, str):
    pytest.fail(value, pytrace=False)
  return value
