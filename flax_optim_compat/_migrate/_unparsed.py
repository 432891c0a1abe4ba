"""A file of the project that does not parse (or that LibCST parses and Python does not
compile), read as text: where and why, whether it names flax.optim, what it imports."""
import ast
import dataclasses
import re
import warnings
from typing import List, Optional, Set, Tuple

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
# How a file gets at flax.optim by itself: ``flax.optim``, ``getattr(flax, ...)``, this package,
# ``optim.Adam`` (any capitalised name of a module imported as ``optim``; not an attribute
# ``optim`` of something else, such as ``torch.optim.Adam``), or an import by a computed name
# (``importlib.import_module``, ``__import__``). ``config.optim = ...`` is none.
_LEGACY_TEXT = re.compile(r'\bflax\s*\.\s*optim\b|\bflax_optim_compat\b|\bgetattr\s*\(\s*flax\b|'
                          r'(?<!\.)\boptim\s*\.\s*[A-Z]|\bimport_module\b|\b__import__\b')


def imported_words(text: str) -> Set[str]:
  """Every word of the modules and names the import statements of ``text`` name."""
  words = set()
  for m in _IMPORT.finditer(text):
    words.update(re.findall(r'\w+', ' '.join(g for g in m.groups() if g)))
  words -= {'import', 'as'}
  return words


def names_legacy(text: str) -> Optional[int]:
  """The line where ``text`` first names flax.optim (as ``_LEGACY_TEXT`` says, or an import of
  a name ``optim``), else None."""
  found = [m.start() for m in [_LEGACY_TEXT.search(text)] if m]
  for m in _IMPORT.finditer(text):
    names = m.group(2) or m.group(3) or ''
    if re.search(r'\boptim\b|\*', names):
      found.append(m.start())
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
