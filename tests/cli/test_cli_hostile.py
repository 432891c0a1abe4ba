"""Hostile and odd inputs to every command: one line on stderr and exit 2 for what cannot be
used (nothing written), the right answer for what can (NaN and inf, int widths, odd steps)."""
import json
import os
import subprocess
import sys

import msgpack
import numpy as np
import pytest
from flax import serialization

import flax_optim_compat as optim
from flax_optim_compat._cli import _main as _cli
from flax_optim_compat import convert
from tests import _hostile
from tests import _utils

pytestmark = pytest.mark.filterwarnings('ignore::flax_optim_compat.FlaxOptimDeprecationWarning')

LEGACY = _utils.LEGACY_CHECKPOINTS
ADAM_FILE = os.path.join(LEGACY, 'Adam', 'checkpoint_3')
ADAM = 'Adam(learning_rate=0.01, beta1=0.85, beta2=0.99, eps=1e-6, weight_decay=0.01)'
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


_run = _utils.run_cli


def _refused(capsys, tmp_path, argv, match):
  """Exit 2, one stderr line holding ``match``, nothing new in ``tmp_path``."""
  before = sorted(os.listdir(tmp_path))
  code, _, err = _run(capsys, *argv)
  assert code == 2, err
  assert err.count('\n') == 1 and 'Traceback' not in err, err
  assert err.startswith(f'flax-optim-compat {argv[0]}: error: '), err
  assert match in err, err
  assert sorted(os.listdir(tmp_path)) == before
  return err


def _adam_tree():
  with open(ADAM_FILE, 'rb') as f:
    return serialization.msgpack_restore(f.read())


def _write(tmp_path, name, tree):
  path = tmp_path / name
  path.write_bytes(_hostile.pack(tree))
  return str(path)


def _with(tree, path, value):
  return _hostile._replace(tree, tuple(path.strip('/').split('/')), value)  # pylint: disable=protected-access


# ----------------------------------------------------------------------------- records


@pytest.mark.parametrize('what', ['shape a string', 'shape a float', 'shape negative',
                                  'shape overflowing', 'dtype object', 'timestamp ext',
                                  'complex of one', 'chunked without chunks',
                                  'chunked too few elements'])
def test_bad_array_records_are_one_line_in_every_command(capsys, tmp_path, what):
  bad = _write(tmp_path, 'checkpoint_3', _with(_adam_tree(), '/target/dense/kernel',
                                               _hostile.BAD_RECORDS[what]))
  match = "at /target/dense/kernel (byte offset "
  _refused(capsys, tmp_path, ['inspect', bad], match)
  _refused(capsys, tmp_path, ['convert', bad, '--optimizer', ADAM, '--to', 'orbax', '--out',
                              str(tmp_path / 'out')], match)
  _refused(capsys, tmp_path, ['diff', bad, ADAM_FILE], match)
  with pytest.raises(convert.CheckpointError, match=r'at /target/dense/kernel \(byte offset'):
    convert.to_optax(bad, _cli.parse_optimizer(ADAM))


def test_datetime_and_string_params_and_colliding_keys_never_reach_jax(capsys, tmp_path):
  tree = _adam_tree()
  moments = _write(tmp_path, 'moments', _with(tree, '/target/dense/bias',
                                              np.array(['2024-01-01'], 'datetime64[D]')
                                              .view(np.int64).view('datetime64[D]')))
  text = _write(tmp_path, 'text', _with(tree, '/target/dense/bias', 'fast'))
  keys = dict(tree)
  keys['target'] = {7: np.zeros(1, np.float32), '7': np.zeros(1, np.float32)}
  colliding = _write(tmp_path, 'colliding', keys)
  for path, match in ((moments, "dtype 'datetime64[D]', not a numeric or bool dtype"),
                      (text, 'the leaf at /target/dense/bias is a str, not a number'),
                      (colliding, "the map keys 7 and '7' name the same path")):
    _refused(capsys, tmp_path, ['convert', path, '--optimizer', ADAM, '--to', 'optax', '--out',
                                str(tmp_path / 'out')], match)
  with pytest.raises(convert.CheckpointError, match='unique string representation'):
    convert.to_optax(keys, _cli.parse_optimizer(ADAM))


# ----------------------------------------------------------------------------- inspect


@pytest.mark.parametrize('step,shown', [(np.float32('nan'), 'float32[] holding nan'),
                                        (float('inf'), 'float inf'),
                                        ('3', "str '3'")])
def test_inspect_reports_a_step_that_is_not_an_integer(capsys, tmp_path, step, shown):
  path = _write(tmp_path, 'checkpoint_3', _with(_adam_tree(), '/state/step', step))
  code, out, _ = _run(capsys, 'inspect', path)
  assert code == 0
  assert ' at step None, ' in out.splitlines()[0]
  assert f'  note: the step is {shown}, not an integer' in out.splitlines()


