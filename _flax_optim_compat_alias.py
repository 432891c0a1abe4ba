"""Makes ``flax.optim`` resolve to ``flax_optim_compat`` when flax has no ``optim`` of its own.

Installing ``flax_optim_compat`` (regular or editable) puts ``flax_optim_compat_alias.pth``
into site-packages; Python runs its one line at start-up, which imports this module. It
only puts one small finder at the front of ``sys.meta_path`` and imports nothing else (no
jax, no flax), so interpreter start-up stays as fast as before.

The finder acts on exactly these imports:

* ``flax.optim``, only if no other finder finds one (an old flax that still ships
  ``flax/optim`` is left alone): the module is ``flax_optim_compat`` itself (same object);
* ``flax.optim.<sub>``, only while ``flax.optim`` is that alias: ``flax_optim_compat.<sub>``,
  so ``from flax.optim.adam import _AdamParamState`` gives the very class our package uses;
* ``flax`` gets a module ``__getattr__`` (PEP 562) answering ``flax.optim`` by importing it,
  as legacy ``import flax; flax.optim.Adam(...)`` worked (flax <= 0.5 imported ``optim`` in
  its ``__init__``). An attribute flax really has is never affected.

Turn it off with the environment variable ``FLAX_OPTIM_COMPAT_ALIAS=0`` (also ``false``,
``no``, ``off``); ``python -S`` (no ``site``) skips ``.pth`` files and therefore the alias.
``install()`` / ``uninstall()`` do it by hand, e.g. when the package is used from a source
tree without being installed. While the alias is installed, pre-Linen ``flax.nn`` (``from flax
import nn``, ``flax.nn.Module``) fails with one line saying it is not restored; while the legacy
names are on (below), ``flax.nn`` holds only its functions that ``flax.linen`` has, and the rest
fails at first use with that line.

A second finder, :class:`LegacyJaxFinder`, gives back the jax names and flax defaults of
flax.optim's time (``jax.tree_map``, ``from jax.config import config``, ``init`` returning a
``FrozenDict``, ...; the table is ``flax_optim_compat._legacy_jax``) to the programs that use them,
whatever they import first: it reads each of the program's own modules (never a library's) just
before it is imported, and ``__main__``'s file at its first import; ``flax.optim`` there (or the
import of ``flax_optim_compat``) turns the names and the flax defaults on, a removed name of the
table the names. It patches ``jax``, a few of its submodules and ``flax`` after they executed,
and imports nothing at start-up either. ``FLAX_OPTIM_COMPAT_LEGACY_JAX=1`` turns everything on
from the start (still at jax's import), ``=0`` off.
"""
import os
import sys

__all__ = ['ENV_VAR', 'LEGACY_JAX_ENV_VAR', 'enabled', 'legacy_jax_mode', 'install', 'uninstall',
           'is_installed', 'install_legacy_jax', 'uninstall_legacy_jax']

ENV_VAR = 'FLAX_OPTIM_COMPAT_ALIAS'
LEGACY_JAX_ENV_VAR = 'FLAX_OPTIM_COMPAT_LEGACY_JAX'
_ALIAS = 'flax.optim'
_TARGET = 'flax_optim_compat'
_LEGACY_JAX = 'flax_optim_compat._legacy_jax'
_OFF_VALUES = ('0', 'false', 'no', 'off')
_ON_VALUES = ('1', 'true', 'yes', 'on')
# Pre-Linen flax: `flax.nn` until flax 0.3.5, `flax.deprecated.nn` in 0.3.6, removed in 0.4.0.
_PRE_LINEN = ('flax.nn', 'flax.deprecated')
_PRE_LINEN_MESSAGE = ('pre-Linen flax.nn was removed in flax 0.4.0 (flax 0.3.6 had moved it to '
                      'flax.deprecated.nn) and flax_optim_compat does not restore it (it gives back '
                      'flax.optim only): port the model to flax.linen')


