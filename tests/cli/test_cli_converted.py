"""The tool on its own outputs: inspect describes them, diff compares them, the step survives
every ``--to``, bad steps are refused, and the load code it prints (and the docs' snippets) run.
"""
import json
import os
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import serialization

import flax_optim_compat as optim
from flax_optim_compat._cli import _main as _cli
from tests import _utils

REPO = pathlib.Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.filterwarnings('ignore::flax_optim_compat.FlaxOptimDeprecationWarning')

_run = _utils.run_cli
TS = _utils.legacy_checkpoint('TrainState-Adam')
TS_MULTI = _utils.legacy_checkpoint('TrainState-MultiOptimizer')
MOMENTUM = _utils.legacy_checkpoint('Momentum')
ADAM = 'Adam(learning_rate=0.01, beta1=0.85, beta2=0.99, eps=1e-6, weight_decay=0.01)'
ADAMW = 'optax.adamw(learning_rate=0.01, b1=0.85, b2=0.99, eps=1e-06, weight_decay=0.01)'
MOMENTUM_OPT = 'Momentum(learning_rate=0.05, beta=0.8, weight_decay=0.01, nesterov=True)'
# Every --to from a legacy file, from the format registry (a new format is covered as it lands).
FORWARD = _utils.forward_formats()
MULTI = ("MultiOptimizer((ModelParamTraversal('/kernel$'), Momentum(learning_rate=0.05, "
         "beta=0.8, weight_decay=0.01, nesterov=True)))")


def _convert(capsys, source, opt, to, out, *extra):
  code, stdout, err = _run(capsys, 'convert', source, '--optimizer', opt, '--to', to,
                           '--out', str(out), *extra)
  assert code == 0, err
  return stdout


def _zeros(tree):
  return jax.tree_util.tree_map(lambda x: jnp.zeros(np.shape(x), np.asarray(x).dtype), tree)


# ----------------------------------------------------------------------------- inspect


@pytest.mark.parametrize('to, layout', [('train-state', []), ('optax', []), ('orbax', []),
                                        ('orbax', ['--keep-layout'])])
def test_inspect_says_what_a_converted_output_is(capsys, tmp_path, to, layout):
  out = tmp_path / 'out'
  _convert(capsys, TS, ADAM, to, out, *layout)
  code, stdout, _ = _run(capsys, 'inspect', str(out), '--json')
  info = json.loads(stdout)
  # optax.adamw is chain(scale_by_adam, add_decayed_weights, scale_by_learning_rate):
  state = optax.adamw(0.1).init({'w': jnp.zeros(1)})
  assert [type(s).__name__ for s in state] == ['ScaleByAdamState', 'EmptyState', 'EmptyState']
  assert info['optax_state'] == '(ScaleByAdamState(count, mu, nu), EmptyState(), EmptyState())'
  assert info['container'] == 'converted train state' and info['optimizer'] is None
  raw = _utils.legacy_checkpoint_tree('TrainState-Adam')
  if layout:  # the optimizer node replaced in place: the optimizer's own step, nothing beside
    assert info['optimizer_path'] == '/optimizer' and info['carried'] == []
    assert info['step'] == int(raw['optimizer']['state']['step']) == 2
  else:
    assert info['optimizer_path'] == '/' and info['carried'] == ['dynamic_scale', 'model_state']
    assert info['step'] == int(raw['step']) == 3
  assert info['param_count'] == 16
  code, stdout, _ = _run(capsys, 'inspect', str(out))
  assert code == 0 and stdout.startswith('a converted TrainState') and 'unknown' not in stdout


def test_inspect_names_multi_transform_and_chains(capsys, tmp_path):
  _convert(capsys, TS_MULTI, MULTI, 'orbax', tmp_path / 'out')
  info = json.loads(_run(capsys, 'inspect', str(tmp_path / 'out'), '--json')[1])
  # chain(add_decayed_weights, sgd = chain(trace, scale)) per group; set_to_zero elsewhere.
  assert info['optax_state'] == (
      "MultiTransformState(inner_states={'0': MaskedState(inner_state=(EmptyState(), "
      "(TraceState(trace), EmptyState()))), 'unmatched': MaskedState(inner_state=EmptyState())})")


# ----------------------------------------------------------------------------- diff


def test_diff_msgpack_and_orbax_of_one_conversion_are_the_same(capsys, tmp_path):
  _convert(capsys, TS, ADAM, 'train-state', tmp_path / 'a')
  _convert(capsys, TS, ADAM, 'orbax', tmp_path / 'b')
  code, stdout, _ = _run(capsys, 'diff', str(tmp_path / 'a'), str(tmp_path / 'b'))
  assert code == 0 and stdout.startswith('same (rtol 0)'), stdout
  code, stdout, _ = _run(capsys, 'diff', str(tmp_path / 'a'), str(tmp_path / 'b'), '--json')
  result = json.loads(stdout)
  assert code == 0 and result['same'] and result['structural'] == 0 and result['compared'] == 13


