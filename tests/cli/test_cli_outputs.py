"""Checkpoint outputs are all or nothing and exclusive: a race, Ctrl-C or a full disk at any
point of any ``--to`` leaves either the complete output or nothing (no temporary file or
directory), and says so in one line."""
import errno
import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from flax import serialization

import flax_optim_compat as optim
from flax_optim_compat._cli import _main as _cli
from flax_optim_compat._checkpoint import _codec
from flax_optim_compat._checkpoint import _outputs
from flax_optim_compat import convert
from tests import _utils

pytestmark = pytest.mark.filterwarnings('ignore::flax_optim_compat.FlaxOptimDeprecationWarning')

ADAM_FILE = os.path.join(_utils.FIXTURES, 'checkpoints', 'legacy', 'Adam', 'checkpoint_3')
ADAM = 'Adam(learning_rate=0.01, beta1=0.85, beta2=0.99, eps=1e-6, weight_decay=0.01)'
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _random_adam_bytes(n_leaves, size, seed=0):
  """A legacy Adam file of ``n_leaves`` random ``size x size`` float32 params (state included),
  random so that no writer can compress it away."""
  rng = np.random.RandomState(seed)
  params = {f'w{i}': rng.standard_normal((size, size)).astype(np.float32)
            for i in range(n_leaves)}
  opt = optim.Adam(0.1).create(params)
  opt = opt.apply_gradient({k: rng.standard_normal(v.shape).astype(np.float32)
                            for k, v in params.items()})
  return serialization.to_bytes(opt)


def _child_env():
  env = dict(os.environ)
  env['PYTHONPATH'] = REPO + os.pathsep + env.get('PYTHONPATH', '')
  env['JAX_PLATFORMS'] = 'cpu'
  return env


# ----------------------------------------------------------------------------- races


def _racing(monkeypatch, name):
  """Makes two threads meet before ``_outputs.<name>`` (the publishing step)."""
  barrier = threading.Barrier(2, timeout=60)
  original = getattr(_outputs, name)

  def meet_then_publish(*args):
    barrier.wait()
    return original(*args)
  monkeypatch.setattr(_outputs, name, meet_then_publish)


def _race(run):
  """Runs ``run(i)`` in two threads; ``[result or the CheckpointError, ...]``."""
  results = [None, None]

  def thread(i):
    try:
      results[i] = run(i)
    except convert.CheckpointError as e:
      results[i] = e
  threads = [threading.Thread(target=thread, args=(i,)) for i in range(2)]
  for t in threads:
    t.start()
  for t in threads:
    t.join(timeout=120)
  return results


def _one_winner(results, out):
  errors = [r for r in results if isinstance(r, convert.CheckpointError)]
  assert len(errors) == 1, results
  assert 'already exists' in str(errors[0]) and repr(str(out)) in str(errors[0])
  return results.index(errors[0]) ^ 1


@pytest.mark.parametrize('without', [None, 'link', 'renameat2'])
def test_two_files_racing_to_one_path_one_wins(monkeypatch, tmp_path, without):
  if without == 'link':  # a file system without hard links: renameat2(RENAME_NOREPLACE)
    def no_link(src, dst):
      raise OSError(errno.EPERM, 'Operation not permitted')
    monkeypatch.setattr(os, 'link', no_link)
  if without == 'renameat2':  # and without that too: rename after a last check
    monkeypatch.setattr(os, 'link', lambda src, dst: (_ for _ in ()).throw(
        OSError(errno.EPERM, 'Operation not permitted')))
    monkeypatch.setattr(_outputs, '_renameat2', lambda: None)
  if without == 'renameat2':
    # rename() replaces a file: exclusivity rests on the check just before it, so the two
    # threads (which meet first) publish one after the other here.
    lock = threading.Lock()
    original = _outputs._rename_no_replace
    monkeypatch.setattr(_outputs, '_rename_no_replace',
                        lambda *a: _locked(lock, original, *a))
  _racing(monkeypatch, '_link_no_replace' if without is None else '_rename_no_replace')
  out = tmp_path / 'out.msgpack'
  trees = [{'w': np.full(3, i, np.float32)} for i in range(2)]
  results = _race(lambda i: convert.write_msgpack(out, trees[i]))
  winner = _one_winner(results, out)
  assert os.listdir(tmp_path) == ['out.msgpack']
  np.testing.assert_array_equal(convert.load(str(out))['w'], trees[winner]['w'])
  assert oct(os.stat(out).st_mode & 0o777) == oct(0o666 & ~_umask())


