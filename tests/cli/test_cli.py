"""The command line (``flax-optim-compat`` / ``python -m flax_optim_compat``).

Every bad input exits with status 2 and one line on stderr naming what is wrong (no
traceback), writes nothing and leaves the input as it was.
"""
import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import serialization

import flax_optim_compat as optim
from flax_optim_compat._cli import _main as _cli
from tests import _utils

pytestmark = pytest.mark.filterwarnings('ignore::flax_optim_compat.FlaxOptimDeprecationWarning')

LEGACY = _utils.LEGACY_CHECKPOINTS
ADAM_DIR = os.path.join(LEGACY, 'Adam')
ADAM_FILE = os.path.join(ADAM_DIR, 'checkpoint_3')
ADAM = 'Adam(learning_rate=0.01, beta1=0.85, beta2=0.99, eps=1e-6, weight_decay=0.01)'
# Every registered format that converts a legacy checkpoint (all but the way back).
FORWARD = _utils.forward_formats()


_run = _utils.run_cli
_digest = _utils.sha256


def _assert_bad_input(capsys, tmp_path, argv, match):
  """Exit 2, one stderr line matching ``match``, nothing new in ``tmp_path`` but the inputs."""
  before = sorted(os.listdir(tmp_path))
  code, out, err = _run(capsys, *argv)
  assert code == 2, (code, out, err)
  assert err.count('\n') == 1 and 'Traceback' not in err, err
  assert err.startswith(f'flax-optim-compat {argv[0]}: error: '), err
  assert match in err, err
  assert sorted(os.listdir(tmp_path)) == before
  return err


@pytest.fixture
def orbax_dir(tmp_path_factory):
  out = tmp_path_factory.mktemp('orbax') / 'ckpt'
  assert _cli.main(['convert', ADAM_DIR, '--optimizer', ADAM, '--to', 'orbax',
                    '--out', str(out)]) == 0
  return str(out)


# ----------------------------------------------------------------------------- bad input


def test_not_msgpack(capsys, tmp_path):
  path = tmp_path / 'notes.txt'
  path.write_text('these are not the weights you are looking for\n')
  _assert_bad_input(capsys, tmp_path, ['inspect', str(path)], 'is not a msgpack checkpoint')
  _assert_bad_input(capsys, tmp_path, ['convert', str(path), '--optimizer', ADAM, '--to',
                                       'optax', '--out', str(tmp_path / 'out')],
                    'is not a msgpack checkpoint')


def test_truncated(capsys, tmp_path):
  path = tmp_path / 'checkpoint_3'
  with open(ADAM_FILE, 'rb') as f:
    path.write_bytes(f.read()[:300])
  digest = _digest(path)
  _assert_bad_input(capsys, tmp_path, ['inspect', str(path)], 'is truncated')
  _assert_bad_input(capsys, tmp_path, ['convert', str(tmp_path), '--optimizer', ADAM, '--to',
                                       'train-state', '--out', str(tmp_path / 'out')],
                    'is truncated')
  assert _digest(path) == digest


def test_empty(capsys, tmp_path):
  path = tmp_path / 'checkpoint_1'
  path.write_bytes(b'')
  _assert_bad_input(capsys, tmp_path, ['inspect', str(path)], 'is empty (0 bytes)')


def test_directory_without_checkpoint(capsys, tmp_path):
  (tmp_path / 'README').write_text('no checkpoint here')
  _assert_bad_input(capsys, tmp_path, ['inspect', str(tmp_path)], 'holds no checkpoint')


def test_missing_path(capsys, tmp_path):
  _assert_bad_input(capsys, tmp_path, ['inspect', str(tmp_path / 'nope')], 'does not exist')


def test_converted_orbax_directory_where_a_legacy_checkpoint_is_expected(capsys, tmp_path,
                                                                         orbax_dir):
  _assert_bad_input(capsys, tmp_path, ['convert', orbax_dir, '--optimizer', ADAM, '--to',
                                       'optax', '--out', str(tmp_path / 'out')],
                    'holds no legacy optimizer')


