"""The rule FOM018 (_migrate/rules/fom018_frozen_dict.py): its examples, in the folder beside this
file (run both ways by tests/migrate/test_migrate_equivalence.py), and its own tests."""
import pytest

libcst = pytest.importorskip('libcst')

import flax  # pylint: disable=g-import-not-at-top
import jax.numpy as jnp  # pylint: disable=g-import-not-at-top

from flax_optim_compat._migrate import migrate_source, migrate_sources  # pylint: disable=g-import-not-at-top

# Example name -> how closely its legacy and migrated runs agree. init_unfreeze: flaxmodels'
# merge_params shape (init's variables unfrozen, edited, handed to create), an Adam under jit;
# before the rule the migrated side failed at the unfreeze ('dict' object has no attribute).
# dynamic_scale_unfreeze: flaxmodels' GAN, whose only flax.optim use is DynamicScale (FOM010
# removes the import); before FOM018 fired for any project that names flax.optim, its
# migrated side failed at the unfreeze. init_pop_copy: flax 0.3's imagenet shape (init's
# variables split by pop('params'), the batch statistics put back by copy({...})), a Momentum
# under jit; before pop and copy were rewritten, the migrated side failed at the pop (a dict's
# pop returns the params alone, whose three entries do not unpack into two names).
# apply_pop_key: slot-attention-video's filter_key_from_frozen_dict, a pop whose key is a
# parameter, on apply(mutable=[...])'s variables, an Adam under jit; before keys other than
# strings were rewritten, migrate reported the program whole and its migrated side failed at
# that pop (the sown values' dict has one entry: nothing to unpack into two names).
# init_dict_attribute: fitvid's print_model_size, the sizes of init's popped params read through
# the FrozenDict's _dict, an Adam under jit with batch statistics; before _dict was rewritten,
# migrate reported the program whole and its migrated side failed there ('dict' object has no
# attribute '_dict').
EXAMPLES = {
    'init_unfreeze': 'bit-exact',
    'dynamic_scale_unfreeze': 'bit-exact',
    'init_pop_copy': 'bit-exact',
    'apply_pop_key': 'bit-exact',
    'init_dict_attribute': 'bit-exact',
}

_CREATE = ('import jax.numpy as jnp\nfrom flax import optim\n\n\n'
           'def make():\n  return optim.Adam(0.1).create({"w": jnp.zeros(2)})\n')


def test_the_rewrite_is_the_method_for_a_frozendict_and_the_same_dict_for_a_dict():
  """The premise, by hand: what the rewrite calls equals what legacy called, on init's old
  FrozenDict and on today's dict alike, a fresh nested dict each time."""
  tree = {'params': {'w': jnp.ones(2), 'b': {'c': jnp.zeros(1)}}}
  for value in (flax.core.freeze(tree), tree):
    out = flax.core.unfreeze(value)
    assert type(out) is dict and type(out['params']['b']) is dict and out is not value
    assert jnp.array_equal(out['params']['w'], tree['params']['w'])
  assert flax.core.unfreeze(flax.core.freeze(tree)) == flax.core.freeze(tree).unfreeze()


def test_a_file_that_only_unfreezes_is_rewritten_when_an_optimizer_elsewhere_is(tmp_path):
  helpers = 'def merge(variables):\n  return variables.unfreeze()["params"]\n'
  paths = {str(tmp_path / 'train.py'): _CREATE, str(tmp_path / 'utils.py'): helpers}
  changed, report = migrate_sources(paths)
  new = changed[str(tmp_path / 'utils.py')]
  assert 'return flax.core.unfreeze(variables)["params"]' in new and 'import flax\n' in new
  [record] = [r for r in report.records if r.path.endswith('utils.py')]
  assert (record.code, record.status, record.exactness) == ('FOM018', 'rewritten', 'bit-exact')


_SCALE_ONLY = ('import jax\nfrom flax.optim import dynamic_scale as dynamic_scale_lib\n\n\n'
               'def grads(loss, params):\n'
               '  return dynamic_scale_lib.DynamicScale().value_and_grad(loss)(params)\n')


