"""The table of removed jax names as a use in source resolves it, and what today's jax lacks.

``BY_NAME`` reads ``_legacy_jax.NAMES`` (the package's one table) as the fully qualified names
a use resolves to (``from jax.config import config`` makes ``config.X`` ``jax.config.config.X``);
:func:`missing_today` asks the installed jax whether a dotted name a use resolves to exists,
looking a submodule up without importing it. ``_jax_names`` plans the rules from both.
"""
import functools
import importlib
import importlib.util
import inspect
import os
import re
import types
from typing import Dict, NamedTuple, Optional, Tuple
import warnings

from .. import _legacy_jax
from .. import _legacy_values


class TableName(NamedTuple):
  """One entry of ``_legacy_jax.NAMES`` as a use in source resolves it."""
  name: str              # fully qualified, as the program's imports resolve it
  kind: str              # the table's kind
  target: str
  keywords: tuple = ()
  annotation_only: bool = False
  # ``'expression'``: the words of ``target`` that stand for the call's arguments (the
  # function's parameters), and the one that stands for the module the call is on.
  parameters: tuple = ()
  module_word: str = ''


# Removed modules whose table names are all renames (``jax.lib.xla_bridge``'s functions, the
# ``flax.nn`` functions flax.linen has): an import of one goes once every use of it is rewritten
# (it cannot be imported today); a use of any other name of it is FOM299.
REMOVED_MODULES = _legacy_jax.PARTIAL_MODULES


# The word an ``'expression'`` entry's text spells the module of the call with.
_MODULE_WORDS = {'jax.numpy': 'jnp', 'jax': 'jax'}


def _parameters(entry) -> tuple:
  """The parameters of the function an ``'expression'`` entry's text is written in: those of
  ``_legacy_values``' function that the text names (``fix(x, out=None)``: ``x``)."""
  function = getattr(_legacy_values, entry.target)
  return tuple(p for p in inspect.signature(function).parameters
               if re.search(rf'\b{p}\b', entry.replacement))


def _by_name() -> Dict[str, TableName]:
  names = {}
  for e in _legacy_jax.NAMES:
    if e.kind == 'config_module':   # ``from jax.config import config``: its one name
      names[f'{e.qualname}.config'] = TableName(f'{e.qualname}.config', e.kind, e.target)
    elif e.kind == 'config_attribute':   # ``jax.config.X`` and ``config.X`` of the import above
      for name in (e.qualname, f'{e.module}.config.{e.name}'):
        names[name] = TableName(name, e.kind, e.target)
    elif e.kind == 'function' and '.' in e.target:
      # A function entry whose target is a dotted path names the very object it was, or
      # today's public function of the same result: ``xla_bridge.device_count`` is
      # ``jax.device_count``, ``jax.partial`` was ``functools.partial`` itself, ``np.float`` is
      # ``float``. Renamed like an alias wherever used (``@jax.partial(jax.jit, ...)`` too), so
      # a removed module's import can go; a local target (``shuffle``) stays FOM299.
      names[e.qualname] = TableName(e.qualname, 'alias', e.target)
    elif e.kind == 'expression':   # the codemod writes what the function computes
      names[e.qualname] = TableName(e.qualname, e.kind, e.replacement,
                                    parameters=_parameters(e), module_word=_MODULE_WORDS[e.module])
    else:
      names[e.qualname] = TableName(e.qualname, e.kind, e.target, e.keywords, e.annotation_only)
  return names


BY_NAME = _by_name()
_MODULES = {e.qualname: e.target for e in _legacy_jax.NAMES if e.kind == 'module'}
CONFIG_MODULES = {e.qualname: e.target for e in _legacy_jax.NAMES if e.kind == 'config_module'}


def module_entry(name: str) -> Optional[TableName]:
  """The moved module ``name`` is (or lies under), else None."""
  for old, new in _MODULES.items():
    if name == old or name.startswith(old + '.'):
      return TableName(old, 'module', new)
  return None


def jax_version(name: str = 'jax') -> str:   # 'jax 0.10.2', or 'jaxlib ...' of a jaxlib name
  return f"{name.split('.')[0]} {importlib.import_module(name.split('.')[0]).__version__}"


