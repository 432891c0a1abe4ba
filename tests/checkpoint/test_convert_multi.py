"""MultiOptimizer, train states, replicated files: nothing dropped on the way to optax and back.

Expected values come from tests/fixtures/convert/expected.msgpack (tools/gen_convert.py, run by
flax 0.5.3): the legacy continuation of every MultiOptimizer file, and what flax 0.5.3 restored
into the original train-state dataclass from our round trips (flat and ``keep_layout``). A
replicated file is the committed Momentum file with every leaf stacked 4 times (what
``jax_utils.replicate(optimizer)`` saved without unreplicating holds), so converting it must
give what the unreplicated file gives.
"""
import json
import os

import jax
import numpy as np
import pytest
from flax import serialization

from flax_optim_compat._cli import _main as _cli
from flax_optim_compat import convert
from tests import _utils
from tests._isolated import run_isolated

pytestmark = pytest.mark.filterwarnings('ignore::flax_optim_compat.FlaxOptimDeprecationWarning')

OURS = os.path.join(_utils.FIXTURES, 'convert', 'ours')
EXPECTED = _utils.load_fixture('convert', 'expected.msgpack')
MULTI = sorted(n for n in EXPECTED if EXPECTED[n]['optimizer']['name'] == 'MultiOptimizer')
ROUND_TRIPS = sorted(n for n in EXPECTED if 'round_trip' in EXPECTED[n])
STEPS = 6
REL = 1e-6


_file = _utils.legacy_checkpoint
_raw = _utils.legacy_checkpoint_tree
_run = _utils.run_cli
_digest = _utils.sha256


def _assert_bad_input(capsys, tmp_path, argv, match):
  """Exit 2, one stderr line naming the problem, no new file, the input untouched."""
  before = sorted(os.listdir(tmp_path))
  digest = _digest(argv[1]) if os.path.isfile(argv[1]) else None
  code, out, err = _run(capsys, *argv)
  assert code == 2, (code, out, err)
  assert err.count('\n') == 1 and err.startswith(f'flax-optim-compat {argv[0]}: error: '), err
  assert match in err, err
  assert sorted(os.listdir(tmp_path)) == before
  if digest:
    assert _digest(argv[1]) == digest


# ----------------------------------------------------------------------------- MultiOptimizer

_CHILD = r'''
import json, re, sys
import flax
import flax.traverse_util
import jax, jax.numpy as jnp, numpy as np, optax
from flax import serialization
from flax.training import train_state

with open(sys.argv[1]) as f:
  cases = json.load(f)
with open(sys.argv[2], 'rb') as f:
  inputs = serialization.msgpack_restore(f.read())
step_fn = None
results = {}
for case in cases:
  data = inputs[case['name']]
  namespace = {'optax': optax, 'jnp': jnp, 'flax': flax, 're': re}
  exec(case['labels'], namespace)  # param_labels = lambda params: ...
  tx = eval(case['load_with'], namespace)
  zeros = jax.tree_util.tree_map(lambda x: jnp.zeros(np.shape(x), np.asarray(x).dtype),
                                 data['params'])
  template = train_state.TrainState.create(apply_fn=None, params=zeros, tx=tx)
  with open(case['path'], 'rb') as f:
    stored = serialization.msgpack_restore(f.read())
  state = serialization.from_state_dict(template, {k: stored[k] for k in ('step', 'params', 'opt_state')})
  step = jax.jit(lambda s, g: s.apply_gradients(grads=g))
  worst = 0.0
  for i in range(len(data['grads'])):
    state = step(state, jax.tree_util.tree_map(jnp.asarray, data['grads'][str(i)]))
    for a, b in zip(jax.tree_util.tree_leaves(state.params),
                    jax.tree_util.tree_leaves(data['expected'][str(i)])):
      scale = max(float(np.max(np.abs(b))), 1e-30)
      worst = max(worst, float(np.max(np.abs(np.asarray(a) - b))) / scale)
  results[case['key']] = worst
print(json.dumps(results))
'''