def test_diff_tx_converts_the_legacy_side_into_it(capsys, tmp_path):
  tx = ('optax.inject_hyperparams(optax.adamw)(learning_rate=0.01, b1=0.85, b2=0.99, '
        'eps=1e-06, weight_decay=0.01)')
  _convert(capsys, TS, ADAM, 'orbax', tmp_path / 'injected', '--tx', tx)
  code, stdout, _ = _run(capsys, 'diff', TS, str(tmp_path / 'injected'), '--optimizer', ADAM,
                         '--tx', tx, '--json')
  assert code == 0 and json.loads(stdout)['same'], stdout
  # Without --tx the legacy side is the default (plain optax.adamw): another state tree.
  code, stdout, _ = _run(capsys, 'diff', TS, str(tmp_path / 'injected'), '--optimizer', ADAM)
  assert code == 1 and 'only in B: /opt_state/hyperparams/learning_rate' in stdout
  code, _, err = _run(capsys, 'diff', TS, str(tmp_path / 'injected'), '--tx', tx)
  assert code == 2 and 'give --optimizer too' in err


# ----------------------------------------------------------------------------- the step


def _momentum_train_state(tmp_path, outer_step=7, steps=5):
  """A legacy train state whose own step (7) is not the optimizer's (5)."""
  opt = optim.Momentum(0.1, beta=0.9).create({'w': jnp.arange(3.0)})
  for _ in range(steps):
    opt = opt.apply_gradient({'w': jnp.ones(3)})
  path = tmp_path / 'legacy.msgpack'
  path.write_bytes(serialization.to_bytes({'step': outer_step, 'optimizer': opt,
                                           'rng': jnp.arange(2)}))
  return str(path)


@pytest.mark.parametrize('to', FORWARD)
def test_every_to_keeps_the_train_states_step(capsys, tmp_path, to):
  source = _momentum_train_state(tmp_path)
  stdout = _convert(capsys, source, 'Momentum(0.1, beta=0.9)', to, tmp_path / 'out')
  assert stdout.startswith(f'wrote {tmp_path / "out"} ({to}, step 7)')
  info = json.loads(_run(capsys, 'inspect', str(tmp_path / 'out'), '--json')[1])
  assert info['step'] == 7
  code, _, err = _run(capsys, 'convert', str(tmp_path / 'out'), '--optimizer',
                      'Momentum(0.1, beta=0.9)', '--to', 'legacy', '--out',
                      str(tmp_path / 'back'))
  assert code == 0, err
  back = serialization.msgpack_restore((tmp_path / 'back').read_bytes())
  # Momentum's optax state keeps no count: the optimizer gets the train state's step.
  assert int(back['step']) == 7 and int(back['optimizer']['state']['step']) == 7


@pytest.mark.parametrize('where, value, message', [
    ('step', np.float32(3.5), 'at /step: the step must be an integer scalar, not 3.5 (float32)'),
    ('step', 3.0, 'at /step: the step must be an integer scalar, not 3.0 (a Python float)'),
    ('step', np.int32(-2), 'at /step: the step -2 is not in [0, 2**31 - 1]: it is negative'),
    ('count', np.int32(-5),
     'at /opt_state/0/count: the count -5 is not in [0, 2**31 - 1]: it is negative'),
])
def test_a_bad_step_in_a_converted_file_is_refused(capsys, tmp_path, where, value, message):
  out = tmp_path / 'out.msgpack'
  _convert(capsys, TS, ADAM, 'train-state', out)
  raw = serialization.msgpack_restore(out.read_bytes())
  if where == 'step':
    raw['step'] = value
  else:
    raw['opt_state']['0']['count'] = value
  bad = tmp_path / 'bad.msgpack'
  bad.write_bytes(serialization.msgpack_serialize(raw))
  code, _, err = _run(capsys, 'convert', str(bad), '--optimizer', ADAM, '--to', 'legacy',
                      '--out', str(tmp_path / 'back'))
  assert code == 2 and err.count('\n') == 1, err
  assert f"'{bad}': {message}" in err
  assert not (tmp_path / 'back').exists()


# ----------------------------------------------------------------------------- load code


def _printed_code_runs(capsys, tmp_path, source, opt, to, layout, names):
  out = tmp_path / 'out'
  code, stdout, err = _run(capsys, 'convert', source, '--optimizer', opt, '--to', to,
                           '--out', str(out), '--json', *layout)
  assert code == 0, err
  printed = json.loads(stdout)
  _, text, _ = _run(capsys, 'convert', source, '--optimizer', opt, '--to', to,
                    '--out', str(tmp_path / 'again'), *layout)
  assert ''.join(f'    {line}\n'.rstrip(' ') if line else '\n'
                 for line in printed['load_code'].replace(str(out), str(tmp_path / 'again'))
                 .splitlines()) in text
  raw = _utils.legacy_checkpoint_tree(os.path.basename(os.path.dirname(source)))
  optimizer = raw.get('optimizer', raw)
  namespace = {'params': _zeros(optimizer['target'])}
  namespace.update({k: _zeros(raw[k]) for k in names})
  exec(printed['load_code'], namespace)  # pylint: disable=exec-used
  state = namespace['state']
  get = state.get if isinstance(state, dict) else lambda k: getattr(state, k)
  _utils.assert_trees_close(get('params'), optimizer['target'], rtol=0)
  step = raw['step'] if 'step' in raw and not layout else optimizer['state']['step']
  assert int(get('step')) == int(step) == printed['step']
  for k in names if not layout else ():
    _utils.assert_trees_close(get(k), raw[k], rtol=0)
  return printed


