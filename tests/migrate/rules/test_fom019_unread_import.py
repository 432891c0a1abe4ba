"""The rule FOM019 (_migrate/rules/fom019_unread_import.py): its examples, in the folder beside
this file (run both ways by tests/migrate/test_migrate_equivalence.py), and its own tests."""
import pytest

libcst = pytest.importorskip('libcst')

from flax_optim_compat._migrate import migrate_source, migrate_sources  # pylint: disable=g-import-not-at-top

# Example name -> how closely its legacy and migrated runs agree. unread_import: a file already
# on optax that still imports flax.optim (and unfreezes init's FrozenDict, which that import
# made); before the rule the file was left as it was, and failed at the import without this
# package.
EXAMPLES = {
    'unread_import': 'bit-exact',
}

_CREATE = ('import jax.numpy as jnp\nfrom flax import optim\n\n\n'
           'def make():\n  return optim.Adam(0.1).create({"w": jnp.ones(2)})\n')


def _migrate_two(tmp_path, other):
  paths = {str(tmp_path / 'train.py'): _CREATE, str(tmp_path / 'other.py'): other}
  changed, report = migrate_sources(paths)
  return changed.get(str(tmp_path / 'other.py')), [
      r for r in report.records if r.path.endswith('other.py')]


def test_a_file_that_only_imports_flax_optim_loses_the_import(tmp_path):
  """ssljax's ssltrainstate.py: the import is the file's only flax.optim; before the rule the
  file was left as it was, with no record, and --check passed."""
  new, records = _migrate_two(tmp_path, 'import jax\nfrom flax import optim\n\nX = jax.numpy.ones(1)\n')
  assert 'optim' not in new and 'X = jax.numpy.ones(1)' in new
  assert [(r.code, r.status, r.exactness) for r in records] == [('FOM019', 'rewritten', 'bit-exact')]


@pytest.mark.parametrize('other, kept', [
    ('import flax.optim\nimport flax.linen as nn\n\nD = nn.Dense\n', 'import flax.linen as nn\n'),
    ('from flax import struct, optim\n\n\n@struct.dataclass\nclass S:\n  x: int\n',
     'from flax import struct\n'),
    ('from flax.optim import adam\n\nY = 1\n', 'Y = 1\n'),
    ('import flax_optim_compat as legacy\n\nY = 1\n', 'Y = 1\n'),
])
def test_every_form_of_the_import_goes_and_only_it(tmp_path, other, kept):
  new, records = _migrate_two(tmp_path, other)
  assert kept in new and 'optim' not in new.replace(kept, ''), new
  assert [r.code for r in records] == ['FOM019']


def test_a_file_that_reads_flax_optim_keeps_its_import(tmp_path):
  """``getattr(optim, name)`` reads it (and is refused, FOM112): the import stays with it."""
  other = 'from flax import optim\n\n\ndef pick(name):\n  return getattr(optim, name)\n'
  new, records = _migrate_two(tmp_path, other)
  assert 'from flax import optim' in new
  assert [(r.code, r.status) for r in records] == [('FOM112', 'refused')]


@pytest.mark.parametrize('other', [
    'from flax.optim.adam import _AdamParamState\n\n\ndef f(g):\n  return _AdamParamState(g, g)\n',
    'from flax.optim import adam\n\n\ndef f(g):\n  return adam._AdamParamState(g, g)\n',
])
def test_a_private_name_of_flax_optim_read_keeps_its_import_and_is_refused(tmp_path, other):
  """AdaHessianJax's ``from flax.optim.adam import _AdamParamState``, built at two lines: before,
  a FOM019 record "rewritten ... nothing in the file reads flax.optim" (counted as a rewrite,
  its reason false) and no refusal of the read; legacy internals are FOM104."""
  new, records = _migrate_two(tmp_path, other)
  assert new is not None and new.startswith(other.split('\n')[0] + '\n'), new
  assert [(r.line, r.code, r.status) for r in records] == [(5, 'FOM104', 'refused')], records


def test_nothing_else_in_a_file_without_the_import_changes():
  source = 'import jax\n\nX = 1\n'
  new, report = migrate_source(source)
  assert new == source and report.records == []
