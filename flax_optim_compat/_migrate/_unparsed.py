"""A file of the project that does not parse (or that LibCST parses and Python does not
compile), read as text: where and why, whether it names flax.optim, what it imports."""
import ast
import dataclasses
import os
import re
import warnings
from typing import Iterable, List, Optional, Set, Tuple

import libcst as cst


@dataclasses.dataclass
class Unparsed:
  """A file that does not parse, left as it was: where, what the parser said, and whether it
  names flax.optim itself (the line, else None); ``reached``: where the objects it may use
  were refused (``_sites`` fills it)."""
  path: str
  line: int
  error: str
  names_legacy: Optional[int]
  source: str = dataclasses.field(repr=False, default='')
  reached: List[str] = dataclasses.field(default_factory=list)
  parsed: bool = False   # LibCST parses it, Python does not compile it


# A file that does not parse has no tree, so what it imports and whether it names flax.optim
# are read from its text. An import statement: its module and names, to the end of the line
# (backslash continuations included), a ``;``, or the closing parenthesis of ``import (...)``.
_IMPORT = re.compile(r'(?:^|;)[ \t]*(?:from[ \t]+([.\w]+)[ \t]+import[ \t]*(\([^)]*\)|'
                     r'[^\n;]*(?:\\\n[^\n;]*)*)|import[ \t]+([^\n;]*(?:\\\n[^\n;]*)*))',
                     re.MULTILINE)
# How a file gets at flax.optim by itself, whatever it imports: ``flax.optim``,
# ``getattr(flax, ...)``, this package, or an import by a computed name
# (``importlib.import_module``, ``__import__``). ``config.optim = ...`` is none.
_LEGACY_TEXT = re.compile(r'\bflax\s*\.\s*optim\b|\bflax_optim_compat\b|\bgetattr\s*\(\s*flax\b|'
                          r'\bimport_module\b|\b__import__\b')
# ``optim.Adam``: a capitalised name of something called ``optim`` (not an attribute ``optim``
# of something else, such as ``torch.optim.Adam``); ``names_legacy`` says when it counts.
_OPTIM_ATTRIBUTE = re.compile(r'(?<!\.)\boptim\s*\.\s*[A-Z]')


def imported_words(text: str) -> Set[str]:
  """Every word of the modules and names the import statements of ``text`` name."""
  words = set()
  for m in _IMPORT.finditer(text):
    words.update(re.findall(r'\w+', ' '.join(g for g in m.groups() if g)))
  words -= {'import', 'as'}
  return words


def local_modules(paths: Iterable[str]) -> Set[str]:
  """Every dotted name by which a file or folder of the project may be imported: its path
  under the folder that holds all of ``paths``, and each tail of that path (``a/b/c.py``:
  ``c``, ``b.c``, ``a.b.c``, ``b``, ``a.b``, ``a``)."""
  paths = [os.path.abspath(p) for p in paths]
  if not paths:
    return set()
  top = os.path.commonpath([os.path.dirname(p) for p in paths])
  names = set()
  for path in paths:
    parts = os.path.relpath(path, top).split(os.sep)
    parts[-1] = parts[-1][:-len('.py')] if parts[-1].endswith('.py') else parts[-1]
    if parts[-1] == '__init__':
      parts.pop()
    for end in range(1, len(parts) + 1):
      names.update('.'.join(parts[start:end]) for start in range(end))
  return names


def _bindings(text: str):
  """``(offset, module, name, bound)`` for each name an import statement of ``text`` binds:
  ``from m import n as b`` gives ``(.., 'm', 'n', 'b')``, ``import a.b as c`` gives
  ``(.., 'a.b', '', 'c')``, ``import a.b`` gives ``(.., 'a.b', '', 'a')``."""
  for m in _IMPORT.finditer(text):
    names = re.sub(r'#[^\n]*|\\\n|[()]', ' ', m.group(2) or m.group(3) or '')
    for item in names.split(','):
      words = item.split()
      if not words:
        continue
      bound = words[2] if len(words) == 3 and words[1] == 'as' else None
      if m.group(1) is not None:
        yield m.start(), m.group(1), words[0], bound or words[0]
      else:
        yield m.start(), words[0], '', bound or words[0].split('.')[0]


def names_legacy(text: str, local: Set[str]) -> Optional[int]:
  """The line where ``text`` first names flax.optim, else None: as ``_LEGACY_TEXT`` says, an
  import of the name ``optim`` (or ``*``) from flax, from a relative module or from a module of
  the project (``local``: ``local_modules``), or ``optim.Adam`` where no import binds ``optim``
  to another module (``from pyro.generic import optim``, ``import torch.optim as optim``: a
  PyTorch file beside a JAX program)."""
  found = [m.start() for m in [_LEGACY_TEXT.search(text)] if m]
  foreign = False
  for start, module, name, bound in _bindings(text):
    ours = module == 'flax' or module.startswith('.') or module in local
    if name:   # from module import name
      if name in ('optim', '*') and ours:
        found.append(start)
      foreign = foreign or (bound == 'optim' and not ours)
    elif bound == 'optim' or module.split('.')[-1] == 'optim':
      if ours:
        found.append(start)
      foreign = foreign or bound == 'optim' and not ours
  attribute = _OPTIM_ATTRIBUTE.search(text)
  if attribute and not foreign:
    found.append(attribute.start())
  return text.count('\n', 0, min(found)) + 1 if found else None


def parse_error(source: str, error: cst.ParserSyntaxError) -> Tuple[int, str]:
  """``(line, message)`` of a file LibCST does not parse: Python's own where it fails too
  (its line is the line at fault: LibCST's ``raw_line`` is the token after it), else
  LibCST's."""
  try:
    compile_quietly(source, '<file>', ast.PyCF_ONLY_AST)
  except SyntaxError as e:
    return e.lineno or error.raw_line, e.msg
  except ValueError:   # a null byte
    pass
  return error.raw_line, error.message


def compile_quietly(source: str, path: str, flags: int = 0):
  """Python's ``compile``, without the warnings it prints about the program's own code
  (``SyntaxWarning: "is not" with a literal``): the program's to report, not migrate's."""
  with warnings.catch_warnings():
    warnings.simplefilter('ignore', SyntaxWarning)
    warnings.simplefilter('ignore', DeprecationWarning)   # an invalid escape, Python < 3.12
    return compile(source, path, 'exec', flags=flags, dont_inherit=True)


def compile_error(source: str, path: str) -> Optional[Tuple[int, str]]:
  """``(line, Python's message)`` where Python does not compile ``source``, else None."""
  try:
    compile_quietly(source, path)
  except SyntaxError as e:
    return e.lineno or 0, f'{type(e).__name__}: {e.msg}'
  except ValueError as e:   # a null byte
    return 0, f'ValueError: {e}'
  return None