def _inject_texts(name):
  """``--tx`` per group: each group's optimizer in its inject_hyperparams form."""
  texts = []
  for _, spec in EXPECTED[name]['optimizer']['groups']:
    kwargs = spec['kwargs']
    if spec['name'] == 'Adam':
      texts.append(f"optax.inject_hyperparams(optax.adamw)(learning_rate={kwargs['learning_rate']}, "
                   f"b1={kwargs['beta1']}, b2={kwargs['beta2']}, eps={kwargs['eps']}, "
                   f"weight_decay={kwargs['weight_decay']})")
    elif spec['name'] == 'Momentum':
      texts.append(f"optax.chain(optax.add_decayed_weights({kwargs['weight_decay']}), "
                   f"optax.inject_hyperparams(optax.sgd)(learning_rate={kwargs['learning_rate']}, "
                   f"momentum={kwargs['beta']}, nesterov={kwargs['nesterov']}))")
    else:
      texts.append(f"optax.inject_hyperparams(optax.sgd)(learning_rate={kwargs['learning_rate']})")
  return texts


def test_multi_optimizer_cli_output_loads_in_plain_optax_and_continues(capsys, tmp_path):
  cases, inputs = [], {}
  for name in MULTI:
    raw = _raw(name)
    optimizer = raw.get('optimizer', raw)
    inputs[name] = {
        'params': optimizer['target'], 'grads': EXPECTED[name]['grads'],
        'expected': {str(i): EXPECTED[name]['continued'][i]['target'] for i in range(STEPS)}}
    for variant, extra in (('default', []),
                           ('tx', [a for t in _inject_texts(name) for a in ('--tx', t)])):
      out = tmp_path / f'{name}.{variant}.msgpack'
      code, stdout, err = _run(capsys, 'convert', _file(name), '--optimizer',
                               EXPECTED[name]['cli'], '--to', 'train-state', '--out', str(out),
                               *extra)
      assert code == 0 and err == '', err
      lines = stdout.splitlines()
      load_with = lines[0].split(': load it with tx=', 1)[1]
      assert load_with.startswith('optax.multi_transform({') and "'unmatched': optax.set_to_zero()" in load_with
      labels = lines[1].split('; ', 1)[1]
      assert lines[1].startswith("  labels: one per group in order ('0', '1', ...), 'unmatched'")
      if variant == 'tx':
        assert all(t.replace(' ', '') in load_with.replace(' ', '') for t in _inject_texts(name))
      cases.append({'key': f'{name}/{variant}', 'name': name, 'path': str(out),
                    'load_with': load_with, 'labels': labels})
  (tmp_path / 'cases.json').write_text(json.dumps(cases))
  (tmp_path / 'inputs.msgpack').write_bytes(serialization.msgpack_serialize(inputs))
  proc = run_isolated(_CHILD, args=[str(tmp_path / 'cases.json'), str(tmp_path / 'inputs.msgpack')])
  results = json.loads(proc.stdout.strip().splitlines()[-1])
  assert sorted(results) == sorted(c['key'] for c in cases)
  for key, rel in results.items():
    assert rel <= REL, (key, rel)


def test_multi_optimizer_tx_count_must_match_the_groups(capsys, tmp_path):
  name = 'MultiOptimizer'
  argv = ['convert', _file(name), '--optimizer', EXPECTED[name]['cli'], '--to', 'optax',
          '--out', str(tmp_path / 'out'), '--tx', 'optax.sgd(0.1)']
  _assert_bad_input(capsys, tmp_path, argv, 'the MultiOptimizer has 2 groups; give --tx once '
                                            'per group, in order (got 1)')
  argv = ['convert', _file('Adam'), '--optimizer', EXPECTED['Adam']['cli'], '--to', 'optax',
          '--out', str(tmp_path / 'out'), '--tx', 'optax.adam(0.1)', '--tx', 'optax.adam(0.1)']
  _assert_bad_input(capsys, tmp_path, argv, '--tx given 2 times')


