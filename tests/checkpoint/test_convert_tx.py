"""Converting into the optax a user writes (``tx=``), loaded where users go: plain flax/optax/orbax.

Inputs: the committed legacy checkpoints (written by flax 0.5.3). Expected values:

* continuing: tests/fixtures/convert/expected.msgpack (tools/gen_convert.py, oracle venv): flax
  0.5.3 restoring each file and continuing 6 steps on the stored gradients;
* the loaded state of an optimizer no plain optax continues exactly: the legacy file's own
  per-parameter fields, mapped by hand (Adagrad ``G`` is ``optax.adagrad``'s sum of squares;
  LARS ``momentum`` is ``optax.lars``'s ``trace`` negated, as optax scales by ``-lr`` first);
* restoring a converted file: a child interpreter in which this package cannot be imported
  (``tests/_isolated.py``) builds ``TrainState.create(..., tx=<the expression>)`` and restores
  with ``serialization.from_bytes``, ``ocp.StandardCheckpointer().restore`` and
  ``flax.training.checkpoints.restore_checkpoint``.

Tolerance of a continuation: 1e-6 of each leaf's max |value| (measured worst: 2.4e-7; optax on
today's jax rounds a few products differently from flax 0.5.3 on jax 0.4.13).
"""
import json
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import serialization

from flax_optim_compat._cli import _main as _cli
from flax_optim_compat._expr import _tx as _expr_tx
from flax_optim_compat import convert
from tests import _utils
from tests._isolated import run_isolated

pytestmark = pytest.mark.filterwarnings('ignore::flax_optim_compat.FlaxOptimDeprecationWarning')

EXPECTED = _utils.load_fixture('convert', 'expected.msgpack')
STEPS = 6
REL = 1e-6
SINGLE = sorted(n for n in EXPECTED if EXPECTED[n]['optimizer']['name'] != 'MultiOptimizer')
NOT_EXACT = ('Adagrad', 'LARS')  # LARS: with weight decay
EXACT = [n for n in SINGLE if n not in NOT_EXACT]
# optax.inject_hyperparams cannot wrap optax.adafactor (its dtype argument is not a number).
NO_INJECT = ('Adafactor', 'Adafactor-defaults')


_file = _utils.legacy_checkpoint
_raw = _utils.legacy_checkpoint_tree


def _opt_def(name):
  return _cli.parse_optimizer(EXPECTED[name]['cli'])


def _optimizer_sd(raw):
  return raw['optimizer'] if 'optimizer' in raw else raw


def _injected(expression):
  """``optax.inject_hyperparams(optax.X)(...)`` of a plain ``optax.X(...)`` expression."""
  function, arguments = expression.split('(', 1)
  return f'optax.inject_hyperparams({function})({arguments}'


# The child: restores every file of the manifest into a template made with its expression,
# continues 6 steps on the stored gradients and reports the largest relative difference.
_CHILD = r'''
import json, sys
from typing import Any
import jax, jax.numpy as jnp, numpy as np, optax
import orbax.checkpoint as ocp
from flax import serialization
from flax.training import checkpoints, train_state

class WithSiblings(train_state.TrainState):
  model_state: Any = None
  dynamic_scale: Any = None

with open(sys.argv[1]) as f:
  manifest = json.load(f)
with open(sys.argv[2], 'rb') as f:
  inputs = serialization.msgpack_restore(f.read())
zeros = lambda tree: jax.tree_util.tree_map(lambda x: jnp.zeros(np.shape(x), np.asarray(x).dtype), tree)
step_fn = jax.jit(lambda s, g: s.apply_gradients(grads=g))
results = {}
for item in manifest:
  data = inputs[item['case']]
  tx = eval(item['expression'], {'optax': optax, 'jnp': jnp})
  siblings = {k: zeros(v) for k, v in data['siblings'].items()}
  if item['only_train_state']:
    cls, siblings = train_state.TrainState, {}
  else:
    cls = WithSiblings if siblings else train_state.TrainState
  template = cls.create(apply_fn=None, params=zeros(data['params']), tx=tx, **siblings)
  if item['kind'] == 'msgpack':
    with open(item['path'], 'rb') as f:
      raw = f.read()
    if item['only_train_state']:
      stored = serialization.msgpack_restore(raw)
      state = serialization.from_state_dict(
          template, {k: stored[k] for k in ('step', 'params', 'opt_state')})
    else:
      state = serialization.from_bytes(template, raw)
  elif item['kind'] == 'orbax':
    state = ocp.StandardCheckpointer().restore(item['path'], template)
  else:
    state = checkpoints.restore_checkpoint(item['path'], target=template)
  out = {'step': int(state.step), 'siblings': 0.0}
  for key in data['siblings']:
    if not item['only_train_state']:
      for a, b in zip(jax.tree_util.tree_leaves(getattr(state, key)),
                      jax.tree_util.tree_leaves(data['siblings'][key])):
        out['siblings'] = max(out['siblings'], float(np.max(np.abs(np.asarray(a) - b))))
  if item['leaves']:
    out['leaves'] = [np.asarray(x).tolist() for x in jax.tree_util.tree_leaves(state.opt_state)]
  worst = 0.0
  for i in range(len(data['grads'])):
    state = step_fn(state, jax.tree_util.tree_map(jnp.asarray, data['grads'][str(i)]))
    for a, b in zip(jax.tree_util.tree_leaves(state.params),
                    jax.tree_util.tree_leaves(data['expected'][str(i)])):
      scale = max(float(np.max(np.abs(b))), 1e-30)
      worst = max(worst, float(np.max(np.abs(np.asarray(a) - b))) / scale)
  out['rel'] = worst
  out['final_step'] = int(state.step)
  results[item['key']] = out
print(json.dumps(results))
'''


