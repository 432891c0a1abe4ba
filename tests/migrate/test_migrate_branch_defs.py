"""Defs chosen in branches, inside a MultiOptimizer and beside one, run both ways.

tests/migrate/examples/branch_defs/ holds programs (folders, ``train.py`` their entry point):
``group_def_in_branches``, a group's def chosen in ``if``/``elif`` (``p_opt = optim.Adam(...)``
in one branch, ``optim.Momentum(...)`` in the other): each branch's value becomes the group's
transform (``group_def_in_branches_rate_per_step``: a function of the learning rate injected
for every group); ``override_beside_plain_def`` (the shape of a continual-learning codebase's set-up)
adds a plain def chosen in other branches and a pmapped step that overrides the groups'
learning rates per call (``hyper_params=[hp[0].replace(learning_rate=lr),
hp[1].replace(learning_rate=0)]``) or all of them (``learning_rate=lr``). Each program runs
every choice in one process; legacy (this package) and the migrated program (where neither this
package nor flax.optim can be imported) give the same numbers within the report's claim, and
raise TypeError at the same call where the groups of the def without groups are overridden; the
migrated program also matches flax 0.5.3's own run (tools/oracle/gen_migrate_branch_defs.py).
"""
import json
import pathlib

import numpy as np
import pytest

from tests import _migrate_harness as harness
from tests.migrate import _equivalence

EXAMPLES = pathlib.Path(__file__).resolve().parent / 'examples' / 'branch_defs'
GOLDENS = harness.REPO / 'tests' / 'fixtures' / 'migrate_branch_defs'
NAMES = sorted(p.name for p in EXAMPLES.iterdir() if p.is_dir())


examples = harness.examples_fixture(EXAMPLES, 'branch_defs')


def _raised(stdout):
  return [line for line in stdout.splitlines() if 'raised' in line]


@pytest.fixture(scope='module')
def both_ways(examples):
  root, migrated = examples
  return harness.BothWays(EXAMPLES, root, migrated)


@pytest.mark.parametrize('name', NAMES)
def test_the_example_is_rewritten_whole_and_runs_both_ways(examples, both_ways, name):
  folder = examples[0] / name
  before, after = both_ways.check(name)
  assert 'optim.' not in (folder / 'train.py').read_text().replace('optax', '')
  assert _raised(after.stdout) == _raised(before.stdout)
  # flax 0.5.3 (jax 0.4.13) itself: the same raises, the numbers within the oracle tolerance
  golden = json.loads((GOLDENS / f'{name}.json').read_text())
  assert golden['flax'] == '0.5.3' and _raised(after.stdout) == golden['raised']
  np.testing.assert_allclose(harness.trajectory(after.stdout), golden['trajectory'],
                             rtol=_equivalence.ORACLE_RTOL, atol=_equivalence.ORACLE_ATOL)


def test_each_branch_value_is_the_group_transform_the_multi_transform_reads(examples):
  root, _ = examples
  text = (root / 'group_def_in_branches' / 'train.py').read_text()
  assert "body_opt = optax.adamw(learning_rate=0.05" in text
  assert "body_opt = optax.sgd(learning_rate=0.05, momentum=0.9, nesterov=True)" in text
  assert "optax.multi_transform({'0': body_opt, '1': head_opt," in text


def test_a_branch_value_is_a_function_of_the_rate_injected_for_every_group(examples):
  root, _ = examples
  text = (root / 'group_def_in_branches_rate_per_step' / 'train.py').read_text()
  assert 'a = lambda learning_rate: optax.sgd(learning_rate=learning_rate, momentum=0.8' in text
  assert "inject_hyperparams(lambda learning_rate: optax.multi_transform({'0': a(learning_rate)," in (
      text)


def test_the_overrides_reach_each_group_per_call_and_raise_on_the_plain_def(examples, both_ways):
  root, migrated = examples
  text = (root / 'override_beside_plain_def' / 'train.py').read_text()
  assert "p_normal_opt = lambda learning_rate: optax.adamw(learning_rate=learning_rate" in text
  assert "'0': p_normal_opt(learning_rate_0), '1': p_freeze_opt(learning_rate_1)" in text
  assert 'learning_rate_0=lr, learning_rate_1=0' in text
  assert '**dict.fromkeys(optimizer.opt_state.hyperparams, lr)' in text
  before, _ = both_ways.runs('override_beside_plain_def')   # the legacy program's one run
  assert _raised(before.stdout) == [
      'adam freeze=False step_freeze=True: raised TypeError at call 0',
      'sgd freeze=False step_freeze=True: raised TypeError at call 0']
  notes = [r['message'] for r in migrated['override_beside_plain_def'].report['sites']
           if 'raises TypeError' in r['message']]
  assert len(notes) == 1, notes


def _refusal(source):
  from flax_optim_compat._migrate import migrate_source  # pylint: disable=g-import-not-at-top
  _, report = migrate_source(source)
  return [(r.code, r.message) for r in report.records if r.status == 'refused']


_CHOSEN = ('import jax.numpy as jnp\nfrom flax import optim\n\n\n'
           'def make(kind, params):\n'
           '  t = optim.ModelParamTraversal(lambda path, _: True)\n'
           '  if kind:\n    a = optim.Adam({lr_a})\n  else:\n    a = {other}\n'
           '  return optim.MultiOptimizer((t, a)).create(params)\n')


def test_a_group_def_chosen_with_different_learning_rates_or_not_a_def_is_refused():
  refused = _refusal(_CHOSEN.format(lr_a='0.1', other='optim.Adam(0.2)'))
  assert refused and refused[0][0] == 'FOM111' and 'different learning rates (0.1, 0.2)' in (
      refused[0][1]), refused
  refused = _refusal(_CHOSEN.format(lr_a='0.1', other='make_def()'))
  assert refused and refused[0][0] == 'FOM111' and 'is not a built-in def' in refused[0][1], (
      refused)


def test_a_step_without_an_override_beside_a_plain_def_is_refused_naming_it():
  source = (EXAMPLES / 'override_beside_plain_def' / 'train.py').read_text().replace(
      '    new_optimizer = optimizer.apply_gradient(grad, learning_rate=lr)',
      '    new_optimizer = optimizer.apply_gradient(grad)')
  refused = _refusal(source)
  assert any(code == 'FOM108' and 'a def without groups' in message
             for code, message in refused), refused
