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

import jax.numpy as jnp  # noqa: E402

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


def test_a_traversal_given_a_named_function_of_a_regex_is_labelled_by_that_function():
  source = ('import re\n\nfrom flax import optim\n\nPATTERN = re.compile(r".*/(bias|scale)$")\n\n\n'
            'def no_decay(path, _):\n  return PATTERN.match(path) is not None\n\n\n'
            'def make(p):\n'
            '  decay = optim.ModelParamTraversal(lambda path, v: not no_decay(path, v))\n'
            '  return optim.MultiOptimizer((optim.ModelParamTraversal(no_decay), optim.Adam(0.1)),\n'
            '                              (decay, optim.Adam(0.1, weight_decay=1e-4))).create(p)\n')
  new, report = migrate_source(source)
  assert report.exit_status() == 1, report.summary(written=False)
  assert "'0' if no_decay('/' + '/'.join(path), value) else '1' if decay(" in new
  namespace = {}
  exec(compile(new, 'migrated.py', 'exec'), namespace)  # pylint: disable=exec-used
  params = {'dense': {'kernel': jnp.ones((2,)), 'bias': jnp.ones((2,))}}
  state = namespace['make'](params).apply_gradients(grads=params)
  # Both moved (neither left unmatched); only the kernel decays: Adam's first step is -lr.
  bias, kernel = state.params['dense']['bias'], state.params['dense']['kernel']
  assert float(bias[0]) == pytest.approx(0.9, abs=1e-5)
  assert float(bias[0]) - float(kernel[0]) == pytest.approx(0.1 * 1e-4, rel=0.2)