@pytest.mark.parametrize('helpers_name', ['a_utils.py', 'z_utils.py'])
def test_a_project_whose_only_legacy_use_is_dynamic_scale_has_its_unfreeze_rewritten(
    tmp_path, helpers_name):
  """FOM010 alone removes the flax.optim import (flaxmodels' GAN); the file that unfreezes is
  rewritten whether the rules see it before or after the one that names flax.optim."""
  helpers = 'def merge(variables):\n  return variables.unfreeze()["params"]\n'
  paths = {str(tmp_path / 'train.py'): _SCALE_ONLY, str(tmp_path / helpers_name): helpers}
  changed, report = migrate_sources(paths)
  assert 'flax.core.unfreeze(variables)["params"]' in changed[str(tmp_path / helpers_name)]
  assert [r.code for r in report.records if r.path.endswith(helpers_name)] == ['FOM018']


def test_nothing_rewritten_nothing_changed():
  source = 'def merge(variables):\n  return variables.unfreeze()\n'
  new, report = migrate_source(source)
  assert new == source and report.records == []


def test_a_file_with_its_own_unfreeze_method_keeps_its_calls():
  source = _CREATE + ('\n\nclass Box:\n\n  def unfreeze(self):\n    return 1\n\n\n'
                      'def f(box):\n  return box.unfreeze()\n')
  new, report = migrate_source(source)
  assert 'box.unfreeze()' in new and 'FOM018' not in {r.code for r in report.records}


def test_pop_and_copy_rewrites_are_the_methods_for_a_frozendict_and_the_same_for_a_dict():
  """The premise, by hand: flax.core.pop and flax.core.copy give what the FrozenDict's methods
  gave, on init's old FrozenDict and on today's dict alike; a dict's own pop does not."""
  tree = {'params': {'w': jnp.ones(2)}, 'batch_stats': {'m': jnp.zeros(2)}}
  frozen = flax.core.freeze(tree)
  legacy_rest, legacy_params = frozen.pop('params')
  legacy_copy = frozen.copy({'batch_stats': {'m': jnp.ones(2)}})
  for value in (frozen, tree):
    rest, params = flax.core.pop(value, 'params')
    assert flax.core.unfreeze(rest) == flax.core.unfreeze(legacy_rest) == {
        'batch_stats': tree['batch_stats']}
    assert params['w'] is legacy_params['w']
    copied = flax.core.copy(value, {'batch_stats': {'m': jnp.ones(2)}})
    assert jnp.array_equal(copied['batch_stats']['m'], legacy_copy['batch_stats']['m'])
    assert copied['params']['w'] is legacy_copy['params']['w']
  assert set(dict(tree).pop('params')) == {'w'}   # what the unrewritten line unpacked
  assert 'params' in tree   # flax.core.pop left the dict as the FrozenDict's pop did


@pytest.mark.parametrize('line, rewritten', [
    ("  rest, params = variables.pop('params')\n", "flax.core.pop(variables, 'params')"),
    ("  new = variables.copy({'params': 1})\n", "flax.core.copy(variables, {'params': 1})"),
    ("  new = variables.copy(add_or_replace={'a': 1})\n",
     "flax.core.copy(variables, {'a': 1})"),
    ("  new = variables.copy({k: 1 for k in 'ab'})\n",
     "flax.core.copy(variables, {k: 1 for k in 'ab'})"),
    ('  rest, value = variables.pop(other)\n', 'flax.core.pop(variables, other)'),
    ("  rest, value = variables.pop(other['key'])\n", "flax.core.pop(variables, other['key'])"),
    # Not a FrozenDict's in practice: a list's pop (pixelcnn's stack), one name, no argument.
    ('  down, right = variables.pop()\n', None),
    ('  down, right = variables.pop(0)\n', None),
    ('  down, right = variables.pop(-1)\n', None),
    ("  params = variables.pop('params')\n", None),
    ("  a, (b, c) = variables.pop('params'), (1, 2)\n", None),
    ("  a, *b = variables.pop('params')\n", None),
    ('  new = variables.copy()\n', None),
    ("  new = variables.copy('F')\n", None),
    ('  new = variables.copy(other)\n', None),
])
def test_which_pop_and_copy_calls_are_rewritten(line, rewritten):
  source = _CREATE + '\n\ndef f(variables, other):\n' + line + '  return 1\n'
  new, report = migrate_source(source)
  codes = [r.code for r in report.records if r.code == 'FOM018']
  if rewritten is None:
    assert line in new and codes == []
  else:
    assert rewritten in new and 'import flax\n' in new and codes == ['FOM018']


