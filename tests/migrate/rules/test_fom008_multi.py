"""The rule FOM008 (_migrate/rules/fom008_multi.py): its examples, in the folder beside
this file (run both ways by tests/migrate/test_migrate_equivalence.py), and its own tests."""

# Example name -> how closely its legacy and migrated runs agree.
EXAMPLES = {
    'multi_optimizer': '1e-6',
    'focus': '1e-6',
    'multi_no_rate_per_step': 'bit-exact',
    'multi_in_branches': 'bit-exact',
}

import pytest  # noqa: E402

libcst = pytest.importorskip('libcst')

from flax_optim_compat._migrate import migrate_source  # noqa: E402


def test_a_group_without_a_learning_rate_is_refused_with_that_reason_only():
  source = ('from flax import optim\n\n\n'
            'def make(p):\n'
            "  t = optim.ModelParamTraversal(lambda path, _: 'head' in path)\n"
            "  u = optim.ModelParamTraversal(lambda path, _: 'head' not in path)\n"
            '  return optim.MultiOptimizer((t, optim.Adam()), (u, optim.Adam(0.1))).create(p)\n')
  new, report = migrate_source(source)
  assert [(r.code, r.line) for r in report.records] == [('FOM108', 7)]
  assert 'group 0: Adam(...) has no learning rate and no apply site sets one' in (
      report.records[0].message)
  assert new.count('# TODO(flax-optim-compat)') == 1


def _multi(extra):
  return ('from flax import optim\n\n\n'
          'def make(p):\n'
          "  t = optim.ModelParamTraversal(lambda path, _: 'head' in path)\n"
          '  t_opt = optim.Adam(0.1)\n'
          f'{extra}'
          '  return optim.MultiOptimizer((t, t_opt)).create(p)\n')


def test_a_group_def_variable_used_only_there_goes_into_the_transform():
  new, report = migrate_source(_multi(''))
  assert report.exit_status() == 1
  assert 't_opt' not in new and "'0': optax.adam(learning_rate=0.1" in new


def test_a_group_def_variable_used_elsewhere_too_is_refused_naming_it():
  new, report = migrate_source(_multi('  print(t_opt)\n'))
  refused = [r for r in report.records if r.status == 'refused']
  assert [r.code for r in refused] == ['FOM111']
  assert 'group 0: the def t_opt is not assigned once and used only here' in refused[0].message
  assert "  t_opt = optim.Adam(0.1)\n" in new