def test_an_optimizer_without_a_learning_rate_needs_a_per_step_form(capsys, tmp_path):
  """A def without a learning rate had it set per step: no constant-rate transformation
  continues it. The default conversion refuses, naming the forms that do (the rate injected and
  set per step, or a schedule of optax's count); a constant-rate --tx is refused; the injected
  form converts, as with the rate given. One rule, one message (plain_optax says the same)."""
  no_lr = 'Adam(beta1=0.85, beta2=0.99, eps=1e-6, weight_decay=0.01)'
  err = _assert_bad_input(capsys, tmp_path, ['convert', ADAM_DIR, '--optimizer', no_lr, '--to',
                                             'train-state', '--out', str(tmp_path / 'out')],
                          'has no learning rate: the run set it per step')
  assert ('optax.inject_hyperparams(optax.adamw)(learning_rate=..., b1=0.85, b2=0.99, eps=1e-06, '
          "weight_decay=0.01) and opt_state.hyperparams['learning_rate'] = lr") in err
  assert ('optax.adamw(learning_rate=schedule, b1=0.85, b2=0.99, eps=1e-06, weight_decay=0.01) '
          'with schedule = lambda count:') in err
  with pytest.raises(ValueError) as plain:
    _cli.parse_optimizer(no_lr).plain_optax()
  assert str(plain.value) in err   # the same message
  constant = 'optax.adamw(learning_rate=0.01, b1=0.85, b2=0.99, eps=1e-6, weight_decay=0.01)'
  _assert_bad_input(capsys, tmp_path, ['convert', ADAM_DIR, '--optimizer', no_lr, '--tx',
                                       constant, '--to', 'train-state', '--out',
                                       str(tmp_path / 'out')],
                    'the tx given trains at a constant rate')
  injected = ('optax.inject_hyperparams(optax.adamw)(learning_rate=0.01, b1=0.85, b2=0.99, '
              'eps=1e-6, weight_decay=0.01)')
  for name, optimizer in (('given', ADAM), ('tx', no_lr)):
    code, out, err = _run(capsys, 'convert', ADAM_DIR, '--optimizer', optimizer, '--tx',
                          injected, '--to', 'train-state', '--out', str(tmp_path / name))
    assert code == 0, err
    assert '  probe: ' in out and '1e-6 class' in out
  assert (tmp_path / 'given').read_bytes() == (tmp_path / 'tx').read_bytes()
  with pytest.raises(ValueError, match='has no learning rate'):
    optim.Momentum(beta=0.9).plain_optax()

@pytest.mark.parametrize('optimizer, tx, match', [
    # A leaf both traversals select: the def's own refusal, as one line.
    ("MultiOptimizer((ModelParamTraversal('kernel'), Adam(0.01)), "
     "(ModelParamTraversal('kernel|bias'), Momentum(0.1)))", None,
     'ValueError: Multiple optimizers match the same leaves'),
    # A mask that drops a param the legacy state holds moments for.
    (ADAM, "optax.masked(optax.adamw(0.01), {'conv': {'kernel': True}, "
           "'dense': {'kernel': True, 'bias': False}, 'scale': True})",
     "keeps no 'mu' for '/dense/bias'"),
])
def test_refusals_of_the_def_or_the_tx_are_one_line(capsys, tmp_path, optimizer, tx, match):
  argv = ['convert', ADAM_DIR, '--optimizer', optimizer, '--to', 'train-state',
          '--out', str(tmp_path / 'out')]
  _assert_bad_input(capsys, tmp_path, argv + (['--tx', tx] if tx else []), match)

def test_an_injected_tx_with_other_values_is_told_the_state_keeps_the_files(capsys, tmp_path):
  tx = ('optax.inject_hyperparams(optax.adamw)(learning_rate=0.03, b1=0.85, b2=0.99, eps=1e-6, '
        'weight_decay=0.01)')
  code, out, err = _run(capsys, 'convert', ADAM_DIR, '--optimizer', ADAM, '--tx', tx, '--to',
                        'train-state', '--out', str(tmp_path / 'out'))
  assert code == 0, err
  assert "keep the file's values: learning_rate=0.01 (the tx says 0.03)" in out
  with open(tmp_path / 'out', 'rb') as f:
    hyperparams = serialization.msgpack_restore(f.read())['opt_state']['hyperparams']
  assert float(hyperparams['learning_rate']) == np.float32(0.01)

def test_step_is_for_to_legacy_only(capsys, tmp_path):
  _assert_bad_input(capsys, tmp_path, ['convert', ADAM_DIR, '--optimizer', ADAM, '--to', 'optax',
                                       '--out', str(tmp_path / 'out'), '--step', '5'],
                    '--step applies to --to legacy')

