"""``flax-optim-compat migrate PATH...``: diff by default, ``--write``, ``--check``, ``--report``.

Exit status: 0 nothing to change, 1 changes proposed or written, 2 anything refused or failed
(even if other files changed). ``--check`` writes nothing and prints no diff. A short summary
goes to stderr.
"""
import dataclasses
import difflib
import errno
import io
import json
import os
import sys
import tokenize
from typing import Callable, Dict, List, Optional, TextIO, Tuple

from .._checkpoint import _outputs
from . import _engine
from . import _import_paths
from . import _unparsed


def read(paths) -> Tuple[Dict[str, str], Dict[str, str], List[_unparsed.Unparsed], Dict[str, int]]:
  """The project's files as the interpreter reads them: ``(text, encoding, unreadable,
  not_read)``, ``not_read`` the folders whose name starts with '.', with how many ``.py`` files
  each holds (``_import_paths.python_files``).

  A file is decoded as Python decodes a source file (PEP 263: a UTF-8 BOM, else a coding
  cookie on its first two lines, else UTF-8), its line endings kept, and written back in the
  same encoding (``# -*- coding: latin-1 -*-`` stays latin-1, a BOM stays). A file found in a
  folder that cannot be read or decoded (a dangling link, bytes its encoding does not allow, an
  unknown codec) cannot be imported by the interpreter either: it is returned in
  ``unreadable``, by path, line and reason, and left as it is; the other files are migrated.
  """
  texts, encodings, unreadable = {}, {}, []
  files, not_read = _import_paths.python_files(paths)
  local = _unparsed.local_modules(files)
  for path in files:
    data, line, text = b'', 0, ''
    try:
      with open(path, 'rb') as f:
        data = f.read()
      encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
      texts[path], encodings[path] = data.decode(encoding), encoding
      continue
    except OSError as e:       # a dangling link, a file that cannot be opened
      why = f'cannot be read: {e.strerror or e}'
    except SyntaxError as e:   # an unknown codec, a cookie that contradicts the BOM
      line, why, text = e.lineno or 1, e.msg, data.decode('latin-1')
    except UnicodeDecodeError as e:
      line, text = data[:e.start].count(b'\n') + 1, data.decode('latin-1')
      why = f'not decodable as {encoding}: byte {data[e.start:e.start + 1]!r} ({e.reason})'
    legacy = _unparsed.names_legacy(text, local)
    unreadable.append(_unparsed.Unparsed(path, line, why, legacy, text))
  return texts, encodings, unreadable, not_read


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


def run(args, out: TextIO, err: Optional[TextIO] = None,
        step: Callable[[str], None] = lambda label: None,
        steps_done: Callable[[], None] = lambda: None) -> int:
  """Runs ``migrate`` for parsed ``args``; returns the exit status. ``step(label)``: called as
  each stage starts (reading, analysing, rewriting each file, writing); ``steps_done()``: when
  the last one ends, before the diff and the summary are printed."""
  err = err or sys.stderr
  step('reading the files')
  sources, encodings, unreadable, not_read = read(args.paths)
  changed, report = _engine.migrate_sources(sources, plain_optax=args.plain_optax,
                                            unreadable=unreadable, step=step)
  report = dataclasses.replace(report, not_read=not_read)
  step('writing' if args.write else 'comparing')
  new_bytes = {path: changed[path].encode(encodings[path]) for path in changed}
  diff = [] if args.write or args.check else [
      line for path in sorted(changed) for line in difflib.unified_diff(
          sources[path].splitlines(True), changed[path].splitlines(True),
          fromfile=_label('a', path), tofile=_label('b', path))]
  report.relocate(_shown(args.paths), list(sources) + [bad.path for bad in unreadable])
  # Nothing is written unless all of it can be: the files are checked, then the report is
  # written (a report path that cannot be written leaves every file as it was), then the files.
  targets = {path: os.path.realpath(path) for path in changed} if args.write else {}
  for target in targets.values():
    for where, mode in ((target, os.W_OK), (os.path.dirname(target), os.W_OK | os.X_OK)):
      if not os.access(where, mode):
        raise PermissionError(errno.EACCES, 'Permission denied (nothing was written)', where)
  if args.report:
    data = (json.dumps(report.as_dict(), indent=1) + '\n').encode('utf-8')
    publish = _outputs.replace_file if os.path.isfile(args.report) else _outputs.write_file
    publish(args.report, lambda f: f.write(data))
  for path, target in sorted(targets.items()):
    # The file holds its old text or the new one, never a part (its mode kept); a link
    # stays a link, its target rewritten (as black and ruff write).
    _outputs.replace_file(target, lambda f, data=new_bytes[path]: f.write(data))
  steps_done()
  out.writelines(diff)
  err.write(report.summary(written=args.write) + '\n')
  return report.exit_status()