def test_inspect_depth(capsys):
  # 41 float32 params (3x4 + 4 + 2x2x3x2 + 1): 164 B; Adam's two states: 328 B; the step 4 B.
  code, out, _ = _run(capsys, 'inspect', ADAM_FILE, '--depth', '0')
  assert code == 0 and out.splitlines()[-1] == '/ ... 13 leaves, 496 B'
  code, out, _ = _run(capsys, 'inspect', ADAM_FILE, '--depth', '1')
  assert out.splitlines()[-2:] == ['state/ ... 9 leaves, 332 B', 'target/ ... 4 leaves, 164 B']
  for bad in ('-5', 'two'):
    assert _cli.main(['inspect', ADAM_FILE, '--depth', bad]) == 2
    err = capsys.readouterr().err
    assert err == ("flax-optim-compat inspect: error: argument --depth: expected a non-negative "
                   f"integer, not '{bad}'\n")
  with pytest.raises(ValueError, match='depth must be None or a non-negative int'):
    convert.inspect(ADAM_FILE).tree(-1)


def test_inspect_names_the_file_it_read(capsys):
  code, out, _ = _run(capsys, 'inspect', os.path.dirname(ADAM_FILE))
  assert code == 0 and f'  read: {ADAM_FILE}' in out.splitlines()
  code, out, _ = _run(capsys, 'inspect', os.path.dirname(ADAM_FILE), '--json')
  assert json.loads(out)['source'] == ADAM_FILE  # the path, not its repr


# ----------------------------------------------------------------------------- diff


def test_diff_nan_and_inf_equal_themselves(capsys, tmp_path):
  tree = _adam_tree()
  tree = _with(tree, '/target/dense/bias', np.array([np.inf, -np.inf, np.nan, 1.0], np.float32))
  path = _write(tmp_path, 'x', tree)
  code, out, _ = _run(capsys, 'diff', path, path)
  assert code == 0 and out.startswith('same (rtol 0): 13 leaves compared, max abs 0'), out
  other = _write(tmp_path, 'y', _with(tree, '/target/dense/bias',
                                      np.array([np.inf, np.inf, np.nan, 1.0], np.float32)))
  code, out, _ = _run(capsys, 'diff', path, other)
  assert code == 1 and '/target/dense/bias  max abs inf  max rel inf' in out.splitlines()
  nan_moved = _write(tmp_path, 'z', _with(tree, '/target/dense/bias',
                                          np.array([np.inf, -np.inf, 1.0, np.nan], np.float32)))
  code, out, _ = _run(capsys, 'diff', path, nan_moved, '--rtol', '1e9')
  assert code == 1


def test_diff_compares_other_leaves_by_value(capsys, tmp_path):
  a = _write(tmp_path, 'a', {'name': 'run-1', 'blob': b'\x00', 'w': np.ones(2, np.float32)})
  b = _write(tmp_path, 'b', {'name': 'run-2', 'blob': b'\x00', 'w': np.ones(2, np.float32)})
  code, out, _ = _run(capsys, 'diff', a, a)
  assert code == 0 and out.startswith('same (rtol 0): 3 leaves compared')
  code, out, _ = _run(capsys, 'diff', a, b)
  assert code == 1 and "/name  'run-1' vs 'run-2'" in out.splitlines()


def test_diff_compares_steps_as_integers(capsys, tmp_path):
  tree = _adam_tree()
  narrow = _write(tmp_path, 'narrow', _with(tree, '/state/step', np.int32(3)))
  wide = _write(tmp_path, 'wide', _with(tree, '/state/step', np.int64(3)))
  python = _write(tmp_path, 'python', _with(tree, '/state/step', 3))
  later = _write(tmp_path, 'later', _with(tree, '/state/step', np.int64(92)))
  for other in (wide, python):
    code, out, _ = _run(capsys, 'diff', narrow, other)
    assert code == 0, out
  code, out, _ = _run(capsys, 'diff', narrow, later, '--rtol', '100')
  assert code == 1 and '/state/step  3 vs 92' in out.splitlines()
  assert ', 1 exact differences, 0 structural differences' in out


@pytest.mark.parametrize('to', _utils.forward_formats())
def test_diff_of_a_legacy_file_and_its_conversion_is_same(capsys, tmp_path, to):
  out = str(tmp_path / 'converted')
  assert _run(capsys, 'convert', ADAM_FILE, '--optimizer', ADAM, '--to', to, '--out', out)[0] == 0
  code, text, _ = _run(capsys, 'diff', ADAM_FILE, out, '--optimizer', ADAM)
  assert code == 0 and text.startswith('same (rtol 0)'), text
  code, text, _ = _run(capsys, 'diff', out, ADAM_FILE, '--optimizer', ADAM)
  assert code == 0, text


@pytest.mark.parametrize('flag,value', [('--rtol', '-1'), ('--rtol', 'nan'), ('--atol', 'inf'),
                                        ('--atol', '-0.5'), ('--rtol', 'x')])
