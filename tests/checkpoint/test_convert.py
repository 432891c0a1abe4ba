"""flax_optim_compat.convert on the committed legacy checkpoints (written by the real flax 0.5.3).

Expected values:

* what a file holds (paths, shapes, dtypes, step): ``flax.serialization.msgpack_restore`` of the
  same bytes (flax's own reader; ``inspect`` has its own streaming one);
* which optimizer wrote it: worked out from each checkpoint case of tests/catalogue.py (the
  cases tools/oracle/gen_checkpoints.py wrote the files for);
* training after a conversion: tests/fixtures/convert/expected.msgpack (tools/oracle/gen_convert.py,
  oracle venv): the legacy library restoring each legacy file and continuing 6 steps, and the
  legacy library restoring the files our ``to_legacy`` wrote (tests/fixtures/convert/ours) and
  continuing from them.

Tolerance: ``_utils.RTOL`` (1e-5 of each leaf's max |value|): optax associates some products
differently from legacy (float32 rounding only).
"""
import os
import re

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import serialization
from flax.training import train_state as flax_train_state

import flax_optim_compat as optim
from flax_optim_compat._cli import _main as _cli
from flax_optim_compat import _layouts
from flax_optim_compat._checkpoint import _codec
from flax_optim_compat import convert
from tests import _utils
from tests import catalogue
from tests import checkpoint_specs

pytestmark = pytest.mark.filterwarnings('ignore::flax_optim_compat.FlaxOptimDeprecationWarning')

LEGACY = _utils.LEGACY_CHECKPOINTS
OURS = os.path.join(_utils.FIXTURES, 'convert', 'ours')
EXPECTED = _utils.load_fixture('convert', 'expected.msgpack')
CONVERTED = sorted(EXPECTED)
STEPS = 6
BACK_AFTER = 3
_ADAM = 'Adam, AdaBelief or LAMB'
_MOMENTUM = 'Momentum or LARS'


def _layout_name(name):
  """The name inspect gives a built-in's layout: 'Adam, AdaBelief or LAMB' when shared."""
  for names in catalogue.SAME_LAYOUT:
    if name in names:
      return ', '.join(names[:-1]) + ' or ' + names[-1]
  return name


def _spec_name(spec):
  if spec['name'] in catalogue.CUSTOM_OPTIMIZERS:
    return None  # a user's optimizer: unknown fields
  if spec['name'] == 'WeightNorm':
    return f"WeightNorm({_spec_name(spec['wrapped'])})"
  return _layout_name(spec['name'])


def _paths(shapes, prefix=''):
  """The leaf paths of a target of ``shapes``, keys sorted at every level."""
  if isinstance(shapes, dict):
    return [p for k in sorted(shapes) for p in _paths(shapes[k], f'{prefix}/{k}')]
  return [prefix]


def _selects(traversal, path):
  kind, value = traversal['kind'], traversal.get('value')
  if kind == 'path_regex':
    return re.search(value, path) is not None
  if kind == 'path_contains':
    return value in path
  raise NotImplementedError(f'a checkpoint case with a {kind!r} traversal: add it here')


def _expected_inspect(case):
  """``(optimizer name, {group: [param path, ...]}, where the optimizer sits)``: what
  ``convert.inspect`` must say about the file of checkpoint case ``case``, worked out here
  from the case's spec (groups in the order of their first path; unselected params form the
  group 'None')."""
  spec = case.spec
  paths = _paths(case.shapes or checkpoint_specs.SHAPES)
  where = '/optimizer' if case.kind == 'train_state' else '/'
  if spec['name'] == 'MultiOptimizer':
    pairs = spec['groups']
  elif 'focus' in spec:
    pairs = [(spec['focus'], spec)]
  else:
    name = _spec_name(spec)
    return name, ({name: paths} if name else {}), where
  groups = {}
  for path in paths:
    owner = next((_spec_name(s) for t, s in pairs if _selects(t, path)), 'None')
    groups.setdefault(owner, []).append(path)
  real = [g for g in groups if g != 'None']
  if len(groups) == 1:
    return real[0], groups, where
  return ('MultiOptimizer (or create(focus=...)) over ' + ' and '.join(f'({g})' for g in real)
          + (' with unoptimized (None) leaves' if 'None' in groups else '')), groups, where


