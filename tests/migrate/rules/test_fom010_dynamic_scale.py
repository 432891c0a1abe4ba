"""The rule FOM010 (_migrate/rules/fom010_dynamic_scale.py): its examples, in the folder beside
this file (run both ways by tests/migrate/test_migrate_equivalence.py), and its own tests."""

# Example name -> how closely its legacy and migrated runs agree.
# dynamic_scale_selection: flax's imagenet idiom, DynamicScale imported from flax.optim
# under the alias the rule writes, the non-finite selection by tree_map over the optimizer,
# isinstance, del.
EXAMPLES = {
    'dynamic_scale': 'bit-exact',
    'dynamic_scale_selection': 'bit-exact',
}


def test_a_use_already_written_under_the_alias_is_said_unchanged():
  """XiaRui1996/heatx: ``from flax.optim import dynamic_scale as dynamic_scale_lib``, then
  ``dynamic_scale_lib.DynamicScale()``: the import carries the change. Before, each use's record
  read ``dynamic_scale_lib.DynamicScale -> dynamic_scale_lib.DynamicScale``."""
  import pytest  # pylint: disable=g-import-not-at-top
  pytest.importorskip('libcst')
  from flax_optim_compat._migrate import migrate_source  # pylint: disable=g-import-not-at-top
  new, report = migrate_source(
      'from flax.optim import dynamic_scale as dynamic_scale_lib\n\n'
      'ds = dynamic_scale_lib.DynamicScale()\n')
  assert new == ('from flax.training import dynamic_scale as dynamic_scale_lib\n\n'
                 'ds = dynamic_scale_lib.DynamicScale()\n')
  assert [r.message for r in report.records] == [
      'from flax.optim import dynamic_scale as dynamic_scale_lib -> from flax.training import ...',
      'dynamic_scale_lib.DynamicScale: unchanged, dynamic_scale_lib now names '
      'flax.training.dynamic_scale']