def test_diff_tolerances_are_validated(capsys, flag, value):
  assert _cli.main(['diff', ADAM_FILE, ADAM_FILE, flag, value]) == 2
  err = capsys.readouterr().err
  assert err == (f'flax-optim-compat diff: error: argument {flag}: expected a finite '
                 f"non-negative number, not '{value}'\n")


def test_diff_atol(capsys, tmp_path):
  a = _write(tmp_path, 'a', {'w': np.array([0.0, 1.0], np.float32)})
  b = _write(tmp_path, 'b', {'w': np.array([1e-3, 1.0], np.float32)})
  assert _run(capsys, 'diff', a, b)[0] == 1
  assert _run(capsys, 'diff', a, b, '--atol', '1e-2')[0] == 0
  assert _run(capsys, 'diff', a, b, '--rtol', '1e-2')[0] == 0  # 1e-3 / 1.0


def test_diff_non_numeric_leaves_are_structural_not_a_crash(capsys, tmp_path):
  a = _write(tmp_path, 'a', {'w': np.ones(2, np.float32)})
  b = _write(tmp_path, 'b', {'w': 'ones'})
  code, out, _ = _run(capsys, 'diff', a, b)
  assert code == 1 and 'different kind: /w: float32[2] vs a str' in out.splitlines()


def test_diff_into_a_closed_pipe_is_quiet(tmp_path):
  # Enough lines that the reader goes away while diff is still writing.
  path = _write(tmp_path, 'many', {f'leaf{i:05d}': np.float32(i) for i in range(20000)})
  env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get('PYTHONPATH', ''),
             JAX_PLATFORMS='cpu')
  process = subprocess.Popen([sys.executable, '-m', 'flax_optim_compat', 'diff', path, path,
                              '--all'], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
  first = process.stdout.readline()
  process.stdout.close()
  code = process.wait(timeout=300)
  err = process.stderr.read()
  process.stderr.close()
  assert first.startswith(b'/leaf00000  max abs 0')
  assert (code, err) == (141, b'')


# ----------------------------------------------------------------------------- to_legacy


def test_nan_state_converts_back_to_legacy(tmp_path):
  opt_def = optim.Adam(0.1)
  params = {'w': np.array([1.0, 2.0], np.float32)}
  legacy = opt_def.create(params).apply_gradient({'w': np.array([np.nan, 1.0], np.float32)})
  # The probe never counts NaN as equal: it cannot vouch for this state, and says so ...
  with pytest.raises(convert.ProbeError, match='cannot check: legacy gives NaN'):
    convert.to_train_state(serialization.to_bytes(legacy), opt_def)
  # ... and converts it when the user accepts that.
  state = convert.to_train_state(serialization.to_bytes(legacy), opt_def, accept_difference=True)
  back = convert.to_legacy(state.params, state.opt_state, opt_def, path=tmp_path / 'back')
  restored = serialization.from_bytes(opt_def.create(params), (tmp_path / 'back').read_bytes())
  np.testing.assert_array_equal(restored.state.param_states['w'].grad_ema,
                                legacy.state.param_states['w'].grad_ema)  # NaN where NaN
  assert np.isnan(np.asarray(back['state']['param_states']['w']['grad_ema'])[0])


@pytest.mark.parametrize('step,match', [(2 ** 40, r'the step 1099511627776 is not in'),
                                        (-1, r'the step -1 is not in'),
                                        (1.5, 'the step must be an integer')])
def test_to_legacy_step_checked(step, match):
  opt_def = optim.Momentum(0.1)
  params = {'w': np.ones(2, np.float32)}
  tx = opt_def.optax_transform()
  with pytest.raises(convert.CheckpointError, match=match):
    convert.to_legacy(params, tx.init(params), opt_def, step=step)


def test_to_legacy_of_a_converted_file_with_a_wrong_opt_state(capsys, tmp_path):
  out = str(tmp_path / 'converted')
  assert _run(capsys, 'convert', ADAM_FILE, '--optimizer', ADAM, '--to', 'optax', '--out',
              out)[0] == 0
  tree = convert.load(out)
  bad = _write(tmp_path, 'bad', _with(tree, '/opt_state/0/mu', 'zero'))
  _refused(capsys, tmp_path, ['convert', bad, '--optimizer', ADAM, '--to', 'legacy', '--out',
                              str(tmp_path / 'legacy')],
           'the leaf at /opt_state/0/mu is a str, not a number')


def test_unknown_msgpack_extension_is_refused_with_its_code(capsys, tmp_path):
  path = tmp_path / 'checkpoint_1'
  path.write_bytes(msgpack.packb({'step': msgpack.Timestamp(1, 0)}, use_bin_type=True))
  _refused(capsys, tmp_path, ['inspect', str(path)],
           'a msgpack extension record of code -1, not one flax writes')