def test_a_legacy_checkpoint_flax_saved_with_orbax_converts_like_its_msgpack_twin(
    capsys, tmp_path):
  """Today's flax saves orbax directories by default (`checkpoints.save_checkpoint`; legacy
  code on this package gets msgpack back unless FLAX_USE_ORBAX_CHECKPOINTING says otherwise):
  converting one gives what converting the same optimizer saved as msgpack gives (that path is
  checked against flax 0.5.3 in test_convert_tx)."""
  import warnings  # pylint: disable=g-import-not-at-top
  import flax  # pylint: disable=g-import-not-at-top
  from flax.training import checkpoints  # pylint: disable=g-import-not-at-top
  with warnings.catch_warnings():
    warnings.simplefilter('ignore', optim.FlaxOptimDeprecationWarning)
    opt_def = optim.Adam(learning_rate=0.01, beta1=0.85, beta2=0.99, eps=1e-6,
                         weight_decay=0.01)
  params = {'dense': {'kernel': jnp.linspace(-1.0, 1.0, 6).reshape(2, 3),
                      'bias': jnp.zeros(3)}}
  optimizer = opt_def.create(params)
  for k in range(3):
    optimizer = optimizer.apply_gradient(
        jax.tree_util.tree_map(lambda p, k=k: jnp.sin(p + k) + 0.1, params))
  was = flax.config.flax_use_orbax_checkpointing
  flax.config.update('flax_use_orbax_checkpointing', True)
  try:
    checkpoints.save_checkpoint(str(tmp_path / 'orbax_run'), optimizer, 3)
  finally:
    flax.config.update('flax_use_orbax_checkpointing', was)
  assert os.path.isdir(tmp_path / 'orbax_run' / 'checkpoint_3')     # orbax: a directory
  (tmp_path / 'msgpack_run').mkdir()
  (tmp_path / 'msgpack_run' / 'checkpoint_3').write_bytes(serialization.to_bytes(optimizer))
  code, out, _ = _run(capsys, 'inspect', str(tmp_path / 'orbax_run'))
  assert code == 0 and out.startswith('Adam, AdaBelief or LAMB at step 3'), out
  outputs = {}
  for run in ('orbax_run', 'msgpack_run'):
    outputs[run] = str(tmp_path / f'{run}.msgpack')
    code, out, err = _run(capsys, 'convert', str(tmp_path / run), '--optimizer', ADAM, '--to',
                          'train-state', '--out', outputs[run])
    assert code == 0, err
  with open(outputs['orbax_run'], 'rb') as a, open(outputs['msgpack_run'], 'rb') as b:
    from_orbax = serialization.msgpack_restore(a.read())
    from_msgpack = serialization.msgpack_restore(b.read())
  jax.tree_util.tree_map(np.testing.assert_array_equal, from_orbax, from_msgpack)
  assert int(from_orbax['step']) == 3


def test_legacy_msgpack_where_converted_checkpoint_expected(capsys, tmp_path):
  err = _assert_bad_input(capsys, tmp_path, ['convert', ADAM_FILE, '--optimizer', ADAM, '--to',
                                             'legacy', '--out', str(tmp_path / 'out')],
                          'is already a legacy checkpoint')
  named = err.split('`convert --to ')[1].split('`')[0].split('|')
  assert named == FORWARD, err


def test_mismatching_optimizer_names_the_family(capsys, tmp_path):
  err = _assert_bad_input(capsys, tmp_path, ['convert', ADAM_DIR, '--optimizer',
                                             'Momentum(learning_rate=0.1)', '--to', 'optax',
                                             '--out', str(tmp_path / 'out')],
                          'looks like it was written by Adam, AdaBelief or LAMB')
  assert 'into Momentum' in err


@pytest.mark.parametrize('text,match', [
    ('Adam(learning_rate=1e-3', 'does not parse'),
    ('Adam(learning_rate=lr)', 'only literal arguments'),
    ('__import__("os").system("true")', 'unknown optimizer'),
    ('os.system("true")', 'unknown optimizer'),
    ('SGD(0.1)', 'unknown optimizer'),
    ('Adam(Momentum(0.1))', 'only WeightNorm takes an optimizer'),
    ('Adam(learning_rate=1e-3, beta=0.9)', "unexpected keyword argument 'beta'"),
    ('Adam(**{"learning_rate": 1})', 'no *args / **kwargs'),
    ('Adam', 'expected a call'),
    ('Adam(1e-3); Momentum(0.1)', 'does not parse'),
])
def test_unparsable_optimizer(capsys, tmp_path, text, match):
  _assert_bad_input(capsys, tmp_path, ['convert', ADAM_DIR, '--optimizer', text, '--to', 'optax',
                                       '--out', str(tmp_path / 'out')], match)