# legacy fixture -> (optimizer name, {group: params}, where the optimizer sits).
FAMILIES = {}
for _name, _case in catalogue.CHECKPOINTS.items():
  FAMILIES[_name] = _expected_inspect(_case)
  if _case.eager_file:
    FAMILIES[_case.eager_file] = FAMILIES[_name]


_file = _utils.legacy_checkpoint
_raw = _utils.legacy_checkpoint_tree


def _flat(tree, path=''):
  if isinstance(tree, dict) and tree:
    return [x for k, v in tree.items() for x in _flat(v, f'{path}/{k}')]
  return [(path or '/', tree)]


def _opt_def(name):
  return _cli.parse_optimizer(EXPECTED[name]['cli'])


def _grads(name, i):
  return jax.tree_util.tree_map(jnp.asarray, EXPECTED[name]['grads'][str(i)])


def _optimizer_sd(raw):
  return raw['optimizer'] if 'optimizer' in raw else raw


# ----------------------------------------------------------------------------- inspect


def test_every_legacy_fixture_has_a_family_entry():
  assert sorted(os.listdir(LEGACY)) == sorted(FAMILIES)


@pytest.mark.parametrize('name', sorted(FAMILIES))
def test_inspect_legacy_fixture(name):
  family, groups, where = FAMILIES[name]
  info = convert.inspect(_file(name))
  raw = _raw(name)
  opt = _optimizer_sd(raw)
  assert info.optimizer == family
  assert dict(info.groups) == groups
  assert info.optimizer_path == where
  assert info.container == ('bare optimizer' if where == '/' else 'train state')
  assert info.step == int(opt['state']['step'])
  expected_leaves = []
  for path, leaf in _flat(raw):
    if isinstance(leaf, (np.ndarray, np.generic)):
      expected_leaves.append((path, leaf.shape, leaf.dtype.name, leaf.nbytes))
    else:
      expected_leaves.append((path, None, 'None' if leaf is None else '{}', 0))
  assert info.leaves == expected_leaves
  targets = [leaf for _, leaf in _flat(opt['target']) if not isinstance(leaf, dict)]  # {}: no params
  assert info.param_count == sum(leaf.size for leaf in targets)
  assert info.param_bytes == sum(leaf.nbytes for leaf in targets)
  assert info.total_bytes == sum(x[3] for x in expected_leaves)
  assert info.summary().startswith(f'{family or "unknown optimizer"} at step {info.step}, ')
  if family is None:
    assert "fields ['velocity']" in info.notes[0]


@pytest.mark.parametrize('name', ['Adam', 'TrainState-MultiOptimizer'])
def test_inspect_bytes_and_state_dict_like_path(name):
  with open(_file(name), 'rb') as f:
    data = f.read()
  from_path = convert.inspect(_file(name))
  for source in (data, _raw(name)):
    info = convert.inspect(source)
    assert (info.optimizer, info.step, info.groups, info.leaves) == (
        from_path.optimizer, from_path.step, from_path.groups, from_path.leaves)


def test_inspect_historical_layouts():
  """Layouts of older flax versions (no file of ours has them): named, not restored."""
  target = {'w': np.zeros(3, np.float32)}
  old_rmsprop = {'target': target, 'state': {'step': np.int32(1), 'param_states': {
      'w': {'v': np.zeros(3, np.float32)}}}}
  assert convert.inspect(old_rmsprop).optimizer.startswith('RMSProp from flax <= 0.2.2')
  old_weight_norm = {'target': target, 'state': {'step': np.int32(1), 'param_states': {
      'w': {'direction_state': {}, 'scale_state': {}, 'mult': np.zeros(3, np.float32)}}}}
  info = convert.inspect(old_weight_norm)
  assert info.optimizer.startswith('WeightNorm from flax < 0.4.0')
  assert any('old layout' in note for note in info.notes)
  old_multi = {'target': target, 'state': {
      '0': {'step': np.int32(4), 'param_states': {'w': {'momentum': np.zeros(3, np.float32)}}},
      '1': {'step': np.int32(4), 'param_states': {'w': None}}}}
  info = convert.inspect(old_multi)
  assert info.optimizer == 'MultiOptimizer from flax < 0.3.3'
  assert info.step == 4
  assert [g for g, _ in info.groups] == [f'group 0: {_MOMENTUM}', 'group 1: unknown']
  with pytest.raises(convert.CheckpointError, match='flax < 0.3.3'):
    convert.to_optax(old_multi, optim.Momentum(0.1))