def enabled(environ=None) -> bool:
  """Whether the alias is wanted: ``FLAX_OPTIM_COMPAT_ALIAS`` unset or not one of 0/false/no/off."""
  value = (os.environ if environ is None else environ).get(ENV_VAR, '1')
  return value.strip().lower() not in _OFF_VALUES


class _AliasLoader:
  """Loads ``flax.optim[.sub]`` as the already-importable ``flax_optim_compat[.sub]``."""

  def __init__(self, target_name):
    self.target_name = target_name
    self._target_spec = None

  def create_module(self, spec):
    import importlib  # only here: by now flax (and with it importlib) is imported anyway
    module = importlib.import_module(self.target_name)
    self._target_spec = module.__spec__
    return module

  def exec_module(self, module):
    # The import system stamped the alias spec onto the (shared) module object between
    # create_module and here; give it back its own so reload/inspection see the real module.
    module.__spec__ = self._target_spec


def legacy_jax_mode(environ=None) -> str:
  """``FLAX_OPTIM_COMPAT_LEGACY_JAX``: ``'on'`` (1/true/yes/on), ``'off'`` (0/...), else ``'auto'``.

  ``'auto'`` (unset): the legacy jax names come with the first import of ``flax_optim_compat``.
  """
  value = (os.environ if environ is None else environ).get(LEGACY_JAX_ENV_VAR, '')
  value = value.strip().lower()
  return 'on' if value in _ON_VALUES else 'off' if value in _OFF_VALUES else 'auto'


def _flax_getattr(name):
  """PEP 562 hook for the ``flax`` package: ``flax.optim`` without importing it first."""
  legacy = sys.modules.get(_LEGACY_JAX)
  if name == 'nn' and legacy is not None and legacy.is_active():
    import importlib
    return importlib.import_module('flax.nn')  # its functions that flax.linen has
  if name in ('nn', 'deprecated'):
    raise AttributeError(f"module 'flax' has no attribute {name!r}: {_PRE_LINEN_MESSAGE}")
  if name == 'optim':
    import importlib
    try:
      return importlib.import_module(_ALIAS)
    except ModuleNotFoundError as e:
      if e.name != _ALIAS:
        raise
      # e.g. after uninstall(): keep `hasattr(flax, 'optim')` answering False.
      raise AttributeError("module 'flax' has no attribute 'optim'") from e
  raise AttributeError(f"module 'flax' has no attribute {name!r}")


class AliasFinder:
  """A ``sys.meta_path`` finder that only ever answers for ``flax.optim`` and its submodules."""

  # Recognised by this marker, not by class: the module may be imported twice (site-packages
  # and a source tree) and both copies must see each other's finder.
  is_flax_optim_compat_alias = True

  def __init__(self):
    self._patched_flax = False

  def find_spec(self, fullname, path=None, target=None):
    if not fullname.startswith('flax.'):
      return None
    if not self._patched_flax:
      self._patch_flax()
    if fullname in _PRE_LINEN or fullname.startswith(tuple(p + '.' for p in _PRE_LINEN)):
      if _other_finders_spec(fullname, path, target) is not None:
        return None  # an old flax that still has it
      # ImportError, not ModuleNotFoundError: `from flax import nn` swallows the latter and
      # then reports only "cannot import name 'nn'".
      raise ImportError(f'{fullname}: {_PRE_LINEN_MESSAGE}', name=fullname)
    if fullname == _ALIAS:
      if self._someone_else_finds(fullname, path, target):
        return None  # flax ships its own optim: leave it alone
      return self._alias_spec(fullname, _TARGET, is_package=True)
    if fullname.startswith(_ALIAS + '.'):
      parent = sys.modules.get(_ALIAS)
      if parent is None or getattr(parent, '__name__', None) != _TARGET:
        return None  # flax's own optim package (or none at all)
      target_name = _TARGET + fullname[len(_ALIAS):]
      import importlib.util
      try:
        target_spec = importlib.util.find_spec(target_name)
      except ImportError:
        target_spec = None
      if target_spec is None:
        return None  # e.g. flax.optim.nonexistent: the usual ModuleNotFoundError follows
      return self._alias_spec(fullname, target_name,
                              is_package=target_spec.submodule_search_locations is not None)
    return None

  def _patch_flax(self):
    flax = sys.modules.get('flax')
    if flax is None:
      return
    self._patched_flax = True
    # Never replace a __getattr__ flax defines itself (none up to flax 0.12).
    if '__getattr__' not in vars(flax):
      flax.__getattr__ = _flax_getattr

  @staticmethod
  def _someone_else_finds(fullname, path, target):
    return _other_finders_spec(fullname, path, target) is not None

  @staticmethod
  def _alias_spec(fullname, target_name, is_package):
    import importlib.machinery
    return importlib.machinery.ModuleSpec(fullname, _AliasLoader(target_name),
                                          is_package=is_package)


