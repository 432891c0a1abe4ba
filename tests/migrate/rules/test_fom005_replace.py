"""The rule FOM005 (_migrate/rules/fom005_replace.py): its examples, in the folder beside
this file (run both ways by tests/migrate/test_migrate_equivalence.py), and its own tests."""

# Example name -> how closely its legacy and migrated runs agree.
EXAMPLES = {
    'replace_target': '1e-6',
    'replace_frozendict': 'bit-exact',
    'replace_same_state': '1e-6',
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


def test_new_params_go_in_the_state_s_containers_unless_they_are_its_tree_mapped():
  # flax 0.5.3's init gave a FrozenDict, today's a dict: a FrozenDict put back (dycheck) would
  # fail in apply_gradients, so the new params take the state's own tree structure; a
  # tree_map over the optimizer's own target already has it.
  source = ('import jax\nfrom flax import optim\n\n\ndef f(p, q):\n'
            '  o = optim.Adam(0.1).create(p)\n'
            '  o = o.replace(target=q)\n'
            '  return o.replace(target=jax.tree_util.tree_map(lambda x: 2 * x, o.target))\n')
  new, report = migrate_source(source)
  assert ('  o = o.replace(params=jax.tree_util.tree_unflatten('
          'jax.tree_util.tree_structure(o.params), jax.tree_util.tree_leaves(q)))\n') in new
  assert new.endswith(
      '  return o.replace(params=jax.tree_util.tree_map(lambda x: 2 * x, o.params))\n')
  assert [r.status for r in report.records if r.code == 'FOM005'] == ['rewritten'] * 2


def test_a_replace_on_a_call_is_renamed_and_flagged_with_what_to_write():
  # The state would be read twice; the marker names the line and the expression to write.
  source = ('from flax import optim\n\n\ndef f(p, q):\n'
            '  return optim.Adam(0.1).create(p).replace(target=q)\n')
  new, report = migrate_source(source)
  assert new.endswith('.replace(params=q)\n')
  assert ('# TODO(flax-optim-compat): FOM009 line 5: the new params keep their own containers'
          in new)
  assert 'jax.tree_util.tree_leaves(q))) with the state bound to a name' in new
  [record] = [r for r in report.records if r.code == 'FOM005']
  assert (record.status, record.exactness) == ('flagged', 'not exact')


@pytest.mark.parametrize('state, kept', [
    ('o.state', True), ('o.optimizer_def', True), ('other.state', False),
    ('o.state.param_states', False)])
def test_a_field_passed_back_to_its_own_replace_goes_with_the_rewrite(state, kept):
  """``o.replace(target=t, state=o.state)`` is legacy's ``o.replace(target=t)`` (the field as it
  was); another optimizer's state, or a part of it, is not."""
  keyword = state.split('.')[1]
  source = ('from flax import optim\n\n\ndef f(p, t, other):\n'
            '  o = optim.Adam(0.1).create(p)\n'
            f'  return o.replace(target=t, {keyword}={state})\n')
  new, report = migrate_source(source)
  refused = [r for r in report.records if r.status == 'refused']
  if kept:
    assert not refused, refused
    assert 'return o.replace(params=jax.tree_util.tree_unflatten(' in new
    assert f'{keyword}=' not in new
  else:
    assert refused and f'return o.replace(target=t, {keyword}={state})' in new
    assert 'optax' not in new