def test_inspect_does_not_materialise_large_leaves(tmp_path):
  path = tmp_path / 'big'
  opt = optim.Adam(0.1).create({'w': jnp.zeros((512, 512))})
  path.write_bytes(serialization.to_bytes(opt))
  with open(path, 'rb') as f:
    tree = _codec.decode(f, 'big', mode='meta')
  assert isinstance(tree['target']['w'], _codec.LeafMeta)
  assert tree['target']['w'].shape == (512, 512)
  assert convert.inspect(str(path)).param_count == 512 * 512


def test_layout_table_names_builtins_and_wrappers():
  assert _layouts.name_leaf_state({'grad_ema': 0, 'grad_sq_ema': 0}) == _ADAM
  assert _layouts.name_leaf_state({'v_row': 0, 'v_col': 0, 'v': 0, 'm': 0}) == 'Adafactor'
  assert _layouts.name_leaf_state({}) == 'GradientDescent'
  assert _layouts.name_leaf_state(None) == _layouts.UNOPTIMIZED
  assert _layouts.name_leaf_state({'bogus': 0}) is None
  wn = {'direction_state': {'G': 0}, 'scale_state': {'G': 0}, 'direction': 0, 'scale': 0}
  assert _layouts.name_leaf_state(wn) == 'WeightNorm(Adagrad)'
  with pytest.raises(ValueError, match='wraps'):
    _layouts.register('Bad', ['a'], wraps='b')
  assert 'Bad' not in _layouts.optimizer_names()   # a refused registration records nothing


# ----------------------------------------------------------------------------- loading


def test_load_matches_flax_msgpack_restore():
  for name in ('Adam', 'TrainState-Adam', 'RMSProp', 'GradientDescent'):
    _utils.assert_trees_close(convert.load(_file(name)), _raw(name), rtol=0)


def test_load_chunked_arrays(monkeypatch):
  """flax splits arrays over MAX_CHUNK_SIZE bytes into chunks; both readers join them."""
  monkeypatch.setattr(serialization, 'MAX_CHUNK_SIZE', 64)
  tree = {'a': {'w': np.arange(100, dtype=np.float32).reshape(10, 10)}}
  data = serialization.msgpack_serialize(tree)
  assert b'__msgpack_chunked_array__' in data
  np.testing.assert_array_equal(convert.load(data)['a']['w'], tree['a']['w'])
  assert convert.inspect(data).leaves == [('/a/w', (10, 10), 'float32', 400)]


def test_write_msgpack_bytes_equal_flax(tmp_path):
  raw = _raw('TrainState-MultiOptimizer')
  convert.write_msgpack(tmp_path / 'out', raw)
  assert (tmp_path / 'out').read_bytes() == serialization.msgpack_serialize(raw)
  assert os.listdir(tmp_path) == ['out']
  with pytest.raises(convert.CheckpointError, match='already exists'):
    convert.write_msgpack(tmp_path / 'out', {'x': np.zeros(2)})
  assert (tmp_path / 'out').read_bytes() == serialization.msgpack_serialize(raw)


# ----------------------------------------------------------------------------- to optax


def _assert_continues_like_legacy(name, params, advance):
  """``advance(i) -> (params, legacy state dict or None)`` for the 6 steps after the file."""
  for i in range(STEPS):
    params, legacy_sd = advance(i)
    expected = EXPECTED[name]['continued'][i]
    try:
      _utils.assert_trees_close(serialization.to_state_dict(params), expected['target'])
    except AssertionError as e:
      raise AssertionError(f'step {i} after the conversion: {e}') from None
  return legacy_sd