def _is_ours(finder) -> bool:
  return (getattr(finder, 'is_flax_optim_compat_alias', False)
          or getattr(finder, 'is_flax_optim_compat_legacy_jax', False))


def _other_finders_spec(fullname, path, target):
  """The spec the first finder that is not ours gives ``fullname``, or None."""
  for finder in list(sys.meta_path):
    if _is_ours(finder):
      continue
    find_spec = getattr(finder, 'find_spec', None)
    if find_spec is not None:
      spec = find_spec(fullname, path, target)
      if spec is not None:
        return spec
  return None


class _ThenPatch:
  """Wraps a module's loader: executes the module, then hands it to ``after``.

  The module gets its own loader back before it executes, so nothing inside or after it sees
  this wrapper.
  """

  def __init__(self, loader, after):
    self.loader = loader
    self.after = after

  def create_module(self, spec):
    return self.loader.create_module(spec)

  def exec_module(self, module):
    module.__spec__.loader = module.__loader__ = self.loader
    self.loader.exec_module(module)
    self.after(module)


def package_module(name):
  """``flax_optim_compat.<name>`` without importing the package when it is not imported yet.

  For the package's modules that import only the standard library at load: ``_legacy_jax``
  (with ``FLAX_OPTIM_COMPAT_LEGACY_JAX=1`` the names are needed at jax's import, possibly before
  the program imports ``flax.optim``), and what it loads beside it (``_legacy_values``,
  ``_deprecation``). Importing the package there would import flax and optax, and switch the
  flax defaults on. So the module's one file is loaded under its full name; the package, when
  imported later, finds it in ``sys.modules`` (``_on_package`` sets the package attribute the
  import system would have set). None when the package cannot be found.
  """
  full = f'{_TARGET}.{name}'
  module = sys.modules.get(full)
  if module is not None:
    return module
  import importlib
  import importlib.util
  if _TARGET in sys.modules:
    return importlib.import_module(full)
  try:
    package = importlib.util.find_spec(_TARGET)
  except ImportError:
    package = None  # the hook's package cannot be imported here: nothing to give back
  if package is None or not package.submodule_search_locations:
    return None
  path = os.path.join(list(package.submodule_search_locations)[0], f'{name}.py')
  spec = importlib.util.spec_from_file_location(full, path)
  module = importlib.util.module_from_spec(spec)
  sys.modules[full] = module
  try:
    spec.loader.exec_module(module)
  except BaseException:
    del sys.modules[full]
    raise
  return module


def _load_legacy_jax():
  return package_module('_legacy_jax')


# Top-level modules whose source is never read for legacy names: the libraries the table patches
# (they name the old names in their own deprecation tables) and this distribution.
_NOT_READ = frozenset({'jax', 'jaxlib', 'flax', 'optax', 'numpy', 'orbax', _TARGET, __name__})
# Every module of the table lives in one of these packages, so a source naming none of them uses
# none of its names: only a source that does loads the table to be read (tests check the list).
SOURCE_HINTS = (b'jax', b'flax', b'numpy')


