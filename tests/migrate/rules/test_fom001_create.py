"""The rule FOM001 (_migrate/rules/fom001_create.py): its examples, in the folder beside
this file (run both ways by tests/migrate/test_migrate_equivalence.py), and its own tests."""

# Example name -> how closely its legacy and migrated runs agree.
# A def chosen in if/elif branches by a helper, created in another function, its learning
# rate set per step: every branch injected, one convert command per branch (def_branches).
# A def given its keywords by ``**kw`` from a dict assigned once and never changed
# (def_kwargs_dict): a literal value inlined, any other read from the dict.
EXAMPLES = {
    'create_adamw': '1e-6',
    'def_variable_jit': 'bit-exact',
    'def_branches': '1e-6',
    'shared_def': '1e-6',
    'def_kwargs_dict': '1e-6',
}