@pytest.mark.parametrize('name', CONVERTED)
def test_to_optax_continues_like_legacy(name):
  opt_def = _opt_def(name)
  params, tx, opt_state = convert.to_optax(_file(name), opt_def)

  @jax.jit
  def step(params, opt_state, grads):
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state

  for i in range(STEPS):
    params, opt_state = step(params, opt_state, _grads(name, i))
    _utils.assert_trees_close(serialization.to_state_dict(params),
                              EXPECTED[name]['continued'][i]['target'])
  # The whole optimizer state too, mapped back to the legacy layout (optax.trace, behind
  # Momentum, keeps no step count: pass the step).
  step_count = int(_optimizer_sd(_raw(name))['state']['step']) + STEPS
  legacy = convert.to_legacy(params, opt_state, opt_def, step=step_count)
  _utils.assert_trees_close(legacy, EXPECTED[name]['continued'][-1])


@pytest.mark.parametrize('name', CONVERTED)
def test_to_train_state_continues_like_legacy(name):
  state = convert.to_train_state(_file(name), _opt_def(name), apply_fn=len)
  assert isinstance(state, flax_train_state.TrainState)
  assert state.apply_fn is len
  # A train state's own step where the file has one (it may count skipped updates).
  raw = _raw(name)
  outer = raw.get('step') if 'optimizer' in raw else None
  offset = 0 if outer is None else int(outer) - int(_optimizer_sd(raw)['state']['step'])
  assert int(state.step) == int(_optimizer_sd(raw)['state']['step']) + offset
  step = jax.jit(lambda s, g: s.apply_gradients(grads=g))
  for i in range(STEPS):
    state = step(state, _grads(name, i))
    expected = EXPECTED[name]['continued'][i]
    _utils.assert_trees_close(serialization.to_state_dict(state.params), expected['target'])
    assert int(state.step) == int(expected['state']['step']) + offset


@pytest.mark.parametrize('name', ['Adam', 'TrainState-Adam', 'Adafactor'])
def test_to_orbax_restores_in_plain_orbax_and_continues(name, tmp_path):
  import orbax.checkpoint as ocp

  opt_def = _opt_def(name)
  out = tmp_path / 'orbax'
  written = convert.to_orbax(_file(name), opt_def, out)
  assert sorted(os.listdir(tmp_path)) == ['orbax']  # no temporary left behind
  with ocp.StandardCheckpointer() as checkpointer:
    restored = checkpointer.restore(out)
  # Plain flax/optax from here: a fresh TrainState of the expression the conversion names as
  # the template (keys carried beside the train state are left out).
  params = jax.tree_util.tree_map(jnp.asarray, restored['params'])
  tx = eval(written.load_with, {'optax': optax})  # pylint: disable=eval-used
  template = flax_train_state.TrainState.create(apply_fn=None, params=params, tx=tx)
  with ocp.StandardCheckpointer() as checkpointer:
    state = checkpointer.restore(out, dict(serialization.to_state_dict(template),
                                           opt_state=template.opt_state,
                                           **{k: v for k, v in restored.items()
                                              if k not in ('step', 'params', 'opt_state')}))
  state = template.replace(step=state['step'], params=state['params'],
                           opt_state=state['opt_state'])
  assert int(state.step) == int(written.train_state.step)
  step = jax.jit(lambda s, g: s.apply_gradients(grads=g))
  for i in range(STEPS):
    state = step(state, _grads(name, i))
    _utils.assert_trees_close(serialization.to_state_dict(state.params),
                              EXPECTED[name]['continued'][i]['target'])
  with pytest.raises(convert.CheckpointError, match='already exists'):
    convert.to_orbax(_file(name), opt_def, out)


