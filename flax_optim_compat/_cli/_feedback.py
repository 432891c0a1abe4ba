"""What the program is doing, on a terminal: one line per step that lasts over a second.

A step (reading, probing, writing, orbax's commit) is drawn on stderr once it has lasted
``DELAY`` seconds, redrawn every ``INTERVAL`` seconds with its time so far (and, for a read,
a bar of the bytes read), and closed with its total time when the next step starts. Steps
shorter than ``DELAY`` leave nothing. Nothing at all is drawn when stderr is not a terminal
(a pipe, a file, a CI log) or with ``--quiet``.
"""
import contextlib
import os
import threading
import time
from typing import Optional

DELAY = 1.0
INTERVAL = 0.25
_BAR = 25


class Feedback:
  """The step line of one command run; ``enabled`` False makes every method a no-op."""

  def __init__(self, stream, enabled: bool):
    self._stream = stream
    self.enabled = enabled
    self._lock = threading.Lock()
    self._label: Optional[str] = None
    self._started = 0.0
    self._fraction: Optional[float] = None
    self._detail = ''
    self._drawn = False
    self._stop = threading.Event()
    self._ticker: Optional[threading.Thread] = None

  @classmethod
  def for_stream(cls, stream, quiet: bool) -> 'Feedback':
    isatty = getattr(stream, 'isatty', None)
    return cls(stream, not quiet and callable(isatty) and isatty())

  def start(self, label: str) -> None:
    """Closes the current step (its line, if drawn, keeps its total time) and starts ``label``."""
    if not self.enabled:
      return
    with self._lock:
      self._close_locked()
      self._label, self._started = label, time.monotonic()
      self._fraction, self._detail, self._drawn = None, '', False
    if self._ticker is None:
      self._ticker = threading.Thread(target=self._tick, name='flax-optim-compat feedback',
                                      daemon=True)
      self._ticker.start()

  def finish(self) -> None:
    """Closes the current step and stops drawing."""
    if not self.enabled:
      return
    self._stop.set()
    if self._ticker is not None and self._ticker is not threading.current_thread():
      self._ticker.join()
    with self._lock:
      self._close_locked()
      self._label = None

  def read_progress(self, path: str, then: Optional[str] = None):
    """A ``callback(bytes_read, total_bytes)`` for the read of ``path`` (None when disabled).

    The read is a step of its own, with a bar; when it is complete the step ``then`` starts
    (the work that follows inside the same call, e.g. the probe).
    """
    if not self.enabled:
      return None
    self.start(f'reading {os.path.basename(os.fspath(path)) or path}')

    def report(done, total):
      with self._lock:
        self._fraction = done / total if total else 1.0
        self._detail = f' ({done / 1e6:,.0f}/{total / 1e6:,.0f} MB)'
      if done >= total and then is not None:
        self.start(then)
    return report

  @contextlib.contextmanager
  def steps(self):
    """Runs the block; the last step is closed however the block ends."""
    try:
      yield self
    finally:
      self.finish()

  def _tick(self):
    while not self._stop.wait(INTERVAL):
      with self._lock:
        if self._label is not None and time.monotonic() - self._started >= DELAY:
          self._draw_locked(final=False)

  def _draw_locked(self, final: bool) -> None:
    seconds = time.monotonic() - self._started
    bar = ''
    if self._fraction is not None:
      filled = int(_BAR * min(self._fraction, 1.0))
      bar = f' [{"#" * filled:<{_BAR}}] {int(100 * min(self._fraction, 1.0)):3d}%{self._detail}'
    line = f'{self._label}{bar} {seconds:.1f} s' + (' done' if final else '')
    try:
      self._stream.write(f'\r{line}\x1b[K' + ('\n' if final else ''))
      self._stream.flush()
    except (OSError, ValueError):  # the terminal went away: the command itself goes on
      self.enabled = False
    self._drawn = True

  def _close_locked(self) -> None:
    # A step that lasted DELAY gets its line even if the ticker had no turn (a loaded machine).
    if self._label is not None and (
        self._drawn or time.monotonic() - self._started >= DELAY):
      self._draw_locked(final=True)
