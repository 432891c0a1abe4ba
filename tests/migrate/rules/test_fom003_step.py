"""The rule FOM003 (_migrate/rules/fom003_step.py): its examples, in the folder beside
this file (run both ways by tests/migrate/test_migrate_equivalence.py), and its own tests."""

# Example name -> how closely its legacy and migrated runs agree.
EXAMPLES = {
    'step_read': '1e-6',
}
