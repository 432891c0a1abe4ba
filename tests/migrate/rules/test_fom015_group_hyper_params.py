"""The rule FOM015 (_migrate/rules/fom015_group_hyper_params.py): its examples, in the folder
beside this file (run both ways by tests/migrate/test_migrate_equivalence.py), and its own
tests."""

# Example name -> how closely its legacy and migrated runs agree.
EXAMPLES = {
    'group_overrides': 'bit-exact',
    'group_overrides_in_branches': 'bit-exact',
}

import pytest  # noqa: E402

libcst = pytest.importorskip('libcst')

from flax_optim_compat._migrate import migrate_source  # noqa: E402

_PROGRAM = ('from flax import optim\n\n\n'
            'def make(p, lr, g):\n'
            "  t = optim.ModelParamTraversal(lambda path, _: 'head' in path)\n"
            "  u = optim.ModelParamTraversal(lambda path, _: 'head' not in path)\n"
            '  opt = optim.MultiOptimizer((t, optim.Adam({lr0})), (u, optim.Adam(0.1))).create(p)\n'
            '  hp = opt.optimizer_def.hyper_params\n'
            '{extra}'
            '  return opt.apply_gradient(g, hyper_params=[{first}, hp[1]])\n')


def _codes(**fields):
  values = dict(lr0='0.5', extra='', first='hp[0].replace(learning_rate=lr)')
  values.update(fields)
  new, report = migrate_source(_PROGRAM.format(**values))
  return new, [(r.code, r.status) for r in report.records if r.status == 'refused']


def test_each_group_gets_its_override_or_its_own_literal_learning_rate():
  new, refused = _codes()
  assert refused == []
  assert 'hp = ' not in new
  assert 'learning_rate_0=lr, learning_rate_1=0.1' in new
  assert 'optax.inject_hyperparams(lambda learning_rate_0, learning_rate_1: ' in new
  assert '(learning_rate_0=0.5, learning_rate_1=0.1)' in new


def test_an_override_of_another_hyper_parameter_is_refused_naming_it():
  new, refused = _codes(first='hp[0].replace(beta1=0.8)')
  assert ('FOM102', 'refused') in refused
  assert 'hp = opt.optimizer_def.hyper_params' in new


def test_groups_out_of_order_are_refused():
  _, refused = _codes(first='hp[1]')
  assert ('FOM102', 'refused') in refused


def test_the_read_used_for_anything_else_stays_a_refused_read():
  _, refused = _codes(extra='  print(hp)\n')
  assert ('FOM104', 'refused') in refused


def test_a_group_that_keeps_a_learning_rate_it_does_not_have_is_refused():
  _, refused = _codes(lr0='', first='hp[0]')
  assert ('FOM108', 'refused') in refused


_BRANCHES = ('from flax import optim\n\n\n'
             'def make(p, lr, g, flag):\n'
             "  t = optim.ModelParamTraversal(lambda path, _: 'head' in path)\n"
             "  u = optim.ModelParamTraversal(lambda path, _: 'head' not in path)\n"
             '  if flag:\n'
             '    opt_def = optim.MultiOptimizer((t, optim.Adam(0.5)), (u, optim.Adam(0.1)))\n'
             '  else:\n'
             '    opt_def = {other}\n'
             '  opt = opt_def.create(p)\n'
             '  hp = opt.optimizer_def.hyper_params\n'
             '  return opt.apply_gradient(g, hyper_params=[hp[0].replace(learning_rate=lr), '
             '{second}])\n')


def _branch_refusals(other, second='hp[1]'):
  new, report = migrate_source(_BRANCHES.format(other=other, second=second))
  return new, [(r.line, r.code, r.message) for r in report.records if r.status == 'refused'
               and 'not rewritten' not in r.message]


def test_branches_that_are_multi_optimizers_of_as_many_groups_are_each_injected():
  new, refused = _branch_refusals(
      'optim.MultiOptimizer((t, optim.Momentum(0.3)), (u, optim.Momentum(0.1)))')
  assert refused == []
  assert new.count('optax.inject_hyperparams(lambda learning_rate_0, learning_rate_1: ') == 2
  assert 'learning_rate_0=lr, learning_rate_1=0.1' in new


def test_a_branch_without_groups_is_rewritten_to_raise_where_legacy_raises():
  # Legacy raises there (hp[0] of an Adam def's hyper-parameters, a dataclass: TypeError); the
  # rewrite's override sets learning_rate_0/1, which the plain branch's transform does not take.
  new, refused = _branch_refusals('optim.Adam(0.1)')
  assert refused == []
  assert 'hp = opt.optimizer_def.hyper_params' not in new
  assert ('opt_def = optax.inject_hyperparams(optax.adam, static_args=(' in new
          and '(learning_rate=0.1, b1=0.9' in new)
  assert 'learning_rate_0=lr, learning_rate_1=0.1' in new


def test_branches_with_other_groups_are_named():
  _, refused = _branch_refusals('optim.MultiOptimizer((t, optim.Adam(0.5)))')
  assert refused == [(13, 'FOM102', 'the MultiOptimizers the optimizer may be created from have '
                                    'different groups: 2 at script.py:8 and 1 at script.py:10')]


def test_a_group_kept_at_its_own_rate_that_differs_between_branches_is_refused():
  _, refused = _branch_refusals(
      'optim.MultiOptimizer((t, optim.Adam(0.5)), (u, optim.Adam(0.2)))')
  assert refused == [(13, 'FOM108', 'group 1 keeps its own learning rate here, which differs '
                                    'between the defs the optimizer may be created from (0.1, '
                                    '0.2)')]


def test_a_group_def_chosen_at_other_rates_refuses_the_create_past_a_plain_branch():
  # The first branch's group def is chosen at run time with different learning rates (FOM111
  # at the create); the plain branch after it raises at the override as in legacy, unrefused.
  source = _BRANCHES.replace(
      "  if flag:\n",
      "  if lr:\n    p_opt = optim.Adam(0.5)\n  else:\n    p_opt = optim.Momentum(0.4)\n"
      "  if flag:\n").replace('(t, optim.Adam(0.5))', '(t, p_opt)')
  new, report = migrate_source(source.format(other='optim.Adam(0.1)', second='hp[1]'))
  refused = [(r.line, r.code, r.message) for r in report.records if r.status == 'refused'
             and 'not rewritten' not in r.message]
  assert [(line, code) for line, code, _ in refused] == [(15, 'FOM111')]
  assert 'with different learning rates (0.4, 0.5)' in refused[0][2]
