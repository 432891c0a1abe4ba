"""With ``--json`` every outcome is one JSON object on stdout, failures included:
``{"error": "<the line stderr would have had>", "code": <the exit status>}``, stderr empty."""
import json
import os

import pytest

from flax_optim_compat._cli import _main as _cli
from flax_optim_compat import convert
from flax_optim_compat._checkpoint import _outputs
from tests import _utils

pytestmark = pytest.mark.filterwarnings('ignore::flax_optim_compat.FlaxOptimDeprecationWarning')

ADAM_FILE = os.path.join(_utils.LEGACY_CHECKPOINTS, 'Adam', 'checkpoint_3')
ADAM = 'Adam(learning_rate=0.01, beta1=0.85, beta2=0.99, eps=1e-6, weight_decay=0.01)'


def _json_failure(capsys, *argv, code=2):
  """The ``error`` text of a run of ``argv`` that fails with ``code`` as one JSON object."""
  got = _cli.main(list(argv))
  out, err = capsys.readouterr()
  assert got == code, (got, out, err)
  assert err == '', err
  answer = json.loads(out)
  assert set(answer) == {'error', 'code'} and answer['code'] == code, answer
  assert '\n' not in answer['error'], answer
  return answer['error']


def _text_failure(capsys, *argv):
  """The stderr line of the same run without ``--json``."""
  assert _cli.main([a for a in argv if a != '--json']) == 2
  out, err = capsys.readouterr()
  assert out == '' and err.count('\n') == 1, (out, err)
  return err


# One failure of each kind per subcommand that has --json: a file that is not there, a bad
# expression, an argument argparse refuses, a flag combination the command refuses.
CASES = {
    'inspect missing file': ['inspect', 'no/such/checkpoint', '--json'],
    'inspect bad --depth': ['inspect', ADAM_FILE, '--depth', 'two', '--json'],
    'inspect unknown flag': ['inspect', ADAM_FILE, '--json', '--deep'],
    'convert missing file': ['convert', 'no/such/checkpoint', '--optimizer', ADAM, '--to',
                             'optax', '--out', 'OUT', '--json'],
    'convert bad optimizer': ['convert', ADAM_FILE, '--optimizer', 'Adam(learning_rate=)',
                              '--to', 'optax', '--out', 'OUT', '--json'],
    'convert refused flags': ['convert', ADAM_FILE, '--optimizer', ADAM, '--to', 'optax',
                              '--step', '3', '--out', 'OUT', '--json'],
    'convert no --to': ['convert', ADAM_FILE, '--optimizer', ADAM, '--out', 'OUT', '--json'],
    'diff missing file': ['diff', ADAM_FILE, 'no/such/checkpoint', '--json'],
    'diff --tx alone': ['diff', ADAM_FILE, ADAM_FILE, '--tx', 'optax.adam(0.1)', '--json'],
    'diff bad --rtol': ['diff', ADAM_FILE, ADAM_FILE, '--rtol', 'nan', '--json'],
}


@pytest.mark.parametrize('case', sorted(CASES))
def test_every_failure_with_json_is_json_on_stdout(capsys, tmp_path, monkeypatch, case):
  monkeypatch.chdir(tmp_path)
  argv = CASES[case]
  error = _json_failure(capsys, *argv)
  # The same words as the text line (which adds the program and command in front).
  line = _text_failure(capsys, *argv)
  assert line.rstrip('\n').endswith(f'error: {error}'), (line, error)
  assert os.listdir(tmp_path) == []


def test_a_usage_error_before_the_command_is_json_too(capsys):
  error = _json_failure(capsys, 'convert', '--json')
  assert 'required' in error, error


@pytest.mark.parametrize('command', ['inspect', 'convert', 'diff'])
def test_interrupted_with_json_is_json(capsys, tmp_path, monkeypatch, command):
  def interrupted(*args, **kwargs):
    raise KeyboardInterrupt
  name = {'inspect': 'inspect', 'convert': 'convert_checkpoint', 'diff': 'diff'}[command]
  monkeypatch.setattr(convert, name, interrupted)
  argv = {'inspect': ['inspect', ADAM_FILE],
          'convert': ['convert', ADAM_FILE, '--optimizer', ADAM, '--to', 'optax', '--out',
                      str(tmp_path / 'out')],
          'diff': ['diff', ADAM_FILE, ADAM_FILE]}[command]
  assert _json_failure(capsys, *argv, '--json', code=130) == 'interrupted'
  assert _cli.main(argv) == 130
  assert capsys.readouterr().err == f'flax-optim-compat {command}: interrupted\n'


def test_a_failed_write_with_json_is_json(capsys, tmp_path, monkeypatch):
  def refused(*args, **kwargs):
    raise PermissionError(13, 'Permission denied', str(tmp_path / 'out'))
  monkeypatch.setattr(_outputs, 'write_file', refused)  # what every msgpack format writes with
  error = _json_failure(capsys, 'convert', ADAM_FILE, '--optimizer', ADAM, '--to', 'optax',
                        '--out', str(tmp_path / 'out'), '--json')
  assert error == f'Permission denied: {tmp_path / "out"}', error


def test_json_after_a_double_dash_is_a_path_not_the_flag(capsys):
  """``inspect -- --json``: a file named --json; the answer is text."""
  assert _cli.main(['inspect', '--', '--json']) == 2
  out, err = capsys.readouterr()
  assert out == '' and "'--json'" in err, (out, err)
