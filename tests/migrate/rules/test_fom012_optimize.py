"""The rule FOM012 (_migrate/rules/fom012_optimize.py): its examples, in the folder beside
this file (run both ways by tests/migrate/test_migrate_equivalence.py), and its own tests."""

# Example name -> how closely its legacy and migrated runs agree.
EXAMPLES = {
    'optimize': '1e-6',
    'optimize_injected_lr': 'bit-exact',
}
