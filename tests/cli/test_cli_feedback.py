"""The step line: on a terminal, every step that lasts over ``DELAY`` (reading, probing,
writing, orbax's save and commit, diff's comparison) is shown with its time; nothing with
``--quiet`` or when stderr is not a terminal. Steps are made slow by a sleep injected in
front of them, and ``DELAY`` is cut so the test takes about a second a run."""
import os
import pty
import re
import sys
import threading
import time

import pytest

from flax_optim_compat._checkpoint import _legacy_to_optax
from flax_optim_compat._checkpoint import _outputs
from flax_optim_compat._checkpoint import _sources
from flax_optim_compat._cli import _feedback
from flax_optim_compat._cli import _main as _cli
from tests import _utils

pytestmark = pytest.mark.filterwarnings('ignore::flax_optim_compat.FlaxOptimDeprecationWarning')

ADAM_FILE = os.path.join(_utils.LEGACY_CHECKPOINTS, 'Adam', 'checkpoint_3')
ADAM = 'Adam(learning_rate=0.01, beta1=0.85, beta2=0.99, eps=1e-6, weight_decay=0.01)'
SLOW = 0.4  # seconds each step takes here: over DELAY below


def _slow(function):
  def slow(*args, **kwargs):
    time.sleep(SLOW)
    return function(*args, **kwargs)
  return slow


def _slow_read(read):
  """``read`` that takes ``SLOW`` seconds (within the read, where progress is reported)."""
  def slow_read(source, *args, progress=None, **kwargs):
    if progress is None:
      time.sleep(SLOW)
      return read(source, *args, **kwargs)
    first = []

    def slow_progress(done, total):
      if not first:
        first.append(time.sleep(SLOW))
      progress(done, total)
    return read(source, *args, progress=slow_progress, **kwargs)
  return slow_read


@pytest.fixture
def slow_steps(monkeypatch):
  """Every step of a conversion lasts ``SLOW`` seconds; a step is shown after 0.1 s."""
  monkeypatch.setattr(_feedback, 'DELAY', 0.1)
  monkeypatch.setattr(_feedback, 'INTERVAL', 0.05)
  for name in ('read', 'read_named'):  # convert and diff read, inspect reads named
    monkeypatch.setattr(_sources, name, _slow_read(getattr(_sources, name)))
  monkeypatch.setattr(_legacy_to_optax, 'convert_tree', _slow(_legacy_to_optax.convert_tree))
  monkeypatch.setattr(_outputs, 'write_file', _slow(_outputs.write_file))
  # the orbax format's write publishes its folder through _outputs.write_directory
  monkeypatch.setattr(_outputs, 'write_directory', _slow(_outputs.write_directory))


def _on_a_terminal(capsys, argv):
  """``(exit code, stdout, what was drawn on the terminal that is stderr)``.

  The terminal's other end is read while the command runs: a terminal holds only so much
  unread output before a write to it blocks.
  """
  main, child = pty.openpty()
  drawn = []

  def read():
    while True:
      try:
        chunk = os.read(main, 1 << 16)
      except OSError:  # EIO: the command's end is closed and everything was read
        return
      if not chunk:
        return
      drawn.append(chunk)
  reader = threading.Thread(target=read, daemon=True)
  reader.start()
  terminal = open(child, 'w', encoding='utf-8')  # pylint: disable=consider-using-with
  previous = sys.stderr
  try:
    sys.stderr = terminal
    try:
      code = _cli.main(argv)
    finally:
      sys.stderr = previous
      terminal.close()
    reader.join(timeout=60)
  finally:
    os.close(main)
  out, _ = capsys.readouterr()
  return code, out, b''.join(drawn).decode()


_CLOSED = re.compile(r'(?P<step>.*?)(?P<bar> \[[# ]{25}\] +\d+%.*)? (?P<seconds>\d+\.\d) s done')


def _closed_steps(drawn):
  """``[(step, bar or None, seconds), ...]`` of the closed step lines (each ends 'N.N s done')."""
  lines = [part.rstrip('\r').rsplit('\r', 1)[-1].replace('\x1b[K', '')
           for part in drawn.split('\n')]
  found = [_CLOSED.fullmatch(line) for line in lines if line]
  assert all(found), drawn
  return [(m['step'], m['bar'], float(m['seconds'])) for m in found]


