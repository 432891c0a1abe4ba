"""``flax-optim-compat migrate PATH...``: diff by default, ``--write``, ``--check``, ``--report``.

Exit status: 0 nothing to change, 1 changes proposed or written, 2 anything refused or failed
(even if other files changed). ``--check`` writes nothing and prints no diff. A short summary
goes to stderr.
"""
import difflib
import os
import sys
import tempfile
from typing import Dict, Optional, TextIO

from . import _engine
from . import _project


def _read(paths) -> Dict[str, str]:
  sources = {}
  for path in _project.python_files(paths):
    with open(path, encoding='utf-8', newline='') as f:  # keep the file's own line endings
      sources[path] = f.read()
  return sources


def write_atomically(path: str, text: str) -> None:
  """Replaces ``path`` by ``text``: a temp file in the same folder, fsync, rename."""
  folder = os.path.dirname(os.path.abspath(path))
  mode = os.stat(path).st_mode & 0o7777
  fd, tmp = tempfile.mkstemp(prefix='.' + os.path.basename(path) + '.', suffix='.tmp',
                             dir=folder)
  try:
    with os.fdopen(fd, 'w', encoding='utf-8', newline='') as f:
      f.write(text)
      f.flush()
      os.fsync(f.fileno())
    os.chmod(tmp, mode)
    os.replace(tmp, path)
    tmp = None
  finally:
    if tmp is not None:
      os.unlink(tmp)


def _label(side: str, path: str) -> str:
  """``a/pkg/x.py`` for a path under the current folder (as git and ruff print), else the path."""
  return path if os.path.isabs(path) else f'{side}/{path}'


def run(args, out: TextIO, err: Optional[TextIO] = None) -> int:
  """Runs ``migrate`` for parsed ``args``; returns the exit status."""
  err = err or sys.stderr
  sources = _read(args.paths)
  changed, report = _engine.migrate_sources(sources, plain_optax=args.plain_optax)
  cwd = os.getcwd()
  shown = lambda p: os.path.relpath(p, cwd) if p.startswith(cwd + os.sep) else p
  for path in sorted(changed):
    if args.write:
      write_atomically(path, changed[path])
    elif not args.check:
      out.writelines(difflib.unified_diff(
          sources[path].splitlines(True), changed[path].splitlines(True),
          fromfile=_label('a', shown(path)), tofile=_label('b', shown(path))))
  for record in report.records + report.failed:
    record.path = shown(record.path)
  for conversion in report.conversions:
    conversion.path = shown(conversion.path)
  report.changed = [shown(p) for p in report.changed]
  if args.report:
    report.write(args.report)
  err.write(report.summary(written=args.write) + '\n')
  return report.exit_status()
