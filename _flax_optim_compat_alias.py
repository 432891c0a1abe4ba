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
tree without being installed.
"""
import os
import sys

__all__ = ['ENV_VAR', 'enabled', 'install', 'uninstall', 'is_installed']

ENV_VAR = 'FLAX_OPTIM_COMPAT_ALIAS'
_ALIAS = 'flax.optim'
_TARGET = 'flax_optim_compat'
_OFF_VALUES = ('0', 'false', 'no', 'off')


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


def _flax_getattr(name):
  """PEP 562 hook for the ``flax`` package: ``flax.optim`` without importing it first."""
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

  def _someone_else_finds(self, fullname, path, target):
    for finder in list(sys.meta_path):
      if getattr(finder, 'is_flax_optim_compat_alias', False):
        continue
      find_spec = getattr(finder, 'find_spec', None)
      if find_spec is not None and find_spec(fullname, path, target) is not None:
        return True
    return False

  @staticmethod
  def _alias_spec(fullname, target_name, is_package):
    import importlib.machinery
    return importlib.machinery.ModuleSpec(fullname, _AliasLoader(target_name),
                                          is_package=is_package)


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