def _locked(lock, function, *args):
  with lock:
    return function(*args)


def _umask():
  umask = os.umask(0)
  os.umask(umask)
  return umask


@pytest.mark.parametrize('with_renameat2', [True, False])
def test_two_directories_racing_to_one_path_one_wins(monkeypatch, tmp_path, with_renameat2):
  if not with_renameat2:  # rename() cannot replace the non-empty directory of the winner
    monkeypatch.setattr(_outputs, '_renameat2', lambda: None)
    monkeypatch.setattr(os.path, 'lexists', lambda path: False)  # both pass the last check
  _racing(monkeypatch, '_rename_no_replace')
  out = tmp_path / 'out'

  def write(i):
    def fill(tmp):
      os.mkdir(tmp)
      with open(os.path.join(tmp, 'data'), 'w') as f:
        f.write(str(i))
    _outputs.write_directory(out, fill)
    return i
  results = _race(write)
  monkeypatch.undo()
  winner = _one_winner(results, out)
  assert os.listdir(tmp_path) == ['out']
  assert (out / 'data').read_text() == str(winner)


def test_two_cli_converts_to_one_out_one_wins(tmp_path):
  out = tmp_path / 'out'
  command = [sys.executable, '-m', 'flax_optim_compat', 'convert', ADAM_FILE, '--optimizer', ADAM,
             '--to', 'optax', '--out', str(out)]
  processes = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=_child_env(), cwd=str(tmp_path))
               for _ in range(2)]
  results = [(p.wait(timeout=300), p.stdout.read(), p.stderr.read()) for p in processes]
  for p in processes:
    p.stdout.close()
    p.stderr.close()
  assert sorted(code for code, _, _ in results) == [0, 2], results
  (_, _, err), = [r for r in results if r[0] == 2]
  assert err.count('\n') == 1 and 'already exists' in err, err
  assert os.listdir(tmp_path) == ['out']
  assert convert.diff(str(out), ADAM_FILE, _cli.parse_optimizer(ADAM)).same()


# ----------------------------------------------------------------------------- full disk


@pytest.fixture
def small_disk(tmp_path):
  """A 256 KB tmpfs (needs root and mount); skipped where it cannot be mounted."""
  mount = tmp_path / 'disk'
  mount.mkdir()
  done = subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=256k', 'tmpfs', str(mount)],
                        capture_output=True, check=False)
  if done.returncode:
    pytest.skip(f'cannot mount a tmpfs here: {done.stderr.decode().strip()}')
  try:
    yield mount
  finally:
    subprocess.run(['umount', str(mount)], check=True)


# Runs in a child interpreter, as the program (orbax's writer threads may report after the
# error; the program keeps stderr to its one line): every registered --to onto the full disk,
# all in this one process.
_FULL_DISK_CHILD = r'''
import json, sys, warnings
warnings.simplefilter('ignore')
from flax_optim_compat._cli import _main as _cli
from flax_optim_compat import convert
source, converted, disk = sys.argv[1:4]
codes = {}
for f in convert.output_formats():
  sys.argv = ['flax-optim-compat', 'convert', converted if f.reads_converted else source,
              '--optimizer', 'Adam(0.1)', '--to', f.name, '--out', f'{disk}/out-{f.name}']
  codes[f.name] = _cli.main()
print(json.dumps(codes))
'''


def test_full_disk_every_to_says_so_in_one_line(tmp_path, small_disk):
  source = tmp_path / 'checkpoint_1'
  source.write_bytes(_random_adam_bytes(4, 150))  # ~1 MB: 4 times the disk
  converted = tmp_path / 'converted'
  assert _cli.main(['convert', str(source), '--optimizer', 'Adam(0.1)', '--to', 'optax',
                    '--out', str(converted)]) == 0
  done = subprocess.run([sys.executable, '-c', _FULL_DISK_CHILD, str(source), str(converted),
                         str(small_disk)], capture_output=True, text=True, env=_child_env(),
                        timeout=300, check=False)
  assert done.returncode == 0, done.stderr
  names = [f.name for f in convert.output_formats()]
  assert json.loads(done.stdout.splitlines()[-1]) == {name: 2 for name in names}
  assert done.stderr.splitlines() == [
      f"flax-optim-compat convert: error: no space left on the device of "
      f"'{small_disk}/out-{name}' (nothing was written)."
      for name in names], done.stderr
  assert os.listdir(small_disk) == []


