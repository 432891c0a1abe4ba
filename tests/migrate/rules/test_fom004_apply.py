"""The rule FOM004 (_migrate/rules/fom004_apply.py): its examples, in the folder beside
this file (run both ways by tests/migrate/test_migrate_equivalence.py), and its own tests."""

# Example name -> how closely its legacy and migrated runs agree.
EXAMPLES = {
    'lr_schedule_offset': 'bit-exact',
    'lr_injected': 'bit-exact',
}
