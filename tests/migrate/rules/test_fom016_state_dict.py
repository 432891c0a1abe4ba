"""The rule FOM016 (_migrate/rules/fom016_state_dict.py): its examples, in the folder beside
this file (run both ways by tests/migrate/test_migrate_equivalence.py; the keys each side logs
compared by tests/migrate/test_migrate_nerf_idioms.py), and its own tests."""
import pytest

# Example name -> how closely its legacy and migrated runs agree.
EXAMPLES = {
    'state_dict_histograms': 'bit-exact',
    'state_dict_mixed': 'bit-exact',
}

STATE_DICT = '''import jax
from flax import optim


def histograms(opt_state):
  return dict(opt_state)


def main(params, grad):
  optimizer = optim.{def_}.create(params)
  optimizer = jax.jit(lambda o, g: o.apply_gradient(g))(optimizer, grad)
  return histograms(optimizer.state_dict())
'''


def _records(def_):
  pytest.importorskip('libcst')
  from flax_optim_compat._migrate import migrate_source  # pylint: disable=g-import-not-at-top
  return migrate_source(STATE_DICT.format(def_=def_))[1].records


def test_a_def_whose_fields_are_not_rebuilt_stays_a_read_naming_it():
  records = [r for r in _records('RMSProp(0.1)') if r.code == 'FOM104']
  expected = 'Adam, Momentum: its def optim.RMSProp(...) at script.py:10 is none of them'
  assert any(expected in r.message for r in records if r.line == 12), records


def test_a_multi_optimizer_is_refused_at_the_read():
  def_ = ('MultiOptimizer((optim.ModelParamTraversal(lambda p, _: True), optim.Adam(0.1)))')
  records = [r for r in _records(def_) if r.code == 'FOM104']
  assert any('optim.MultiOptimizer(...)' in r.message for r in records if r.line == 12), records