# Not every format: one per writer (msgpack, orbax), as each case fails its own writer's call.
@pytest.mark.parametrize('to', ['optax', 'orbax'])
def test_full_disk_simulated(monkeypatch, capsys, tmp_path, to):
  """Where no tmpfs can be mounted: the write itself fails with ENOSPC half way."""
  if to == 'optax':
    original = _codec._write_array
    calls = []

    def write_array(f, packer, array):
      calls.append(1)
      if len(calls) == 3:
        raise OSError(errno.ENOSPC, 'No space left on device')
      original(f, packer, array)
    monkeypatch.setattr(_codec, '_write_array', write_array)
  else:
    import orbax.checkpoint as ocp

    def save(self, *args, **kwargs):
      raise OSError(errno.ENOSPC, 'No space left on device')
    monkeypatch.setattr(ocp.AsyncCheckpointer, 'save', save)
  out = tmp_path / 'out'
  code = _cli.main(['convert', ADAM_FILE, '--optimizer', ADAM, '--to', to, '--out', str(out)])
  _, err = capsys.readouterr()
  assert code == 2 and err.count('\n') == 1 and 'no space left' in err, err
  assert os.listdir(tmp_path) == []


# ----------------------------------------------------------------------------- Ctrl-C

# Runs in a child interpreter: a ~6 MB Adam file converted with SIGINT raised at several points
# (while reading, while writing, after orbax's save started its writer threads, while waiting
# for them, just before publishing); prints what each left behind.
_INTERRUPTED_CHILD = r'''
import json, os, signal, sys, warnings
warnings.simplefilter('ignore')
import orbax.checkpoint as ocp
from flax_optim_compat._cli import _main as _cli
from flax_optim_compat._checkpoint import _codec, _outputs

source, work = sys.argv[1], sys.argv[2]
# This child stands for the program run from a terminal, where Ctrl-C raises KeyboardInterrupt.
# Python installs that handler only if SIGINT was not ignored when it started, and a suite
# started in the background by a non-interactive shell (`pytest ... &`, `nohup`-style CI
# scripts) hands its children SIGINT ignored: raise_signal is then a no-op and nothing stops.
signal.signal(signal.SIGINT, signal.default_int_handler)

def interrupt_at(owner, name, nth, after=False):
  original = getattr(owner, name)
  calls = []
  def wrapper(*args, **kwargs):
    calls.append(1)
    if len(calls) == nth and not after:
      signal.raise_signal(signal.SIGINT)
    result = original(*args, **kwargs)
    if len(calls) == nth and after:
      signal.raise_signal(signal.SIGINT)
    return result
  setattr(owner, name, wrapper)
  return lambda: setattr(owner, name, original)

points = [
    ('optax', _codec._Reader, '_read_into_scratch', 4, False),
    ('optax', _codec, '_write_array', 5, False),
    ('optax', _outputs, '_link_no_replace', 1, False),
    ('train-state', _codec, '_write_array', 1, True),
    ('orbax', _codec._Reader, '_read_into_scratch', 2, False),
    ('orbax', ocp.AsyncCheckpointer, 'save', 1, True),
    ('orbax', ocp.AsyncCheckpointer, 'wait_until_finished', 1, False),
    ('orbax', _outputs, '_rename_no_replace', 1, False),
]
results = []
for i, (to, owner, name, nth, after) in enumerate(points):
  folder = os.path.join(work, str(i))
  os.mkdir(folder)
  undo = interrupt_at(owner, name, nth, after)
  try:
    code = _cli.main(['convert', source, '--optimizer', 'Adam(0.1)', '--to', to,
                      '--out', os.path.join(folder, 'out')])
  finally:
    undo()
  results.append([f'{to} at {name} #{nth}', code, sorted(os.listdir(folder))])
print(json.dumps(results))
'''