def test_parse_optimizer_nesting():
  opt_def = _cli.parse_optimizer('WeightNorm(Momentum(0.1, beta=0.8), wn_decay=1e-3)')
  assert type(opt_def).__name__ == 'WeightNorm'
  assert type(opt_def.wrapped_optimizer).__name__ == 'Momentum'
  assert opt_def.wrapped_optimizer.hyper_params.beta == 0.8
  assert opt_def.hyper_params.wn_decay == 1e-3
  assert _cli.parse_optimizer('optim.Adam(-1e-3)').hyper_params.learning_rate == -1e-3


def test_existing_output_is_not_touched(capsys, tmp_path):
  out = tmp_path / 'out'
  out.write_bytes(b'precious')
  _assert_bad_input(capsys, tmp_path, ['convert', ADAM_DIR, '--optimizer', ADAM, '--to',
                                       'train-state', '--out', str(out)], 'already exists')
  assert out.read_bytes() == b'precious'


def test_failed_convert_leaves_nothing(capsys, tmp_path):
  """WeightNorm has no optax form: the error comes after reading, before anything is written."""
  wn = os.path.join(LEGACY, 'WeightNorm-Momentum')
  _assert_bad_input(capsys, tmp_path, ['convert', wn, '--optimizer',
                                       'WeightNorm(Momentum(0.05, beta=0.8), wn_decay=1e-3)',
                                       '--to', 'orbax', '--out', str(tmp_path / 'out')],
                    'WeightNorm cannot be converted to optax')


# ----------------------------------------------------------------------------- success


def test_inspect_summary_first(capsys):
  code, out, _ = _run(capsys, 'inspect', os.path.join(LEGACY, 'MultiOptimizer'), '--depth', '2')
  assert code == 0
  lines = out.splitlines()
  assert lines[0].startswith('MultiOptimizer (or create(focus=...)) over (Adam, AdaBelief or '
                             'LAMB) and (Momentum or LARS) with unoptimized (None) leaves at '
                             'step 3, a bare optimizer; 41 params')
  assert '  group Momentum or LARS: /dense/bias' in lines
  # conv/kernel and dense/kernel: Adam's 2 fields (96 + 96 B, 48 + 48 B); dense/bias: momentum
  # (16 B); scale: None.
  assert 'state/' in lines and '  param_states/ ... 6 leaves, 304 B' in lines


def test_inspect_json(capsys):
  code, out, _ = _run(capsys, 'inspect', os.path.join(LEGACY, 'TrainState-Adam'), '--json')
  assert code == 0
  info = json.loads(out)
  assert info['optimizer'] == 'Adam, AdaBelief or LAMB'
  assert info['optimizer_path'] == '/optimizer' and info['container'] == 'train state'
  leaves = {x['path']: x for x in info['leaves']}
  assert leaves['/optimizer/target/dense/kernel'] == {
      'path': '/optimizer/target/dense/kernel', 'shape': [3, 4], 'dtype': 'float32',
      'bytes': 48}


@pytest.mark.parametrize('to', FORWARD)
def test_convert_and_back(capsys, tmp_path, to):
  out = tmp_path / 'converted'
  code, stdout, _ = _run(capsys, 'convert', ADAM_DIR, '--optimizer', ADAM, '--to', to,
                         '--out', str(out))
  assert code == 0 and stdout.startswith(
      f'wrote {out} ({to}, step 3): load it with tx=optax.adamw(learning_rate=0.01, ')
  assert sorted(os.listdir(tmp_path)) == ['converted']
  back = tmp_path / 'back.msgpack'
  code, _, _ = _run(capsys, 'convert', str(out), '--optimizer', ADAM, '--to', 'legacy',
                    '--out', str(back))
  assert code == 0
  with open(ADAM_FILE, 'rb') as f:
    original = serialization.msgpack_restore(f.read())
  restored = serialization.msgpack_restore(back.read_bytes())
  _utils.assert_trees_close(restored, original, rtol=0)


