"""The rule FOM005 (_migrate/rules/fom005_replace.py): its examples, in the folder beside
this file (run both ways by tests/migrate/test_migrate_equivalence.py), and its own tests."""

# Example name -> how closely its legacy and migrated runs agree.
EXAMPLES = {
    'replace_target': '1e-6',
}

import pytest  # noqa: E402

libcst = pytest.importorskip('libcst')

from flax_optim_compat._migrate import migrate_source  # noqa: E402


@pytest.mark.parametrize('args, named', [
    ('state=s', 'replace(state=...)'), ('target=t, optimizer_def=d', 'replace(optimizer_def=...)'),
    ('**kw', 'replace(**kw)')])
def test_a_replace_of_legacy_internals_is_refused_naming_them(args, named):
  # A TrainState has no ``state`` / ``optimizer_def`` field: TrainState.replace(state=s) raises.
  source = ('from flax import optim\n\n\ndef f(p, s, t, d, kw):\n'
            '  o = optim.Adam(0.1).create(p)\n'
            f'  return o.replace({args})\n')
  new, report = migrate_source(source)
  refused = [(r.code, r.message) for r in report.records if r.status == 'refused'
             and 'not rewritten' not in r.message]
  assert refused == [('FOM104', f'{named} sets legacy internals a TrainState does not have')]
  assert new.endswith(f'  return o.replace({args})\n')