@pytest.mark.parametrize('body', [
    "  shapes = {'x': (3, 4)}\n  h, w = shapes.pop('x')\n",
    "  shapes = dict(x=(3, 4))\n  h, w = shapes.pop('x')\n",
    "  shapes = {k: (3, 4) for k in 'xy'}\n  h, w = shapes.pop('x')\n",
    "  h, w = {'x': (3, 4)}.pop('x')\n",
])
def test_a_pop_of_a_plain_dict_is_left_as_it_is(body):
  """A dict the legacy program built itself was a dict there too: its pair of a value is
  unpacked on either side (rewritten, h and w would be the rest and the pair)."""
  source = _CREATE + '\n\ndef f():\n' + body + '  return h * w\n'
  new, report = migrate_source(source)
  assert body in new and 'FOM018' not in {r.code for r in report.records}
  scope = {}
  exec(body.replace('  ', '', 1).replace('\n  ', '\n'), scope)   # pylint: disable=exec-used
  assert (scope['h'], scope['w']) == (3, 4)


def test_a_file_with_its_own_pop_method_keeps_its_pop_calls():
  source = _CREATE + ('\n\nclass Stack:\n\n  def pop(self, key):\n    return 1, 2\n\n\n'
                      "def f(stack):\n  a, b = stack.pop('k')\n  return a + b\n")
  new, report = migrate_source(source)
  assert "stack.pop('k')" in new and 'FOM018' not in {r.code for r in report.records}


@pytest.mark.parametrize('body, rewritten', [
    ('  return p._dict\n', 'return flax.core.unfreeze(p)'),
    ('  return p._dict.items()\n', 'return flax.core.unfreeze(p).items()'),
    ('  return jax.tree_util.tree_map(abs, p)._dict\n',
     'return flax.core.unfreeze(jax.tree_util.tree_map(abs, p))'),
    # Not a FrozenDict's: written, the file's own class's, a plain dict.
    ('  p._dict = 1\n  return p\n', None),
    ('  del p._dict\n  return p\n', None),
    ('  return self._dict\n', None),
    ("  return {'a': 1}._dict\n", None),
])
def test_which_dict_attribute_reads_are_rewritten(body, rewritten):
  source = 'import jax\n' + _CREATE + '\n\ndef f(p, self):\n' + body
  new, report = migrate_source(source)
  codes = [r.code for r in report.records if r.code == 'FOM018']
  if rewritten is None:
    assert body in new and codes == []
  else:
    assert rewritten in new and 'import flax\n' in new and codes == ['FOM018']


def test_a_file_whose_own_class_has_a_dict_attribute_keeps_its_reads():
  source = _CREATE + ('\n\nclass Box:\n\n  def __init__(self):\n    self._dict = {}\n\n\n'
                      'def f(box):\n  return box._dict\n')
  new, report = migrate_source(source)
  assert 'return box._dict' in new and 'FOM018' not in {r.code for r in report.records}


def test_the_dict_attribute_rewrite_is_the_same_entries_for_a_frozendict_and_a_dict():
  """The premise, by hand: flax.core.unfreeze gives the entries a FrozenDict's _dict held, as
  nested dicts, and the same for today's dict (which has no _dict)."""
  tree = {'params': {'w': jnp.ones(2), 'b': {'c': jnp.zeros(1)}}}
  frozen = flax.core.freeze(tree)
  legacy = frozen._dict   # pylint: disable=protected-access
  for value in (frozen, tree):
    out = flax.core.unfreeze(value)
    assert out == legacy and type(out['params']['b']) is dict
    assert out['params']['w'] is legacy['params']['w']
  assert not hasattr(tree, '_dict')