# ----------------------------------------------------------------------------- train states


@pytest.mark.parametrize('layout', ['flat', 'keep'])
@pytest.mark.parametrize('name', ROUND_TRIPS)
def test_train_state_round_trip_keeps_every_key_and_restores_in_flax_0_5_3(name, layout):
  opt_def = _cli.parse_optimizer(EXPECTED[name]['cli'])
  converted = convert.convert_checkpoint(_file(name), opt_def, keep_layout=layout == 'keep')
  raw = _raw(name)
  if layout == 'flat':
    assert sorted(converted.state_dict) == sorted(
        ['params', 'opt_state'] + [k for k in raw if k != 'optimizer'])
    assert int(converted.train_state.step) == int(raw['step'])
  else:
    assert sorted(converted.state_dict) == sorted(raw)
    assert sorted(converted.state_dict['optimizer']) == ['opt_state', 'params', 'step']
  for key in raw:
    if key not in ('optimizer', 'step'):
      _utils.assert_trees_close(converted.state_dict[key], raw[key], rtol=0)
  back = convert.legacy_from_converted(converted.state_dict, opt_def)
  back = serialization.to_state_dict(back)
  expected = raw
  if layout == 'flat' and name == 'TrainState-MultiOptimizer':
    # The flat TrainState has one step and a Momentum optax state no count: the optimizer gets
    # the train state's step (this file skipped an update: 3 vs 2), as the conversion notes.
    assert any("optimizer's own step (2) differs" in note for note in converted.notes)
    expected = dict(raw, optimizer=dict(raw['optimizer'], state=dict(
        raw['optimizer']['state'], step=raw['step'])))
  _utils.assert_trees_close(back, expected, rtol=0)
  committed = _utils.load_fixture('convert', 'ours', f'{name}.roundtrip-{layout}.msgpack')
  _utils.assert_trees_close(back, committed, rtol=0)
  # What flax 0.5.3 restored from that file into the original dataclass.
  _utils.assert_trees_close(EXPECTED[name]['round_trip'][layout], expected, rtol=0)


@pytest.mark.parametrize('to, layout', [('train-state', []), ('orbax', ['--keep-layout']),
                                        ('optax', [])])
def test_cli_train_state_round_trip(capsys, tmp_path, to, layout):
  name = 'TrainState-Adam'
  out, back = tmp_path / 'converted', tmp_path / 'back.msgpack'
  digest = _digest(_file(name))
  code, stdout, _ = _run(capsys, 'convert', _file(name), '--optimizer', EXPECTED[name]['cli'],
                         '--to', to, '--out', str(out), *layout)
  assert code == 0 and 'note: carried beside the train state: dynamic_scale, model_state' in (
      stdout if not layout else stdout + 'note: carried beside the train state: dynamic_scale, '
      'model_state')
  assert _digest(_file(name)) == digest
  code, stdout, _ = _run(capsys, 'convert', str(out), '--optimizer', EXPECTED[name]['cli'],
                         '--to', 'legacy', '--out', str(back))
  assert code == 0, stdout
  restored = serialization.msgpack_restore(back.read_bytes())
  # Every --to keeps the train state's own step (3), beside the optimizer's (2, the count).
  _utils.assert_trees_close(restored, _raw(name), rtol=0)


# ----------------------------------------------------------------------------- replicas


def _replicated(tmp_path, name, differ=False):
  def stack(tree):
    if isinstance(tree, dict):
      return {k: stack(v) for k, v in tree.items()}
    return np.stack([np.asarray(tree)] * 4)
  tree = stack(_raw(name))
  if differ:
    tree['target']['dense']['bias'] = tree['target']['dense']['bias'].copy()
    tree['target']['dense']['bias'][2] += 1.0
  path = tmp_path / f'{name}.replicated{"-differ" if differ else ""}.msgpack'
  path.write_bytes(serialization.msgpack_serialize(tree))
  return str(path)


