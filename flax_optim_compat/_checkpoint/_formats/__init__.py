"""The output formats of ``convert`` (``--to``): one module each in this folder, found here.

A format module defines ``FORMAT``, an :class:`OutputFormat`: its name (the ``--to`` value),
a help clause, what it reads (a legacy checkpoint, or a converted one to go back), how it writes
the tree, and how the printed code reads it back (``_load_code``'s reader and template; none
for a legacy output, which legacy code restores). The CLI's ``--to`` choices, ``convert``'s
writers and the load-code printer all look formats up here: a new format is its module and
its test, plus its name in the tests' pinned list of built-in formats and its row in
docs/convert.md's ``--to`` table (tests/checkpoint/test_formats.py checks both).
"""
import dataclasses
import importlib
import pkgutil
from typing import Callable, Dict, List, Optional

from .. import _load_code
from .._codec import CheckpointError


@dataclasses.dataclass(frozen=True)
class OutputFormat:
  """One output format of ``convert``.

  Attributes:
    name: the ``--to`` value (``'orbax'``).
    help: what the output is, one clause (``--to``'s help).
    rank: its place among the choices (lowest first).
    write: ``write(path, tree)`` writes the tree as a new output at ``path`` (all or nothing;
      CheckpointError if it exists).
    reads_converted: the input is a converted checkpoint and the tree written is its legacy
      form (``legacy``); else the input is a legacy checkpoint and the tree its conversion.
    reader: how the printed load code reads the output (None: no load code is printed).
    template: what the printed load code reads it into.
    write_steps: what the write does, where it is more than one step (shown with
      ``writing PATH`` on a terminal while it runs).
  """
  name: str
  help: str
  rank: int
  write: Callable[[str, dict], None]
  reads_converted: bool = False
  reader: Optional[_load_code.Reader] = None
  template: Optional[_load_code.Template] = None
  write_steps: str = ''

  @property
  def carried_by_name(self) -> bool:
    """Whether the load code takes each carried value by its own name (orbax's template)."""
    return self.reader is not None and self.reader.carried_from_template

  def load_code(self, state_dict, path: str, *, tx: str,
                labels: Optional[str] = None) -> Optional[str]:
    """The plain flax + optax code that loads ``state_dict`` written to ``path`` (None where
    the format prints none, or :func:`_load_code.python` can write none)."""
    if self.reader is None or self.template is None:
      return None
    return _load_code.python(state_dict, path=path, tx=tx, reader=self.reader,
                             template=self.template, labels=labels)


_FORMATS: Dict[str, OutputFormat] = {}
_FOUND = []


def register(output_format: OutputFormat) -> None:
  """Adds a format; ValueError if one of that name is registered."""
  if output_format.name in _FORMATS:
    raise ValueError(f'an output format named {output_format.name!r} is already registered.')
  _FORMATS[output_format.name] = output_format


def unregister(name: str) -> None:
  """Removes the format ``name`` (KeyError if there is none)."""
  del _FORMATS[name]


def register_module(module) -> OutputFormat:
  """Registers a format module's ``FORMAT`` (how this folder's modules are found)."""
  register(module.FORMAT)
  return module.FORMAT


def _discover() -> None:
  if _FOUND:
    return
  _FOUND.append(True)
  for info in sorted(pkgutil.iter_modules(__path__), key=lambda info: info.name):
    register_module(importlib.import_module(f'{__name__}.{info.name}'))


def all_formats() -> List[OutputFormat]:
  """Every registered format, by rank."""
  _discover()
  return sorted(_FORMATS.values(), key=lambda f: (f.rank, f.name))


def get(name: str) -> OutputFormat:
  """The format ``name``; CheckpointError naming the formats there are."""
  _discover()
  if name not in _FORMATS:
    raise CheckpointError(f'no output format {name!r}; the formats are '
                          f'{", ".join(f.name for f in all_formats())}.')
  return _FORMATS[name]
