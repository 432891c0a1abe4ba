"""Help and hints that point somewhere: every argument has help text, diff says what makes a
legacy file and a converted one comparable, and the pip command for the migrate extra is the
one that works for the installation at hand (a clone, an editable install, an index, a VCS)."""
import argparse
import json
import os
import shlex

import pytest

import flax_optim_compat as optim
from flax_optim_compat import _deprecation
from flax_optim_compat._cli import _install
from flax_optim_compat._cli import _main as _cli
from tests import _utils

pytestmark = pytest.mark.filterwarnings('ignore::flax_optim_compat.FlaxOptimDeprecationWarning')

ADAM_FILE = os.path.join(_utils.LEGACY_CHECKPOINTS, 'Adam', 'checkpoint_3')
ADAM = 'Adam(learning_rate=0.01, beta1=0.85, beta2=0.99, eps=1e-6, weight_decay=0.01)'


def _parsers(parser, name='flax-optim-compat'):
  """``[(name, parser), ...]``: the program's parser and every subcommand's, recursively."""
  found = [(name, parser)]
  for action in parser._actions:  # pylint: disable=protected-access
    if isinstance(action, argparse._SubParsersAction):  # pylint: disable=protected-access
      for sub_name, sub in action.choices.items():
        found += _parsers(sub, f'{name} {sub_name}')
  return found


def test_every_argument_of_every_command_has_help():
  parsers = _parsers(_cli._parser())  # pylint: disable=protected-access
  assert {name for name, _ in parsers} >= {f'flax-optim-compat {c}' for c in (
      'inspect', 'convert', 'diff', 'demo', 'migrate')}
  for name, parser in parsers:
    for action in parser._actions:  # pylint: disable=protected-access
      if isinstance(action, argparse._SubParsersAction):  # pylint: disable=protected-access
        assert all(choice.help for choice in action._choices_actions), name  # pylint: disable=protected-access
        continue
      what = action.option_strings or [action.dest]
      assert action.help and action.help.strip(), f'{name} {what[0]} has no help text'


def test_inspect_help_names_orbax_folders(capsys):
  with pytest.raises(SystemExit):
    _cli.main(['inspect', '--help'])
  assert 'orbax' in capsys.readouterr().out


# ----------------------------------------------------------------------------- diff's hint


@pytest.fixture(scope='module')
def converted(tmp_path_factory):
  out = tmp_path_factory.mktemp('converted') / 'state.msgpack'
  assert _cli.main(['convert', ADAM_FILE, '--optimizer', ADAM, '--to', 'optax', '--quiet',
                    '--out', str(out)]) == 0
  return str(out)


@pytest.mark.parametrize('legacy_side', ['A', 'B'])
def test_diff_of_legacy_and_converted_says_to_pass_optimizer(capsys, converted, legacy_side):
  a, b = (ADAM_FILE, converted) if legacy_side == 'A' else (converted, ADAM_FILE)
  code, out, _ = _utils.run_cli(capsys, 'diff', a, b)
  assert code == 1
  hint = out.splitlines()[-1]
  other = 'B' if legacy_side == 'A' else 'A'
  assert hint.startswith(f'  hint: {legacy_side} is a legacy checkpoint and {other} a converted '
                         'one'), out
  assert '--optimizer' in hint and f'inspect {shlex.quote(ADAM_FILE)}' in hint, hint
  # What the hint says works: the same diff with --optimizer agrees, and says no more.
  code, out, _ = _utils.run_cli(capsys, 'diff', a, b, '--optimizer', ADAM)
  assert code == 0 and 'hint' not in out, out
  code, out, _ = _utils.run_cli(capsys, 'diff', a, b, '--json')
  answer = json.loads(out)
  assert code == 1 and '--optimizer' in answer['hint'], answer
  assert answer['layouts'] == (['legacy', 'converted'] if legacy_side == 'A' else
                               ['converted', 'legacy'])


def test_diff_of_two_different_legacy_files_gives_no_layout_hint(capsys, tmp_path):
  code, out, _ = _utils.run_cli(capsys, 'diff', ADAM_FILE,
                                os.path.join(_utils.LEGACY_CHECKPOINTS, 'Momentum', 'checkpoint_3'))
  assert code == 1 and 'hint' not in out, out


# ----------------------------------------------------------------------------- install hints

PY = '/env/bin/python'


def _command(installed, direct_url, cwd='/home/me'):
  return _install.command_for(installed, direct_url, 'migrate', source='/src/clone', cwd=cwd,
                              python=PY)


@pytest.mark.parametrize('installed,direct_url,cwd,expected', [
    # pip install from an index: no direct_url.json
    (True, None, '/home/me', f"{PY} -m pip install 'flax_optim_compat[migrate]'"),
    # pip install -e . from a clone (PEP 610 dir_info), asked from elsewhere, then from it
    (True, {'url': 'file:///src/clone', 'dir_info': {'editable': True}}, '/home/me',
     f"{PY} -m pip install -e '/src/clone[migrate]'"),
    (True, {'url': 'file:///src/clone', 'dir_info': {'editable': True}}, '/src/clone',
     f"{PY} -m pip install -e '.[migrate]'"),
    (True, {'url': 'file:///src/my%20clone', 'dir_info': {}}, '/home/me',
     f"{PY} -m pip install '/src/my clone[migrate]'"),
    # a wheel built from the clone
    (True, {'url': 'file:///tmp/flax_optim_compat-0.1.0-py3-none-any.whl',
            'archive_info': {}}, '/home/me',
     f"{PY} -m pip install '/tmp/flax_optim_compat-0.1.0-py3-none-any.whl[migrate]'"),
    # pip install git+https://...
    (True, {'url': 'https://example.org/repo.git', 'vcs_info': {'vcs': 'git'}}, '/home/me',
     f"{PY} -m pip install 'flax_optim_compat[migrate] @ git+https://example.org/repo.git'"),
    # not installed: a clone on sys.path (PYTHONPATH)
    (False, None, '/src/clone', f"{PY} -m pip install '.[migrate]'"),
    (False, None, '/home/me', f"{PY} -m pip install '/src/clone[migrate]'"),
])
def test_the_pip_command_fits_the_installation(installed, direct_url, cwd, expected):
  assert _command(installed, direct_url, cwd) == expected


def test_this_installation_gets_a_command_naming_its_own_python():
  command = _install.pip_command('migrate')
  assert command.startswith(f'{shlex.quote(_install.sys.executable)} -m pip install ')
  assert command.endswith("[migrate]'"), command


def test_the_deprecation_warning_names_migrate_and_convert():
  with pytest.warns(optim.FlaxOptimDeprecationWarning) as caught:
    optim.Adam(0.1)
  text = str(caught[0].message)
  assert text.startswith('Use `optax` instead of `flax.optim`.')  # legacy's text first
  assert '`flax-optim-compat migrate PATH`' in text and '`flax-optim-compat convert`' in text
  assert text == _deprecation.USE_OPTAX