def test_replicated_file_is_recognised_and_converted(capsys, tmp_path):
  name = 'Momentum'
  path = _replicated(tmp_path, name)
  info = convert.inspect(path)
  plain = convert.inspect(_file(name))
  assert info.replicas == 4 and plain.replicas is None
  assert (info.param_count, info.step) == (plain.param_count, plain.step)
  code, stdout, _ = _run(capsys, 'inspect', path)
  assert code == 0 and 'replicated 4x (a leading device axis on every leaf)' in stdout.splitlines()[0]
  opt_def = _cli.parse_optimizer(EXPECTED[name]['cli'])
  converted = convert.convert_checkpoint(path, opt_def)
  reference = convert.convert_checkpoint(_file(name), opt_def)
  _utils.assert_trees_close(serialization.to_state_dict(converted.state_dict),
                            serialization.to_state_dict(reference.state_dict), rtol=0)
  assert 'the file holds 4 replicas' in converted.notes[0]
  out = tmp_path / 'out.msgpack'
  code, stdout, _ = _run(capsys, 'convert', path, '--optimizer', EXPECTED[name]['cli'], '--to',
                         'train-state', '--out', str(out), '--replica', '3')
  assert code == 0 and 'converted replica 3' in stdout


def test_replicas_that_differ_are_named(capsys, tmp_path):
  name = 'Momentum'
  path = _replicated(tmp_path, name, differ=True)
  base = ['convert', path, '--optimizer', EXPECTED[name]['cli'], '--to', 'train-state',
          '--out', str(tmp_path / 'out')]
  _assert_bad_input(capsys, tmp_path, base, 'the replicas differ at /target/dense/bias (replica 2')
  _assert_bad_input(capsys, tmp_path, base + ['--replica', '4'], '--replica 4 is out of range')
  assert _run(capsys, *base, '--replica', '2')[0] == 0
  argv = ['convert', _file(name), '--optimizer', EXPECTED[name]['cli'], '--to', 'train-state',
          '--out', str(tmp_path / 'out2'), '--replica', '0']
  _assert_bad_input(capsys, tmp_path, argv, 'is not replicated')


# ----------------------------------------------------------------------------- layouts that fit several


@pytest.mark.parametrize('name, fits', [('Adam', 'Adam, AdaBelief or LAMB'),
                                        ('LARS', 'Momentum or LARS')])
def test_a_layout_that_fits_several_optimizers_is_said_in_one_line(capsys, tmp_path, name, fits):
  code, stdout, err = _run(capsys, 'convert', _file(name), '--optimizer', EXPECTED[name]['cli'],
                           '--to', 'optax', '--out', str(tmp_path / 'out'))
  assert code == 0
  notes = [line for line in stdout.splitlines() if f'fit {fits} alike' in line]
  assert len(notes) == 1 and notes[0].startswith('  note: ')
  if name == 'LARS':  # no exact plain optax: the default needs this package, said once
    assert sum('needs flax_optim_compat' in line for line in stdout.splitlines()) == 1
    assert err == ''


def test_closest_plain_optax_warns_in_one_line(capsys, tmp_path):
  code, _, err = _run(capsys, 'convert', _file('Adagrad'), '--optimizer',
                      EXPECTED['Adagrad']['cli'], '--to', 'optax', '--out',
                      str(tmp_path / 'out'), '--tx',
                      'optax.adagrad(0.1, initial_accumulator_value=0.0, eps=0.01)')
  assert code == 0
  assert err.count('\n') == 1 and err.startswith('flax-optim-compat convert: warning: ')
  assert 'rsqrt(G + eps)' in err
  # The structure of the file is that of the plain expression.
  stored = serialization.msgpack_restore((tmp_path / 'out').read_bytes())
  assert 'sum_of_squares' in stored['opt_state']['0']
  leaves = jax.tree_util.tree_leaves(stored['opt_state']['0']['sum_of_squares'])
  assert len(leaves) == 4
