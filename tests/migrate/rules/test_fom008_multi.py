"""The rule FOM008 (_migrate/rules/fom008_multi.py): its examples, in the folder beside
this file (run both ways by tests/migrate/test_migrate_equivalence.py), and its own tests."""

# Example name -> how closely its legacy and migrated runs agree.
EXAMPLES = {
    'multi_optimizer': '1e-6',
    'focus': '1e-6',
}