def test_mismatching_optimizer_names_the_family():
  with pytest.raises(convert.CheckpointError, match=f'looks like it was written by {_ADAM}'):
    convert.to_optax(_file('Adam'), optim.Momentum(0.1))
  with pytest.raises(convert.CheckpointError,
                     match="'/optimizer/state/param_states/dense/bias'.*looks like"):
    convert.to_train_state(_file('TrainState-Adam'), optim.Adagrad(0.1))


@pytest.mark.parametrize('name,opt_def', [
    ('WeightNorm-Momentum', lambda: optim.WeightNorm(optim.Momentum(0.05, beta=0.8))),
    ('Momentum', lambda: optim.Momentum(0.05, beta=0.8).optax_transform()),
])
def test_no_optax_form_is_a_clear_error(name, opt_def):
  with pytest.raises((convert.CheckpointError, TypeError), match='WeightNorm|OptimizerDef'):
    convert.to_optax(_file(name), opt_def())


@pytest.mark.filterwarnings('ignore:`flax.traverse_util.Traversal` will be deprecated')
def test_multi_optimizer_converts_to_multi_transform():
  traversal = optim.ModelParamTraversal(lambda path, _: 'kernel' in path)
  multi = optim.MultiOptimizer((traversal, optim.Momentum(0.05, beta=0.8)))
  params, tx, opt_state = convert.to_optax(_file('TrainState-MultiOptimizer'), multi)
  assert sorted(opt_state.inner_states) == ['0', 'unmatched']
  updates, _ = tx.update(params, opt_state, params)
  assert not np.any(np.asarray(updates['dense']['bias']))  # unselected: set to zero


def test_several_optimizers_in_one_file():
  raw = _raw('Adam')
  with pytest.raises(convert.CheckpointError, match='2 optimizers, at /a, /b'):
    convert.to_optax({'a': raw, 'b': raw}, _opt_def('Adam'))


# ----------------------------------------------------------------------------- back to legacy


@pytest.mark.parametrize('name', CONVERTED)
def test_to_legacy_file_restores_in_legacy_and_continues(name, tmp_path):
  """Our to_legacy after 3 optax steps; the legacy library restored the same file exactly and
  continued from it like from its own checkpoint (recorded by tools/oracle/gen_convert.py)."""
  opt_def = _opt_def(name)
  state = convert.to_train_state(_file(name), opt_def)
  step = jax.jit(lambda s, g: s.apply_gradients(grads=g))
  for i in range(BACK_AFTER):
    state = step(state, _grads(name, i))
  out = tmp_path / 'legacy.msgpack'
  legacy_step = int(_optimizer_sd(_raw(name))['state']['step']) + BACK_AFTER
  sd = convert.to_legacy(state.params, state.opt_state, opt_def, step=legacy_step, path=out)
  with open(os.path.join(OURS, f'{name}.msgpack'), 'rb') as f:
    committed = serialization.msgpack_restore(f.read())
  written = serialization.msgpack_restore(out.read_bytes())
  _utils.assert_trees_close(written, serialization.to_state_dict(sd), rtol=0)
  _utils.assert_trees_close(written, committed)   # today's to_legacy ~ the file legacy read
  from_ours = EXPECTED[name]['from_ours']
  _utils.assert_trees_close(from_ours['restored'], committed, rtol=0)   # legacy restored it
  for ours, theirs in zip(from_ours['continued'], EXPECTED[name]['continued'][BACK_AFTER:]):
    _utils.assert_trees_close(ours, theirs)
  # ... and this package restores it into a fresh optimizer.
  template = opt_def.create(jax.tree_util.tree_map(jnp.zeros_like, state.params))
  restored = serialization.from_bytes(template, out.read_bytes())
  assert int(restored.state.step) == legacy_step