def test_ctrl_c_at_any_point_leaves_nothing_behind(tmp_path):
  source = tmp_path / 'checkpoint_1'
  source.write_bytes(_random_adam_bytes(8, 256))
  work = tmp_path / 'work'
  work.mkdir()
  done = subprocess.run([sys.executable, '-c', _INTERRUPTED_CHILD, str(source), str(work)],
                        capture_output=True, text=True, env=_child_env(), timeout=300,
                        check=False)
  assert done.returncode == 0, done.stderr
  results = json.loads(done.stdout.splitlines()[-1])
  assert len(results) == 8
  for point, code, left in results:
    assert (code, left) == (130, []), point
  assert done.stderr.splitlines() == ['flax-optim-compat convert: interrupted'] * 8, done.stderr


def test_the_program_drops_asyncios_reports_of_unretrieved_futures_only():
  """orbax's failed writes leave futures that asyncio reports when the garbage collector
  takes them (after the one line that said it): their multi-line records are dropped, any
  other asyncio record passes."""
  import logging  # pylint: disable=g-import-not-at-top
  quiet = _cli._WithoutUnretrievedFutures()  # pylint: disable=protected-access

  def record(message):
    return logging.LogRecord('asyncio', logging.ERROR, __file__, 1, message, None, None)
  for kind in ('Future', '_GatheringFuture', 'Task'):
    assert not quiet.filter(record(f'{kind} exception was never retrieved\nfuture: <...>'))
  assert quiet.filter(record('Task was destroyed but it is pending!\ntask: <...>'))
  assert quiet.filter(record('Executing <Task ...> took 0.2 seconds'))


# ----------------------------------------------------------------------------- missing folders


@pytest.mark.parametrize('to', ['optax', 'orbax'])
def test_missing_folders_above_the_output_are_made(capsys, tmp_path, to):
  """``--out new_ckpts/checkpoint_3``, as the migrate report's command is filled in."""
  out = tmp_path / 'new_ckpts' / 'run1' / 'checkpoint_3'
  code = _cli.main(['convert', ADAM_FILE, '--optimizer', ADAM, '--to', to, '--out', str(out)])
  assert code == 0, capsys.readouterr().err
  assert os.path.isfile(out) if to == 'optax' else os.path.isdir(out)
  assert sorted(os.listdir(out.parent)) == ['checkpoint_3']


@pytest.mark.parametrize('to', ['optax', 'orbax'])
def test_folders_made_for_a_failed_output_are_removed(monkeypatch, capsys, tmp_path, to):
  if to == 'optax':
    def write_array(f, packer, array):
      raise OSError(errno.ENOSPC, 'No space left on device')
    monkeypatch.setattr(_codec, '_write_array', write_array)
  else:
    import orbax.checkpoint as ocp  # pylint: disable=g-import-not-at-top

    def save(self, *args, **kwargs):
      raise OSError(errno.ENOSPC, 'No space left on device')
    monkeypatch.setattr(ocp.AsyncCheckpointer, 'save', save)
  (tmp_path / 'kept').mkdir()
  out = tmp_path / 'kept' / 'new' / 'deeper' / 'checkpoint_3'
  code = _cli.main(['convert', ADAM_FILE, '--optimizer', ADAM, '--to', to, '--out', str(out)])
  _, err = capsys.readouterr()
  assert code == 2 and err.count('\n') == 1 and 'no space left' in err, err
  assert os.listdir(tmp_path) == ['kept'] and os.listdir(tmp_path / 'kept') == []


def test_a_file_where_a_folder_should_be_is_one_error_naming_it(capsys, tmp_path):
  (tmp_path / 'notes.txt').write_text('x')
  out = tmp_path / 'notes.txt' / 'ckpts' / 'checkpoint_3'
  code = _cli.main(['convert', ADAM_FILE, '--optimizer', ADAM, '--to', 'optax', '--out', str(out)])
  _, err = capsys.readouterr()
  assert code == 2 and err.count('\n') == 1, err
  assert f"{str(tmp_path / 'notes.txt')!r} is not a directory" in err, err
  assert sorted(os.listdir(tmp_path)) == ['notes.txt']
