"""``flax-optim-compat migrate PATH...``: diff by default, ``--write``, ``--check``, ``--report``.

Exit status: 0 nothing to change, 1 changes proposed or written, 2 anything refused or failed
(even if other files changed). ``--check`` writes nothing and prints no diff. A short summary
goes to stderr.
"""
import difflib
import os
import sys
from typing import Callable, Dict, Optional, TextIO

from .._checkpoint import _outputs
from . import _engine
from . import _import_paths


def _read(paths) -> Dict[str, str]:
  sources = {}
  for path in _import_paths.python_files(paths):
    with open(path, encoding='utf-8', newline='') as f:  # keep the file's own line endings
      sources[path] = f.read()
  return sources


def _label(side: str, path: str) -> str:
  """``a/pkg/x.py`` for a path under the current folder (as git and ruff print), else the
  absolute path (the diff is applied on this machine)."""
  cwd = os.getcwd()
  return f'{side}/{os.path.relpath(path, cwd)}' if path.startswith(cwd + os.sep) else path


def _shown(arguments) -> Callable[[str], str]:
  """How the report names a file: relative to the current folder when it lies
  there (as git and ruff print), else relative to the folder of the arguments (never an
  absolute path of this machine: the report stays true on a clone elsewhere)."""
  cwd = os.getcwd()
  folders = [os.path.abspath(a if os.path.isdir(a) else os.path.dirname(a) or '.')
             for a in arguments]
  base = os.path.commonpath(folders) if folders else cwd
  return lambda p: os.path.relpath(p, cwd if p.startswith(cwd + os.sep) else base)


def run(args, out: TextIO, err: Optional[TextIO] = None) -> int:
  """Runs ``migrate`` for parsed ``args``; returns the exit status."""
  err = err or sys.stderr
  sources = _read(args.paths)
  changed, report = _engine.migrate_sources(sources, plain_optax=args.plain_optax)
  shown = _shown(args.paths)
  for path in sorted(changed):
    if args.write:
      # The file holds its old text or the new one, never a part (its mode kept).
      _outputs.replace_file(path, lambda f, text=changed[path]: f.write(text.encode('utf-8')))
    elif not args.check:
      out.writelines(difflib.unified_diff(
          sources[path].splitlines(True), changed[path].splitlines(True),
          fromfile=_label('a', path), tofile=_label('b', path)))
  report.relocate(shown, sources)
  if args.report:
    report.write(args.report)
  err.write(report.summary(written=args.write) + '\n')
  return report.exit_status()
