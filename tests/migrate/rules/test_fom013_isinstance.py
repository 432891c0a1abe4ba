"""The rule FOM013 (_migrate/rules/fom013_isinstance.py): its examples, in the folder beside
this file (run both ways by tests/migrate/test_migrate_equivalence.py), and its own tests."""

# Example name -> how closely its legacy and migrated runs agree.
EXAMPLES = {
    'isinstance_check': '1e-6',
}