def test_to_legacy_checks_its_inputs(tmp_path):
  params = {'w': jnp.ones(3)}
  adam_state = optim.Adam(0.1).optax_transform().init(params)
  with pytest.raises(convert.CheckpointError, match='does not fit Momentum'):
    convert.to_legacy(params, adam_state, optim.Momentum(0.1))
  gd_state = optim.GradientDescent(0.1).optax_transform().init(params)
  with pytest.raises(convert.CheckpointError, match='pass step='):
    convert.to_legacy(params, gd_state, optim.GradientDescent(0.1))
  sd = convert.to_legacy(params, gd_state, optim.GradientDescent(0.1), step=7)
  assert int(sd['state']['step']) == 7 and sd['state']['param_states'] == {'w': {}}
  (tmp_path / 'taken').write_bytes(b'keep')
  with pytest.raises(convert.CheckpointError, match='already exists'):
    convert.to_legacy(params, adam_state, optim.Adam(0.1), path=tmp_path / 'taken')
  assert (tmp_path / 'taken').read_bytes() == b'keep'


# ----------------------------------------------------------------------------- diff


def test_diff():
  raw = _raw('Adam')
  assert convert.diff(_file('Adam'), raw).same()
  changed = jax.tree_util.tree_map(lambda x: x, raw)
  changed['target']['dense']['bias'] = raw['target']['dense']['bias'] * np.float32(1.001)
  result = convert.diff(_file('Adam'), changed)
  assert [p for p, _, rel in result.leaves if rel] == ['/target/dense/bias']
  bias = raw['target']['dense']['bias'].astype(np.float64)
  assert result.max_abs == pytest.approx(np.max(np.abs(bias * 0.001)), rel=1e-3)
  assert result.max_rel == pytest.approx(0.001 / 1.001, rel=1e-3)
  assert not result.same(rtol=1e-4) and result.same(rtol=1e-2)
  del changed['target']['scale']
  changed['extra'] = np.zeros(2)
  changed['state']['step'] = np.zeros(2)
  result = convert.diff(raw, changed)
  assert result.only_a == ['/target/scale'] and result.only_b == ['/extra']
  assert result.mismatched == [('/state/step', 'int32[] vs float64[2]')]
  assert not result.same(rtol=1.0)


def test_diff_across_layouts_with_the_optimizer(tmp_path):
  opt_def = _opt_def('Adam')
  convert.to_orbax(_file('Adam'), opt_def, tmp_path / 'orbax')
  assert not convert.diff(_file('Adam'), tmp_path / 'orbax').same()
  assert convert.diff(_file('Adam'), tmp_path / 'orbax', opt_def).same()


def test_write_msgpack_array_encodings(tmp_path):
  """Every ext header size (fixext 16, ext8, ext16, ext32), dtypes, 0-d, scalars and None."""
  tree = {'f32_0d': np.float32(1.5) * np.ones((), np.float32), 'i8': np.arange(3, dtype=np.int8),
          'bf16': np.ones((3, 5), jnp.bfloat16), 'mid': np.ones(100, np.float32),
          'big': np.ones((300, 300), np.float64), 'bool': np.array([True, False]),
          'step': np.int64(7), 'none': None, 'py': 3, 'empty': {}, 'zero': np.zeros((0, 3))}
  convert.write_msgpack(tmp_path / 'out', tree)
  assert (tmp_path / 'out').read_bytes() == serialization.msgpack_serialize(tree)


def test_a_from_optax_optimizer_converts_to_its_own_state():
  """A from_optax optimizer's param_states is its optax state: converted as it is (into the
  same transformation), and a tx of another state structure is refused by name."""
  opt_def = optim.from_optax(optax.adamw, learning_rate=1e-2, weight_decay=1e-3)
  optimizer = opt_def.create({'w': jnp.ones(2)}).apply_gradient({'w': jnp.ones(2)})
  conversion = convert.convert_checkpoint(serialization.to_bytes(optimizer), opt_def)
  assert (jax.tree_util.tree_structure(conversion.train_state.opt_state)
          == jax.tree_util.tree_structure(optimizer.state.param_states))
  jax.tree_util.tree_map(np.testing.assert_array_equal, conversion.train_state.opt_state,
                         optimizer.state.param_states)
  with pytest.raises(convert.CheckpointError, match='same structure'):
    convert.convert_checkpoint(serialization.to_bytes(optimizer), opt_def,
                               tx=optax.sgd(0.1, momentum=0.9))
