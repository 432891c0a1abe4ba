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
