"""The rule FOM002 (_migrate/rules/fom002_target.py): its examples, in the folder beside
this file (run both ways by tests/migrate/test_migrate_equivalence.py), and its own tests."""

# Example name -> how closely its legacy and migrated runs agree.
EXAMPLES = {
    'target_read': 'bit-exact',
}
