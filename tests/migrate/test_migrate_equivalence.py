"""`flax-optim-compat migrate`, proven by running both ways: legacy on this package, migrated on
plain optax in a process where this package cannot be imported, equal trajectories.

Here every rule's own examples (tests/migrate/rules: `before` on this package, `after` isolated,
within the exactness class the report claims and the one measured), and docs/migrate.md naming
every code the tool emits. The corpus of legacy-style training scripts is
test_migrate_equivalence_corpus.py, the checkpoint path test_migrate_equivalence_checkpoint.py:
three files, so that pytest-xdist runs them on different workers. The rule examples run in one
child interpreter per side.
"""
import importlib.util
import pathlib
import re

import pytest

from tests import _migrate_harness as harness
from tests.migrate import rules as migrate_examples


def _rule_examples():
  if importlib.util.find_spec('libcst') is None:
    return []
  return [pytest.param(code, example, id=f'{code}-{example.name}')
          for code, example in migrate_examples.by_rule()]


@pytest.fixture(scope='module')
def rule_runs(tmp_path_factory):
  root = tmp_path_factory.mktemp('migrate_equivalence') / 'rules'
  examples = [p.values[1] for p in _rule_examples()]
  codes = [p.values[0] for p in _rule_examples()]
  sides = {}
  for side in ('before', 'after'):
    folder = root / side
    folder.mkdir(parents=True)
    programs = []
    for code, example in zip(codes, examples):
      path = folder / f'{code}_{example.name}.py'
      path.write_text(getattr(example, side))
      programs.append(harness.Program(f'{code}-{example.name}', path))
    sides[side] = harness.run_programs(programs, folder, isolated=side == 'after')
  return sides


@pytest.mark.parametrize('code, example', _rule_examples())
def test_rule_example_both_ways(code, example, rule_runs):
  """Within what was measured for the example (``exact``), so within what the report claims
  for it: test_migrate.py's test_example_before_becomes_after checks that the claim is never
  stronger than ``exact``, and each class of ``assert_equivalent`` holds within every weaker
  one (bit-exact arrays are within 1e-6; every class checks the shapes and finiteness)."""
  name = f'{code}-{example.name}'
  harness.assert_equivalent(harness.result_trajectory(rule_runs['before'], name),
                            harness.result_trajectory(rule_runs['after'], name), example.exact,
                            label=f'{name} ({example.exact})')


# --- docs/migrate.md explains every code the tool emits ---------------------------------

def test_the_proof_table_lists_every_rule_example():
  """docs/migrate.md's table of the rules' examples, as tools/migrate_proof_table.py printed
  it, has one row per example in rule order (a new example without its row fails here), and a
  row claimed bit-exact measured no difference."""
  section = (harness.REPO / 'docs' / 'migrate.md').read_text()
  rows = re.findall(r'^\| (FOM\d{3}) \| `(\w+)` \| ([\w.-]+) \| \d+ \| ([\w.+-]+) \|$', section,
                    flags=re.M)
  assert [(code, name) for code, name, _, _ in rows] == [
      (code, example.name) for code, example in migrate_examples.by_rule()]
  for code, name, claim, max_abs in rows:
    assert claim in migrate_examples.EXACTNESS, (code, name, claim)
    assert claim != 'bit-exact' or max_abs == '0', (code, name, max_abs)


def test_the_guide_explains_every_report_code():
  pytest.importorskip('libcst')
  from flax_optim_compat import _migrate  # pylint: disable=g-import-not-at-top
  sources = pathlib.Path(_migrate.__file__).parent.rglob('*.py')
  emitted = {code for path in sources for code in re.findall(r'FOM\d{3}', path.read_text())}
  assert {rule.code for rule in _migrate.all_rules} <= emitted
  assert {refusal.code for refusal in _migrate.all_refusals} <= emitted
  section = (harness.REPO / 'docs' / 'migrate.md').read_text()
  explained = re.findall(r'^\| (FOM\d{3}) \| (\w+) \|', section, flags=re.M)
  assert sorted(code for code, _ in explained) == sorted(emitted)
  statuses = dict(explained)
  for rule in _migrate.all_rules:
    assert statuses[rule.code] == 'rewritten', rule.code
  for refusal in _migrate.all_refusals:
    assert statuses[refusal.code] in ('refused', 'failed'), refusal.code