def _is_program_file(path) -> bool:
  """Whether ``path`` is a ``.py`` file of the program, not of Python or an installed library."""
  if not isinstance(path, str) or not path.endswith('.py'):
    return False
  parts = path.split(os.sep)
  if 'site-packages' in parts or 'dist-packages' in parts:
    return False
  for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix}:
    if prefix not in ('', os.sep) and path.startswith(prefix + os.sep):
      return False  # the standard library, a venv's bin/ scripts
  return True


def _spec_file(spec):
  if spec.origin not in (None, 'namespace'):
    return spec.origin
  for location in spec.submodule_search_locations or ():
    return os.path.join(location, '__init__.py')  # a namespace package: judged by its folder
  return None


class LegacyJaxFinder:
  """A ``sys.meta_path`` finder that gives the legacy jax names back to the programs that use them.

  Two jobs:

  * **recognise** a legacy program before its code runs: each of the program's own modules (a
    ``.py`` file outside site-packages and Python's own folders; ``__main__``'s file at the first
    import it makes) is read when it is about to be imported, and
    ``_legacy_jax.legacy_use`` looks at its source: ``flax.optim`` turns the names and the flax
    defaults on, a removed name of the table turns the names on. So the names are there for that
    module's first line whatever was imported before, and the first import of
    ``flax_optim_compat`` turns everything on too. For the program's modules this finder returns
    the spec the other finders give (found once, not twice); it never reads a library's source.
  * **patch**: once on, it wraps the specs of ``jax``, its patched submodules and ``flax`` to add
    the names after the module ran, and answers the removed submodules of the table
    (``jax.config``, ``jax.experimental.optimizers``) itself.
  """

  is_flax_optim_compat_legacy_jax = True

  def __init__(self, active=False):
    self.active = active  # the names are on (from the start with FLAX_OPTIM_COMPAT_LEGACY_JAX=1)
    self.defaults = active  # the flax defaults too
    self._legacy = None
    # top-level module name -> whether it is the program's own code (its source is read)
    self._program_tops = dict.fromkeys(_NOT_READ | frozenset(sys.builtin_module_names), False)
    self._read = set()
    self._main_read = False
    self._busy = False

  def find_spec(self, fullname, path=None, target=None):
    if fullname == _TARGET:
      return self._then(fullname, path, target, self._on_package)
    if not self._main_read and not self.defaults and not self._busy:
      # Before anything else: `from jax.config import config` on line 1 asks for `jax` first.
      self._busy = True
      try:
        self._read_main()
      finally:
        self._busy = False
    if self.active and fullname.partition('.')[0] in ('jax', 'flax', 'numpy'):
      legacy = self._legacy_module()
      if legacy is None:
        return None
      if fullname in legacy.PATCHED_MODULES:
        return self._then(fullname, path, target, legacy.after_import)
      return legacy.submodule_spec(fullname)
    if self.defaults or self._busy:
      return None  # nothing left to recognise
    top = fullname.partition('.')[0]
    if self._program_tops.get(top) is False:
      return None  # the common case: a module of a library or of Python
    self._busy = True  # imports made while reading (the table module's) are not read themselves
    try:
      return self._recognise(fullname, top, path, target)
    finally:
      self._busy = False

  def _recognise(self, fullname, top, path, target):
    if self._program_tops.get(top) is False or self.defaults:
      return None
    spec = _other_finders_spec(fullname, path, target)
    if spec is None:
      return None
    if fullname == top:
      self._program_tops[top] = _is_program_file(_spec_file(spec))
    elif top not in self._program_tops:  # imported before this finder was installed
      top_spec = getattr(sys.modules.get(top), '__spec__', None)
      self._program_tops[top] = top_spec is not None and _is_program_file(_spec_file(top_spec))
    if self._program_tops.get(top):
      self._read_source(_spec_file(spec))
    return spec

  def _read_main(self):
    """``__main__``'s own file, read at the first import it makes (before that line finishes)."""
    if self._main_read:
      return
    main = sys.modules.get('__main__')
    path = getattr(main, '__file__', None)
    if path is None:
      return  # still starting up, or `python -c` / interactive: no file to read
    self._main_read = True
    if getattr(main, '__spec__', None) is None and _is_program_file(os.path.abspath(path)):
      self._read_source(os.path.abspath(path))  # `python -m` modules are read at their import

  def _read_source(self, path):
    if path is None or path in self._read:
      return
    self._read.add(path)
    try:
      with open(path, 'rb') as f:
        data = f.read()
    except OSError:
      return
    if not any(hint in data for hint in SOURCE_HINTS):
      return
    legacy = self._legacy_module()
    if legacy is None:
      return
    use = legacy.legacy_use(data.decode('utf-8', 'replace'))
    if use is not None:
      self._turn_on(legacy, defaults=use == 'api')

  def _turn_on(self, legacy, defaults):
    self.active = True
    self.defaults = self.defaults or defaults
    legacy.activate(defaults=self.defaults)

  def _legacy_module(self):
    if self._legacy is None:
      self._legacy = _load_legacy_jax()
      if self._legacy is not None and self.active:
        self._legacy.activate(defaults=self.defaults)
    return self._legacy

  def _on_package(self, package):
    legacy = _load_legacy_jax()
    if legacy is None:
      return
    # Its modules loaded before it from their files (this table, and what it loads beside it:
    # _legacy_values, _deprecation) get the package attribute the import system would have set.
    prefix = f'{_TARGET}.'
    for name, module in list(sys.modules.items()):
      short = name[len(prefix):] if name.startswith(prefix) else ''
      if short and '.' not in short and module is not None and not hasattr(package, short):
        setattr(package, short, module)
    self._legacy = legacy
    self._turn_on(legacy, defaults=True)

  @staticmethod
  def _then(fullname, path, target, after):
    spec = _other_finders_spec(fullname, path, target)
    if spec is None or not hasattr(spec.loader, 'exec_module'):
      return spec
    spec.loader = _ThenPatch(spec.loader, after)
    return spec


