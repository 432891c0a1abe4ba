"""The rule FOM011 (_migrate/rules/fom011_compute_gradient.py): its examples, in the folder beside
this file (run both ways by tests/migrate/test_migrate_equivalence.py), and its own tests."""

# Example name -> how closely its legacy and migrated runs agree.
EXAMPLES = {
    'compute_gradient': '1e-6',
}