def _inputs(names):
  inputs = {}
  for name in names:
    raw = _raw(name)
    siblings = {k: v for k, v in raw.items() if k not in ('step', 'optimizer')} if (
        'optimizer' in raw) else {}
    inputs[name] = {
        'params': _optimizer_sd(raw)['target'], 'siblings': siblings,
        'grads': EXPECTED[name]['grads'],
        'expected': {str(i): EXPECTED[name]['continued'][i]['target'] for i in range(STEPS)}}
  return inputs


def _run_child(tmp_path, manifest, names):
  manifest_file = tmp_path / 'manifest.json'
  manifest_file.write_text(json.dumps(manifest))
  inputs_file = tmp_path / 'inputs.msgpack'
  inputs_file.write_bytes(serialization.msgpack_serialize(_inputs(names)))
  proc = run_isolated(_CHILD, args=[str(manifest_file), str(inputs_file)], timeout=600)
  return json.loads(proc.stdout.strip().splitlines()[-1])


def _item(key, case, path, kind, expression, only_train_state=False, leaves=False):
  return {'key': key, 'case': case, 'path': str(path), 'kind': kind, 'expression': expression,
          'only_train_state': only_train_state, 'leaves': leaves}


def _outer_step(name):
  raw = _raw(name)
  return int(raw['step'] if 'optimizer' in raw else raw['state']['step'])


# ----------------------------------------------------------------------------- every family


# (file, the closest plain optax, the legacy field its state holds, the sign that maps one to
# the other)
CLOSEST = [
    ('Adagrad', 'optax.adagrad(learning_rate=0.1, initial_accumulator_value=0.0, eps=0.01)',
     'G', 1.0),
    ('LARS', 'optax.lars(learning_rate=0.1, weight_decay=0.01, trust_coefficient=0.01, '
             'eps=1e-06, momentum=0.8, nesterov=True)', 'momentum', -1.0),
]
assert sorted(name for name, *_ in CLOSEST) == sorted(NOT_EXACT)


def _closest(name, closest):
  """``convert_checkpoint`` into ``closest`` with its difference accepted: the conversion and
  the warnings it gave."""
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter('always')
    result = convert.convert_checkpoint(_file(name), _opt_def(name),
                                        tx=_expr_tx.parse_tx(closest), accept_difference=True)
  return result, caught


@pytest.fixture(scope='module')
def loaded(tmp_path_factory):
  """Every exact family converted by default and into the inject_hyperparams form, and the
  files that are not exact converted into their closest plain optax, restored and continued in
  plain flax/optax/orbax (one child process for all of them: a child costs seconds)."""
  tmp_path = tmp_path_factory.mktemp('plain')
  manifest, expressions, closest = [], {}, {}
  for name, text, _, _ in CLOSEST:
    result, caught = closest[name] = _closest(name, text)
    path = tmp_path / f'{name}.closest.msgpack'
    convert.write_msgpack(path, serialization.to_state_dict(result.state_dict))
    manifest.append(_item(f'{name}/closest', name, path, 'msgpack', text, leaves=True))
  for name in EXACT:
    opt_def = _opt_def(name)
    default = convert.convert_checkpoint(_file(name), opt_def)
    expressions[name] = default.load_with
    assert default.load_with == opt_def.plain_optax().expression
    path = tmp_path / f'{name}.msgpack'
    convert.write_msgpack(path, serialization.to_state_dict(default.state_dict))
    manifest.append(_item(f'{name}/default', name, path, 'msgpack', default.load_with))
    if name not in NO_INJECT and not default.load_with.startswith('optax.chain('):
      text = _injected(default.load_with)
      injected = convert.convert_checkpoint(_file(name), opt_def, tx=_expr_tx.parse_tx(text))
      path = tmp_path / f'{name}.inject.msgpack'
      convert.write_msgpack(path, serialization.to_state_dict(injected.state_dict))
      manifest.append(_item(f'{name}/inject', name, path, 'msgpack', text))
  for name in ('Adam', 'Momentum', 'TrainState-Adam'):
    out = tmp_path / f'{name}.orbax'
    convert.to_orbax(_file(name), _opt_def(name), out)
    manifest.append(_item(f'{name}/orbax', name, out, 'orbax', expressions[name]))
    manifest.append(_item(f'{name}/orbax-flax', name, out, 'flax', expressions[name]))
  # Loading only the train state of a file that carries keys beside it.
  manifest.append(_item('TrainState-Adam/only-msgpack', 'TrainState-Adam',
                        tmp_path / 'TrainState-Adam.msgpack', 'msgpack',
                        expressions['TrainState-Adam'], only_train_state=True))
  manifest.append(_item('TrainState-Adam/only-flax', 'TrainState-Adam',
                        tmp_path / 'TrainState-Adam.orbax', 'flax',
                        expressions['TrainState-Adam'], only_train_state=True))
  return _run_child(tmp_path, manifest, EXACT + list(NOT_EXACT)), expressions, closest