def install_legacy_jax(active=False) -> None:
  """Puts a :class:`LegacyJaxFinder` at the front of ``sys.meta_path`` (idempotent).

  Args:
    active: give the names back from now on (``FLAX_OPTIM_COMPAT_LEGACY_JAX=1``), instead of
      from the first import of ``flax_optim_compat``.
  """
  for finder in sys.meta_path:
    if getattr(finder, 'is_flax_optim_compat_legacy_jax', False):
      if active and not getattr(finder, 'defaults', finder.active):
        finder.active = finder.defaults = True
        if getattr(finder, '_legacy', None) is not None:  # pylint: disable=protected-access
          finder._legacy.activate()  # pylint: disable=protected-access
        elif 'jax' in sys.modules or 'flax' in sys.modules:
          finder._legacy_module()  # pylint: disable=protected-access
      return
  finder = LegacyJaxFinder(active=active)
  sys.meta_path.insert(0, finder)
  if active and ('jax' in sys.modules or 'flax' in sys.modules):
    finder._legacy_module()  # pylint: disable=protected-access


def uninstall_legacy_jax() -> None:
  """Removes the finder (names already given back stay)."""
  sys.meta_path[:] = [f for f in sys.meta_path
                      if not getattr(f, 'is_flax_optim_compat_legacy_jax', False)]


def is_installed() -> bool:
  """Whether an :class:`AliasFinder` is in ``sys.meta_path``."""
  return any(getattr(f, 'is_flax_optim_compat_alias', False) for f in sys.meta_path)


def install() -> None:
  """Puts the finder at the front of ``sys.meta_path`` (idempotent)."""
  if not is_installed():
    sys.meta_path.insert(0, AliasFinder())


def uninstall() -> None:
  """Removes the finder (modules already imported as ``flax.optim`` stay in ``sys.modules``)."""
  sys.meta_path[:] = [f for f in sys.meta_path
                    if not getattr(f, 'is_flax_optim_compat_alias', False)]


if enabled():
  install()
if legacy_jax_mode() != 'off':
  install_legacy_jax(active=legacy_jax_mode() == 'on')
