"""Seeded fuzzing of the checkpoint tool over the committed legacy fixtures: random byte flips,
truncations, records of the wrong schema and values of the wrong kind, through every API
function and (a handful) the command line. Never a traceback (only ``CheckpointError``), never
a write, never a hang."""
import io
import os
import signal
import subprocess
import sys

import pytest
from flax import serialization

from flax_optim_compat._cli import _main as _cli
from flax_optim_compat._checkpoint import _codec
from flax_optim_compat import convert
from tests import _hostile
from tests import _utils

pytestmark = pytest.mark.filterwarnings('ignore::flax_optim_compat.FlaxOptimDeprecationWarning')

EXPECTED = _utils.load_fixture('convert', 'expected.msgpack')
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEED = 20231
CASES = 240           # legacy files x (load, inspect, to_optax, diff, diff --optimizer)
CONVERTED_CASES = 80  # converted files x (load_converted, to_legacy)
CASE_SECONDS = 60     # a case that takes longer hangs


_legacy_file = _utils.legacy_checkpoint


@pytest.fixture(scope='module')
def legacy():
  """``{name: (bytes, tree)}`` of the legacy fixtures with a known optimizer, and their defs."""
  fixtures, defs = {}, {}
  for name in sorted(EXPECTED):
    with open(_legacy_file(name), 'rb') as f:
      data = f.read()
    fixtures[name] = data, serialization.msgpack_restore(data)
    defs[name] = _cli.parse_optimizer(EXPECTED[name]['cli'])
  return fixtures, defs


@pytest.fixture(scope='module')
def converted(legacy):
  """The ``--to optax`` / ``--to train-state`` bytes of a few fixtures."""
  fixtures, defs = legacy
  out = {}
  for name, layout in (('Adam', 'train-state'), ('Momentum', 'optax'), ('Adafactor', 'optax'),
                       ('TrainState-Adam', 'train-state')):
    state = convert.to_train_state(fixtures[name][0], defs[name])
    tree = (serialization.to_state_dict(state) if layout == 'train-state' else
            serialization.to_state_dict({'params': state.params, 'opt_state': state.opt_state}))
    f = io.BytesIO()
    _codec.encode(f, tree)
    out[name] = f.getvalue(), serialization.msgpack_restore(f.getvalue())
  return out, defs


@pytest.fixture
def deadline():
  """Fails a case that runs longer than CASE_SECONDS (a hang) instead of blocking the suite."""
  def hung(signum, frame):
    raise AssertionError(f'a case ran longer than {CASE_SECONDS} s')
  previous = signal.signal(signal.SIGALRM, hung)
  yield lambda: signal.alarm(CASE_SECONDS)
  signal.alarm(0)
  signal.signal(signal.SIGALRM, previous)


def _only_checkpoint_errors(call, description):
  try:
    call()
  except convert.CheckpointError as e:
    assert '\n' not in str(e), (description, str(e))


def test_hostile_legacy_files_through_the_api(legacy, deadline, tmp_path, monkeypatch):
  fixtures, defs = legacy
  monkeypatch.chdir(tmp_path)  # anything written by accident lands here
  for description, name, data in _hostile.mutations(fixtures, SEED, CASES):
    deadline()
    original, opt_def = fixtures[name][0], defs[name]
    calls = [
        lambda: convert.load(data),
        lambda: _describe(convert.inspect(data)),
        lambda: convert.to_optax(data, opt_def),
        lambda: convert.diff(data, original).same(),
        lambda: convert.diff(original, data, opt_def).same(),
    ]
    for call in calls:
      _only_checkpoint_errors(call, description)
  assert os.listdir(tmp_path) == []


def _describe(info):
  info.summary()
  info.tree()
  info.tree(2)
  info.as_dict()


def test_hostile_converted_files_back_to_legacy(converted, deadline, tmp_path):
  fixtures, defs = converted

  def back(data, opt_def, path):
    params, opt_state, step = convert.load_converted(data, opt_def)
    convert.to_legacy(params, opt_state, opt_def, step=3 if step is None else step, path=path)

  for i, (description, name, data) in enumerate(
      _hostile.mutations(fixtures, SEED, CONVERTED_CASES)):
    deadline()
    path = tmp_path / f'legacy-{i}'
    try:
      back(data, defs[name], path)
    except convert.CheckpointError as e:
      assert '\n' not in str(e), (description, str(e))
      assert not path.exists()
  assert all(n.startswith('legacy-') for n in os.listdir(tmp_path))


def test_hostile_files_never_write_an_output(legacy, deadline, tmp_path):
  """Files that cannot be converted leave the output folder as it was, for every writer."""
  fixtures, defs = legacy
  refused = 0
  for i, (description, name, data) in enumerate(_hostile.mutations(fixtures, SEED + 1, 24)):
    deadline()
    opt_def = defs[name]
    for to in ('orbax', 'optax'):
      out = tmp_path / f'{to}-{i}'
      try:
        if to == 'orbax':
          convert.to_orbax(data, opt_def, out)
        else:
          state = convert.to_train_state(data, opt_def)
          convert.write_msgpack(out, serialization.to_state_dict(state))
      except convert.CheckpointError:
        refused += 1
        assert not out.exists(), description
      names = os.listdir(tmp_path)
      assert not [n for n in names if n.startswith('.')], (description, names)  # no temp
  assert refused  # the mutations reach the writers' error paths


def test_hostile_files_through_the_command_line(legacy, tmp_path):
  """A handful of mutated files through the installed command line: exit 0, 1 or 2, at most
  one line on stderr, never a traceback; with exit 2 nothing is written."""
  fixtures, defs = legacy
  cases = list(_hostile.mutations(fixtures, SEED + 2, 8))
  commands = []
  for i, (description, name, data) in enumerate(cases[:3]):
    path = tmp_path / f'case-{i}'
    path.write_bytes(data)
    cli = EXPECTED[name]['cli']
    argv = (['inspect', str(path)],
            ['convert', str(path), '--optimizer', cli, '--to', 'orbax', '--out',
             str(tmp_path / f'out-{i}')],
            ['diff', str(path), _legacy_file(name), '--optimizer', cli])[i]
    commands.append((description, argv, tmp_path / f'out-{i}'))
  env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get('PYTHONPATH', ''),
             JAX_PLATFORMS='cpu')
  for description, argv, out in commands:
    done = subprocess.run([sys.executable, '-m', 'flax_optim_compat'] + argv,
                          capture_output=True, text=True, env=env, timeout=300, check=False)
    assert done.returncode in (0, 1, 2), (description, done.stderr)
    assert 'Traceback' not in done.stderr and done.stderr.count('\n') <= 1, (description,
                                                                             done.stderr)
    if done.returncode == 2:
      assert not out.exists()
  assert not [n for n in os.listdir(tmp_path) if n.startswith('.')]
