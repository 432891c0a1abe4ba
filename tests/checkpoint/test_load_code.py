"""The load code ``convert`` prints runs as printed where this package is not installed, and a
carried value keeps its type through every ``--to`` and back.

Each printed snippet (every ``--to`` that prints one; nothing carried, carried keys, a
MultiOptimizer's labels, a tx with ``hyperparam_dtype=jnp.float32``) is pasted into a child
interpreter that cannot import ``flax_optim_compat`` (``tests/_isolated.py``), in a namespace
holding only the user's ``params`` and carried values: every name it uses must be imported by
the snippet itself. Expected values: the legacy fixture's own arrays (written by flax 0.5.3).
"""
import json
import pathlib

import jax
import numpy as np
import pytest
from flax import serialization

from flax_optim_compat import convert
from tests import _isolated
from tests import _utils

pytestmark = pytest.mark.filterwarnings('ignore::flax_optim_compat.FlaxOptimDeprecationWarning')

TS = 'TrainState-Adam'
TS_MULTI = 'TrainState-MultiOptimizer'
MOMENTUM = 'Momentum'
ADAM = 'Adam(learning_rate=0.01, beta1=0.85, beta2=0.99, eps=1e-6, weight_decay=0.01)'
ADAMW_F32 = ('optax.inject_hyperparams(optax.adamw, hyperparam_dtype=jnp.float32)('
             'learning_rate=0.01, b1=0.85, b2=0.99, eps=1e-06, weight_decay=0.01)')
MOMENTUM_OPT = 'Momentum(learning_rate=0.05, beta=0.8, weight_decay=0.01, nesterov=True)'
MULTI = ("MultiOptimizer((ModelParamTraversal('/kernel$'), Momentum(learning_rate=0.05, "
         "beta=0.8, weight_decay=0.01, nesterov=True)))")
CARRIED = ['dynamic_scale', 'model_state']

# (fixture, --optimizer, extra arguments, carried keys)
CASES = [(MOMENTUM, MOMENTUM_OPT, [], []),
         (TS, ADAM, [], CARRIED),
         (TS, ADAM, ['--keep-layout'], []),
         (TS, ADAM, ['--tx', ADAMW_F32], CARRIED),
         (TS_MULTI, MULTI, [], CARRIED)]

# Runs each case's snippet in a namespace of the given values only; writes what it restored.
_CHILD = '''
import json, sys
from flax import serialization
for case in json.loads(sys.argv[1]):
  with open(case['given'], 'rb') as f:
    namespace = dict(serialization.msgpack_restore(f.read()))
  exec(case['code'], namespace)
  state = namespace['state']
  get = state.get if isinstance(state, dict) else lambda k: getattr(state, k)
  restored = {k: get(k) for k in ['step', 'params'] + case['carried']}
  with open(case['restored'], 'wb') as f:
    f.write(serialization.msgpack_serialize(serialization.to_state_dict(restored)))
'''


def _zeros(tree):
  return jax.tree_util.tree_map(lambda x: np.zeros(np.shape(x), np.asarray(x).dtype), tree)


def test_every_printed_snippet_runs_without_this_package(capsys, tmp_path):
  cases = []
  for i, (fixture, opt, extra, carried) in enumerate(CASES):
    raw = _utils.legacy_checkpoint_tree(fixture)
    optimizer = raw.get('optimizer', raw)
    for to in _utils.forward_formats():
      out = tmp_path / f'{i}-{to}'
      code, stdout, err = _utils.run_cli(capsys, 'convert', _utils.legacy_checkpoint(fixture),
                                         '--optimizer', opt, '--to', to, '--out', str(out),
                                         '--json', *extra)
      assert code == 0, err
      printed = json.loads(stdout)
      snippet = printed['load_code']
      assert snippet is not None, (fixture, to)
      if 'jnp.' in snippet:
        assert 'import jax.numpy as jnp' in snippet.splitlines()
      # What the user has: the model's params; for orbax each carried value by its name.
      given = {'params': _zeros(optimizer['target'])}
      if convert.output_format(to).carried_by_name:
        given.update({k: _zeros(raw[k]) for k in carried})
      (tmp_path / f'{i}-{to}.given').write_bytes(serialization.msgpack_serialize(given))
      step = optimizer['state']['step'] if '--keep-layout' in extra else raw.get(
          'step', optimizer['state']['step'])
      cases.append(({'code': snippet, 'given': str(tmp_path / f'{i}-{to}.given'),
                     'restored': str(tmp_path / f'{i}-{to}.restored'), 'carried': carried},
                    raw, optimizer, int(step)))
  assert any('hyperparam_dtype=jnp.float32' in case['code'] for case, *_ in cases)
  _isolated.run_isolated(_CHILD, args=[json.dumps([case for case, *_ in cases])])
  for case, raw, optimizer, step in cases:
    restored = serialization.msgpack_restore(pathlib.Path(case['restored']).read_bytes())
    _utils.assert_trees_close(restored['params'], optimizer['target'], rtol=0)
    assert int(restored['step']) == step
    for k in case['carried']:
      _utils.assert_trees_close(restored[k], raw[k], rtol=0)


# ----------------------------------------------------------------------------- carried types

def _legacy_with_scalars(tmp_path):
  """A legacy train state carrying a NumPy int32 scalar, a 0-d int32 array and a bfloat16."""
  raw = _utils.legacy_checkpoint_tree(MOMENTUM)
  tree = {'step': np.int32(3), 'optimizer': raw, 'epoch': np.int32(4),
          'best': np.array(5, np.int32), 'scale': np.array([1.5], jax.numpy.bfloat16)}
  path = tmp_path / 'legacy.msgpack'
  path.write_bytes(serialization.msgpack_serialize(tree))
  return path, tree


@pytest.mark.parametrize('to', _utils.forward_formats())
def test_a_carried_scalar_keeps_its_type_there_and_back(capsys, tmp_path, to):
  source, tree = _legacy_with_scalars(tmp_path)
  out, back = tmp_path / 'out', tmp_path / 'back'
  for args in ((str(source), '--to', to, '--out', str(out)),
               (str(out), '--to', 'legacy', '--out', str(back))):
    code, _, err = _utils.run_cli(capsys, 'convert', *args, '--optimizer', MOMENTUM_OPT)
    assert code == 0, err
  read = serialization.msgpack_restore(back.read_bytes())
  for key in ('epoch', 'best', 'scale'):
    # msgpack writes a NumPy scalar and a 0-d array apart; each comes back as it went in.
    assert type(read[key]) is type(tree[key]), (key, type(read[key]))
    assert read[key].dtype == tree[key].dtype and read[key].shape == tree[key].shape, key
    np.testing.assert_array_equal(read[key], tree[key])


def test_code_that_would_not_run_as_printed_is_not_printed():
  tree = {'step': 1, 'params': {'w': np.ones(2)}, 'opt_state': {}}
  assert convert.load_code(tree, 'x', tx='optax.sgd(<function f at 0x1>)') is None
  assert convert.load_code(tree, 'x', tx='mylib.sgd(0.1)') is None   # no import known for it
  assert convert.load_code(tree, 'x', tx='optax.sgd(0.1)', to='legacy') is None  # prints none
  code = convert.load_code(
      tree, 'x', tx='optax.inject_hyperparams(optax.sgd, hyperparam_dtype=jnp.float32)(0.1)')
  assert code.splitlines()[:3] == ['import optax', 'import jax.numpy as jnp',
                                   'from flax import serialization']