# Today's objects whose attributes are jax's names as a module's are: the config object
# (``jax.config``; ``jax.config.config`` of ``from jax.config import config`` was the same one).
_NAMESPACES = frozenset(CONFIG_MODULES.values())


def todays_spelling(name: str) -> str:
  """``name`` through the legacy ``config`` object spelled as today's (``jax.config.config.X``
  -> ``jax.config.X``), the name its use has once the import is rewritten; else ``name``."""
  parts = name.split('.')
  for i in range(2, len(parts)):
    entry = BY_NAME.get('.'.join(parts[:i]))
    if entry is not None and entry.kind == 'config_module':
      return '.'.join([entry.target, *parts[i:]])
  return name


@functools.lru_cache(maxsize=None)
def missing_today(name: str) -> Optional[str]:
  """The part of the dotted jax (or jaxlib) name ``name`` that today's jax lacks
  (``'jax.mask'`` of ``jax.mask.f``, ``'jaxlib.xla_extension'`` of ``jaxlib.xla_extension.X``,
  ``'jax.config.FLAGS'`` of ``jax.config.config.FLAGS.x``), else None. Only the names of a
  module or of the config object are checked: past a function or a class
  (``jax.random.split.x`` is an attribute of what ``split`` returns) nothing is. A submodule is
  looked up, never imported."""
  parts = todays_spelling(name).split('.')
  if parts[0] not in ('jax', 'jaxlib') or any(
      '.'.join(parts[:i]) in BY_NAME for i in range(2, len(parts) + 1)):
    return None
  obj = importlib.import_module(parts[0])
  for i in range(1, len(parts)):
    namespace = '.'.join(parts[:i]) in _NAMESPACES
    if not (isinstance(obj, types.ModuleType) or namespace):
      return None
    with warnings.catch_warnings():
      warnings.simplefilter('ignore')   # jax's own deprecation notices for names it still has
      if hasattr(obj, parts[i]):
        obj = getattr(obj, parts[i])
        continue
    prefix = '.'.join(parts[:i + 1])
    if namespace:   # an object's attribute: no submodule to look up
      return prefix
    try:
      spec = importlib.util.find_spec(prefix)
    except (ImportError, ValueError):
      spec = None
    if spec is None:
      return prefix
    if i + 1 < len(parts) and not _may_define(spec, parts[i + 1]):
      return f'{prefix}.{parts[i + 1]}'
    return None
  return None


def _may_define(spec, name: str) -> bool:
  """Whether the source of the (not imported) module ``spec`` may define ``name``: it names it,
  or it can bind names no text shows (``import *``, a module ``__getattr__``), or it has no
  readable source. ``jax.test_util`` of today defines ``check_grads`` but no ``JaxTestCase``."""
  for folder in spec.submodule_search_locations or ():   # a package's submodule
    if os.path.exists(os.path.join(folder, name + '.py')) or os.path.isdir(
        os.path.join(folder, name)):
      return True
  try:
    with open(spec.origin, encoding='utf-8') as f:
      text = f.read()
  except (OSError, TypeError, ValueError):
    return True
  return bool(re.search(rf'\b{re.escape(name)}\b|import \*|__getattr__', text))


# Old modules that held jax's public functions under another path: ``jax.api`` (jax's public
# API module until jax moved it to ``jax._src.api``; ``jax.api.jit is jax.jit``). A use
# ``jax.api.X`` is ``jax.X``, rewritten as that name, and then by X's own rule if it has one.
# jax 0.4.13 already has no ``jax.api`` (nor ``jax.numpy.lax_numpy``, ``jax.lax.lax``,
# ``jax.nn.functions``, whose names were not all the public module's): only ``jax.api`` is one.
MODULE_ALIASES = {'jax.api': 'jax'}


def aliased(name: str) -> Optional[Tuple[str, str]]:
  """``(alias module, the name it stands for)`` when ``name`` lies under a module alias."""
  for old, new in MODULE_ALIASES.items():
    if name.startswith(old + '.'):
      return old, new + name[len(old):]
  return None
