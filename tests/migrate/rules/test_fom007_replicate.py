"""The rule FOM007 (_migrate/rules/fom007_replicate.py): its examples, in the folder beside
this file (run both ways by tests/migrate/test_migrate_equivalence.py), and its own tests."""

# Example name -> how closely its legacy and migrated runs agree.
# replicate_chained: the optimizer replicated where it is created, and unreplicated where
# it is read: each call on a create(...) or on a method's result is rewritten as on a name.
# replicate_step_averages: the step averages its grads itself and the replicated optimizer
# averages them again, as legacy did; migrate writes no second pmean (the step a plain
# optimizer takes needs none) and claims 1e-6: the second average only moves the last bits.
EXAMPLES = {
    'replicate_pmap': 'bit-exact',
    'replicate_chained': 'bit-exact',
    'replicate_step_averages': '1e-6',
}