@pytest.mark.parametrize('to', ['optax', 'orbax'])
def test_every_slow_step_of_convert_is_shown_on_a_terminal(capsys, tmp_path,
                                                           slow_steps, to):
  out = tmp_path / 'out'
  code, stdout, drawn = _on_a_terminal(capsys, [
      'convert', ADAM_FILE, '--optimizer', ADAM, '--to', to, '--out', str(out)])
  assert code == 0, drawn
  assert stdout.startswith(f'wrote {out}'), stdout
  steps = _closed_steps(drawn)
  writing = f'writing {out}' + (' (orbax: save, commit)' if to == 'orbax' else '')
  assert [step for step, _, _ in steps] == ['reading checkpoint_3', 'probing the conversion',
                                            writing], drawn
  assert all(seconds >= SLOW for _, _, seconds in steps), drawn
  assert '100%' in steps[0][1], drawn


def test_diff_and_inspect_show_their_slow_step(monkeypatch, capsys, slow_steps):
  code, _, drawn = _on_a_terminal(capsys, ['diff', ADAM_FILE, ADAM_FILE])
  assert code == 0, drawn
  assert [step for step, _, _ in _closed_steps(drawn)] == [
      f'comparing {ADAM_FILE} and {ADAM_FILE}'], drawn
  code, _, drawn = _on_a_terminal(capsys, ['inspect', ADAM_FILE])
  assert code == 0, drawn
  assert [step for step, _, _ in _closed_steps(drawn)] == ['reading checkpoint_3'], drawn


@pytest.mark.parametrize('to', ['optax', 'orbax'])
def test_quiet_draws_nothing_on_a_terminal(capsys, tmp_path, slow_steps, to):
  code, _, drawn = _on_a_terminal(capsys, [
      'convert', ADAM_FILE, '--optimizer', ADAM, '--to', to, '--out', str(tmp_path / 'out'),
      '--quiet'])
  assert code == 0 and drawn == '', drawn


def test_nothing_is_drawn_when_stderr_is_not_a_terminal(capsys, tmp_path, slow_steps):
  code = _cli.main(['convert', ADAM_FILE, '--optimizer', ADAM, '--to', 'orbax', '--out',
                    str(tmp_path / 'out')])
  assert code == 0
  assert capsys.readouterr().err == ''


def test_fast_steps_leave_nothing(monkeypatch, capsys, tmp_path):
  """Steps shorter than DELAY draw nothing (DELAY raised far above any step of this small
  file, so that a loaded machine cannot make one last that long)."""
  monkeypatch.setattr(_feedback, 'DELAY', 300.0)
  code, _, drawn = _on_a_terminal(capsys, [
      'convert', ADAM_FILE, '--optimizer', ADAM, '--to', 'optax', '--out', str(tmp_path / 'o')])
  assert code == 0 and drawn == '', drawn


def test_migrate_shows_its_slow_steps_then_its_summary(monkeypatch, capsys, tmp_path):
  """A large project takes minutes to analyse (t5x's folder over 15): reading, analysing,
  rewriting each file and writing are steps of their own, closed before the summary is
  printed on the same stream; nothing is drawn with ``--quiet``."""
  pytest.importorskip('libcst')
  from flax_optim_compat._migrate import _engine  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(_feedback, 'DELAY', 0.1)
  monkeypatch.setattr(_feedback, 'INTERVAL', 0.05)
  monkeypatch.setattr(_engine._project, 'Project', _slow(_engine._project.Project))
  monkeypatch.setattr(_engine, '_rewrite', _slow(_engine._rewrite))
  for name in ('a', 'b'):
    (tmp_path / f'{name}.py').write_text(
        'from flax import optim\n\n\ndef make(p):\n'
        '  return optim.Adam(learning_rate=0.1).create(p)\n')
  code, _, drawn = _on_a_terminal(capsys, ['migrate', str(tmp_path), '--write'])
  assert code == 1, drawn
  steps, summary = drawn.split('rewrote 2 file(s)')
  shown = [step for step, _, _ in _closed_steps(steps)]
  slowed = ['analysing 2 file(s)', 'rewriting a.py (1 of 2)', 'rewriting b.py (2 of 2)']
  in_order = ['reading the files'] + slowed + ['writing']   # reading and writing are shown
  assert set(slowed) <= set(shown), drawn                  # where they happen to last DELAY
  assert shown == [step for step in in_order if step in shown], drawn
  assert '\x1b[K' not in summary and ' s done' not in summary, drawn   # no step after it
  code, _, drawn = _on_a_terminal(capsys, ['migrate', str(tmp_path), '--quiet'])
  assert code == 0 and drawn.startswith('would rewrite 0 file(s)'), drawn
