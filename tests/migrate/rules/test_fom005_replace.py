"""The rule FOM005 (_migrate/rules/fom005_replace.py): its examples, in the folder beside
this file (run both ways by tests/migrate/test_migrate_equivalence.py), and its own tests."""

# Example name -> how closely its legacy and migrated runs agree.
EXAMPLES = {
    'replace_target': '1e-6',
}