@pytest.mark.parametrize('name', EXACT)
def test_plain_optax_loads_and_continues_like_flax_0_5_3(loaded, name):
  results, _, _ = loaded
  keys = [k for k in results if k.split('/')[0] == name]
  assert f'{name}/default' in keys
  if name not in NO_INJECT and not loaded[1][name].startswith('optax.chain('):
    assert f'{name}/inject' in keys
  for key in keys:
    result = results[key]
    assert result['step'] == _outer_step(name), key
    assert result['final_step'] == _outer_step(name) + STEPS, key
    assert result['rel'] <= REL, (key, result['rel'])
    assert result['siblings'] == 0.0, key


def test_default_expressions_are_the_guides(loaded):
  _, expressions, _ = loaded
  assert expressions['GradientDescent'] == 'optax.sgd(learning_rate=0.1)'
  assert expressions['LAMB'] == ('optax.lamb(learning_rate=0.01, b1=0.85, b2=0.99, eps=1e-05, '
                                 'weight_decay=0.01)')
  assert expressions['RMSProp'] == ('optax.rmsprop(learning_rate=0.01, decay=0.85, eps=1e-08, '
                                    'centered=False, eps_in_sqrt=False)')
  assert expressions['Momentum'].startswith('optax.chain(optax.add_decayed_weights(')


# ----------------------------------------------------------------------------- not exact


def _legacy_field(name, field):
  states = _optimizer_sd(_raw(name))['state']['param_states']
  leaves = jax.tree_util.tree_leaves(states, is_leaf=lambda x: isinstance(x, dict) and field in x)
  return [np.asarray(s[field]) for s in leaves]


@pytest.mark.parametrize('name, closest, field, sign', CLOSEST, ids=NOT_EXACT)
def test_no_exact_plain_optax(name, closest, field, sign, loaded):
  opt_def = _opt_def(name)
  assert opt_def.plain_optax().exact == 'not exact'
  assert opt_def.plain_optax().expression == closest
  # Default: the built-in's own transform, which continues exactly but needs this package.
  default = convert.convert_checkpoint(_file(name), opt_def)
  assert default.load_with == f'optim.{opt_def!r}.optax_transform()'
  assert any('needs flax_optim_compat' in note for note in default.notes)
  state = default.train_state
  step = jax.jit(lambda s, g: s.apply_gradients(grads=g))
  for i in range(STEPS):
    state = step(state, jax.tree_util.tree_map(jnp.asarray, EXPECTED[name]['grads'][str(i)]))
    _utils.assert_trees_close(serialization.to_state_dict(state.params),
                              EXPECTED[name]['continued'][i]['target'])
  # The closest plain expression: the probe refuses it (it does not continue legacy) unless the
  # difference is accepted; then a one-line warning names the term that differs, and the
  # loaded state is the legacy state mapped by meaning.
  with pytest.warns(convert.ConversionWarning, match='not exact'):
    with pytest.raises(convert.ProbeError, match='params leaf /.* beyond the 1e-6 class'):
      convert.convert_checkpoint(_file(name), opt_def, tx=_expr_tx.parse_tx(closest))
  # The accepted conversion (made by `loaded`, restored and continued in its child).
  results, _, accepted = loaded
  closest_result, caught = accepted[name]
  assert [w.category for w in caught] == [convert.ConversionWarning], caught
  assert 'not exact' in str(caught[0].message) and '\n' not in str(caught[0].message)
  assert closest_result.accepted.startswith(f'the target does not continue {opt_def!r}')
  result = results[f'{name}/closest']
  loaded_leaves = [np.asarray(x, np.float32) for x in result['leaves']]  # no count in either
  expected = [sign * x for x in _legacy_field(name, field)]
  assert len(loaded_leaves) == len(expected)
  for got, want in zip(loaded_leaves, expected):
    np.testing.assert_array_equal(got, want)
  assert result['rel'] > REL  # not exact, as declared


