"""The rule FOM007 (_migrate/rules/fom007_replicate.py): its examples, in the folder beside
this file (run both ways by tests/migrate/test_migrate_equivalence.py), and its own tests."""
import pathlib

import pytest

# Example name -> how closely its legacy and migrated runs agree.
# replicate_chained: the optimizer replicated where it is created, and unreplicated where
# it is read: each call on a create(...) or on a method's result is rewritten as on a name.
# replicate_step_averages: the step averages its grads itself and the replicated optimizer
# averages them again, as legacy did; migrate writes no second pmean (the step a plain
# optimizer takes needs none) and claims 1e-6: the second average only moves the last bits.
EXAMPLES = {
    'replicate_pmap': 'bit-exact',
    'replicate_chained': 'bit-exact',
    'replicate_step_averages': '1e-6',
}


def test_a_step_decorated_with_a_partial_of_pmap_is_the_visible_pmap():
  """flaxseed's ``@partial(jax.pmap, axis_name='batch')`` step: the same rewrite as the example's
  ``jax.pmap(train_step, axis_name='batch')`` (run both ways), line for line in the step. Before,
  ``replicate()`` was refused (FOM106, "no visible pmap(axis_name=...)")."""
  pytest.importorskip('libcst')
  from flax_optim_compat._migrate import migrate_source  # pylint: disable=g-import-not-at-top
  before = (pathlib.Path(__file__).parent / 'fom007_replicate' / 'replicate_pmap_before.py'
            ).read_text()
  decorated = before.replace(
      'import json\n', 'import functools\nimport json\n').replace(
          'def train_step(', "@functools.partial(jax.pmap, axis_name='batch')\ndef train_step(",
      ).replace("p_train_step = jax.pmap(train_step, axis_name='batch')\n\n\n", '').replace(
          'p_train_step(', 'train_step(')
  assert decorated.count('jax.pmap') == 1
  called, called_report = migrate_source(before, 'train.py')
  new, report = migrate_source(decorated, 'train.py')
  assert {r.status for r in report.records} == {'rewritten'}, report.summary(False)
  assert sorted(r.code for r in report.records) == sorted(r.code for r in called_report.records)
  step = lambda text: text[text.index('def train_step('):text.index('\n\n\n', text.index(
      'def train_step('))]
  assert step(new) == step(called)