@pytest.mark.parametrize('to, layout', [('train-state', []), ('optax', []), ('orbax', []),
                                        ('train-state', ['--keep-layout']),
                                        ('orbax', ['--keep-layout'])])
def test_printed_load_code_runs_as_written(capsys, tmp_path, monkeypatch, to, layout):
  monkeypatch.chdir(tmp_path)  # a relative --out: orbax's load code must say the absolute path
  _printed_code_runs(capsys, tmp_path, TS, ADAM, to, layout, ['dynamic_scale', 'model_state'])


@pytest.mark.parametrize('source, opt, to', [(MOMENTUM, MOMENTUM_OPT, 'orbax'),
                                             (MOMENTUM, MOMENTUM_OPT, 'train-state'),
                                             (TS_MULTI, MULTI, 'orbax')])
def test_printed_load_code_runs_with_nothing_carried_and_labels(capsys, tmp_path, source, opt,
                                                                to):
  names = ['dynamic_scale', 'model_state'] if source == TS_MULTI else []
  printed = _printed_code_runs(capsys, tmp_path, source, opt, to, [], names)
  assert ('class TrainState' in printed['load_code']) == bool(names)
  assert (printed['param_labels'] is not None) == (source == TS_MULTI)


def test_version(capsys):
  with pytest.raises(SystemExit) as exit_info:
    _cli.main(['--version'])
  assert exit_info.value.code == 0
  assert capsys.readouterr().out == f'flax-optim-compat {optim.__version__}\n'


# ----------------------------------------------------------------------------- the docs' text

# The README's (and the guide's) load snippet, as the docs show it: keep the two identical.
def _readme_block(name):
  """The README's ```py block after its marker ``<!-- run by tests/cli/test_cli_converted.py:
  NAME -->``: the docs hold the text, this test runs it as written."""
  text = (pathlib.Path(REPO) / 'README.md').read_text(encoding='utf-8')
  marker = f'<!-- run by tests/cli/test_cli_converted.py: {name} -->\n```py\n'
  assert marker in text, f'README.md lost the {name} snippet marker'
  return text.split(marker, 1)[1].split('```\n', 1)[0]


README_LOAD = _readme_block('README_LOAD')
# Nothing carried beside the train state (a bare optimizer): flax's own TrainState.
README_LOAD_BARE = _readme_block('README_LOAD_BARE')


@pytest.mark.parametrize('snippet', ['README_LOAD', 'README_LOAD_BARE'])
def test_the_docs_load_snippets_run_as_written(capsys, tmp_path, monkeypatch, snippet):
  import flax.linen as nn  # pylint: disable=g-import-not-at-top
  monkeypatch.chdir(tmp_path)
  model = nn.Dense(3)
  params = model.init(jax.random.PRNGKey(0), jnp.ones((1, 2)))
  optimizer = optim.Adam(learning_rate=1e-3, weight_decay=1e-4).create(params)
  grads = jax.tree_util.tree_map(jnp.ones_like, params)
  optimizer = optimizer.apply_gradient(grads).apply_gradient(grads)
  model_state = {'batch_stats': {'mean': jnp.arange(3.0)}}
  os.mkdir('ckpts')
  saved = ({'step': 2, 'optimizer': optimizer, 'model_state': model_state}
           if snippet == 'README_LOAD' else optimizer)
  with open(os.path.join('ckpts', 'checkpoint_2'), 'wb') as f:
    f.write(serialization.to_bytes(saved))
  # The README's commands, as written.
  opt = 'Adam(learning_rate=1e-3, weight_decay=1e-4)'
  for to, out in (('train-state', 'state.msgpack'), ('orbax', 'state_orbax')):
    code, stdout, err = _run(capsys, 'convert', 'ckpts/', '--optimizer', opt, '--to', to,
                             '--out', out)
    assert code == 0, err
    assert 'tx=optax.adamw(learning_rate=0.001, b1=0.9, b2=0.999, eps=1e-08, ' \
           'weight_decay=0.0001)' in stdout
  namespace = {'model': model, 'params': _zeros(params), 'model_state': _zeros(model_state)}
  exec(globals()[snippet], namespace)  # pylint: disable=exec-used
  state = namespace['state']
  assert int(state.step) == 2
  _utils.assert_trees_close(state.params, optimizer.target, rtol=0)
  if snippet == 'README_LOAD':
    _utils.assert_trees_close(state.model_state, model_state, rtol=0)
  # It continues as legacy does: one more step on both sides.
  state = state.apply_gradients(grads=grads)
  _utils.assert_trees_close(state.params, optimizer.apply_gradient(grads).target, rtol=1e-6)