# ----------------------------------------------------------------------------- tx checks


def test_inject_hyperparams_state_holds_the_legacy_step_and_hyper_params():
  tx = optax.inject_hyperparams(optax.adamw)(learning_rate=0.5, b1=0.5, weight_decay=0.5)
  state = convert.to_train_state(_file('Adam'), _opt_def('Adam'), tx=tx)
  hp = state.opt_state.hyperparams
  assert int(state.opt_state.count) == 3 and int(state.opt_state.inner_state[0].count) == 3
  assert (float(hp['learning_rate']), float(hp['b1']), float(hp['b2']), float(hp['eps']),
          float(hp['weight_decay'])) == tuple(float(np.float32(v)) for v in
                                              (0.01, 0.85, 0.99, 1e-6, 0.01))
  assert float(hp['eps_root']) == 0.0  # no legacy counterpart: the transformation's own value
  legacy = _optimizer_sd(_raw('Adam'))['state']['param_states']
  np.testing.assert_array_equal(state.opt_state.inner_state[0].mu['dense']['kernel'],
                                legacy['dense']['kernel']['grad_ema'])


@pytest.mark.parametrize('name, tx, message', [
    ('Adam', optax.sgd(0.1, momentum=0.9), "legacy Adam field 'grad_ema' has no counterpart"),
    ('Momentum', optax.adam(0.1), "legacy Momentum field 'momentum' has no counterpart"),
    ('GradientDescent', optax.adam(0.1),
     r'ScaleByAdamState.mu has no counterpart in the legacy GradientDescent state'),
    ('RMSProp', optax.rmsprop(0.01, centered=True),
     "has no 'mg' but the optax state needs it"),
    ('Adafactor-defaults', optax.adafactor(0.05, min_dim_size_to_factor=2),
     "'v_row' of '/conv/kernel' has shape"),
])
def test_a_different_algorithm_names_the_field(name, tx, message):
  with pytest.raises(convert.CheckpointError, match=message):
    convert.to_optax(_file(name), _opt_def(name), tx=tx)


def test_to_legacy_reads_states_of_every_form_back():
  params = jax.tree_util.tree_map(jnp.asarray, _optimizer_sd(_raw('LARS'))['target'])
  opt_def = _opt_def('LARS')
  legacy = _optimizer_sd(_raw('LARS'))
  for tx in (optax.lars(0.1, weight_decay=0.01, trust_coefficient=0.01, eps=1e-6, momentum=0.8,
                        nesterov=True),
             optax.inject_hyperparams(optax.lars)(0.1, weight_decay=0.01, momentum=0.8),
             opt_def.optax_transform()):
    with warnings.catch_warnings():
      warnings.simplefilter('ignore', convert.ConversionWarning)
      # optax.lars does not continue LARS with weight decay: accepted, for the state's sake.
      _, _, opt_state = convert.to_optax(_file('LARS'), opt_def, tx=tx, accept_difference=True)
    back = convert.to_legacy(params, opt_state, opt_def, tx=tx, step=3)
    _utils.assert_trees_close(back, legacy, rtol=0)


def test_lamb_names_all_zero_params_where_optax_lamb_differs():
  raw = _raw('LAMB')

  def zero_notes(conversion):  # a default conversion also says what the file cannot tell
    return tuple(n for n in conversion.notes[1:] if 'set the learning rate per step' not in n)
  assert not zero_notes(convert.convert_checkpoint(raw, _opt_def('LAMB')))
  raw['target']['dense']['bias'] = np.zeros_like(raw['target']['dense']['bias'])
  notes = (None,) + zero_notes(convert.convert_checkpoint(raw, _opt_def('LAMB')))
  # Legacy's trust ratio is 0 for a zero param (it never moves), optax.lamb's 1 (it moves by
  # about the learning rate): the whole leaf differs, relative difference 1.
  note = ('/dense/bias is all zeros: optax.lamb moves an all-zero param (trust ratio 1), legacy '
          'kept it at zero (ratio 0) (the probe measured a relative difference of 1)')
  assert notes[1:] == (note,)
  # The same expression given as tx: the same note (it follows the math, not the route).
  given = optax.lamb(0.01, b1=0.85, b2=0.99, eps=1e-05, weight_decay=0.01)
  assert convert.convert_checkpoint(raw, _opt_def('LAMB'), tx=given).notes[1:] == (note,)
  # The def's own transformation keeps legacy's rule: nothing to say.
  own = _opt_def('LAMB').optax_transform()
  assert not convert.convert_checkpoint(raw, _opt_def('LAMB'), tx=own).notes[1:]