def test_diff_exit_status(capsys, tmp_path):
  code, out, _ = _run(capsys, 'diff', ADAM_DIR, ADAM_FILE)
  assert code == 0 and out.startswith('same (rtol 0): 13 leaves compared')
  with open(ADAM_FILE, 'rb') as f:
    raw = serialization.msgpack_restore(f.read())
  raw['target']['scale'] = raw['target']['scale'] * np.float32(1.5)
  changed = tmp_path / 'changed'
  changed.write_bytes(serialization.msgpack_serialize(raw))
  code, out, _ = _run(capsys, 'diff', ADAM_FILE, str(changed), '--rtol', '1e-5')
  assert code == 1
  assert out.splitlines()[0].startswith('/target/scale  max abs ')
  assert out.splitlines()[-1].startswith('different (rtol 1e-05)')
  code, _, _ = _run(capsys, 'diff', ADAM_FILE, str(changed), '--rtol', '0.5')
  assert code == 0


def test_diff_legacy_against_converted(capsys, tmp_path, orbax_dir):
  code, out, _ = _run(capsys, 'diff', ADAM_DIR, orbax_dir)
  assert code == 1 and 'only in A: /target/scale' in out
  code, out, _ = _run(capsys, 'diff', ADAM_DIR, orbax_dir, '--optimizer', ADAM)
  assert code == 0, out


def test_demo(capsys):
  code, out, _ = _run(capsys, 'demo', '--steps', '3')
  assert code == 0
  rows = [line.split() for line in out.splitlines()
          if len(line.split()) == 3 and line.split()[0].isdigit()]
  assert [int(r[0]) for r in rows] == [4, 5, 6]
  for _, legacy, optax_loss in rows:  # legacy in one process, plain optax in another
    assert float(legacy) == pytest.approx(float(optax_loss), rel=1e-5)
  assert 'Adam, AdaBelief or LAMB at step 3, a train state (optimizer at /optimizer)' in out
  assert 'load it with tx=optax.adamw(learning_rate=0.03, ' in out
  assert 'note: carried beside the train state: model_state' in out


def test_module_and_help():
  done = subprocess.run([sys.executable, '-m', 'flax_optim_compat', '--help'],
                        capture_output=True, text=True, check=False)
  assert done.returncode == 0, done.stderr
  assert 'inspect' in done.stdout and 'exit status: 0 ok' in done.stdout
  done = subprocess.run([sys.executable, '-m', 'flax_optim_compat', 'inspect'],
                        capture_output=True, text=True, check=False)
  assert done.returncode == 2 and 'Traceback' not in done.stderr


def test_console_script_entry_point():
  import configparser
  config = configparser.ConfigParser()
  config.read(os.path.join(os.path.dirname(_utils.FIXTURES), '..', 'setup.cfg'))
  scripts = config['options.entry_points']['console_scripts']
  assert 'flax-optim-compat = flax_optim_compat._cli._main:main' in scripts


def test_convert_back_needs_a_step_when_the_optax_state_has_none(capsys, tmp_path):
  momentum_dir = os.path.join(LEGACY, 'Momentum')
  spec = 'Momentum(learning_rate=0.05, beta=0.8, weight_decay=0.01, nesterov=True)'
  with open(os.path.join(momentum_dir, 'checkpoint_3'), 'rb') as f:
    original = serialization.msgpack_restore(f.read())
  out = tmp_path / 'optax.msgpack'
  assert _run(capsys, 'convert', momentum_dir, '--optimizer', spec, '--to', 'optax',
              '--out', str(out))[0] == 0
  # --to optax keeps the step (Momentum's optax state has no count): back without --step.
  assert int(serialization.msgpack_restore(out.read_bytes())['step']) == 3
  assert _run(capsys, 'convert', str(out), '--optimizer', spec, '--to', 'legacy', '--out',
              str(tmp_path / 'kept'))[0] == 0
  _utils.assert_trees_close(serialization.msgpack_restore((tmp_path / 'kept').read_bytes()),
                            original, rtol=0)
  # A {params, opt_state} without a step (written by hand) needs --step.
  stepless = tmp_path / 'stepless.msgpack'
  raw = serialization.msgpack_restore(out.read_bytes())
  stepless.write_bytes(serialization.msgpack_serialize({k: v for k, v in raw.items()
                                                        if k != 'step'}))
  argv = ['convert', str(stepless), '--optimizer', spec, '--to', 'legacy',
          '--out', str(tmp_path / 'back')]
  _assert_bad_input(capsys, tmp_path, argv, 'has no `count`')
  assert _run(capsys, *argv, '--step', '3')[0] == 0
  _utils.assert_trees_close(serialization.msgpack_restore((tmp_path / 'back').read_bytes()),
                            original, rtol=0)
