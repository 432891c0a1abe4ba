"""The jax names and flax defaults of flax.optim's time, given back while the legacy API is in use.

Programs written for ``flax.optim`` (flax <= 0.5) also use jax names removed since
(``jax.tree_map``, ``jax.tree_multimap``, ``jax.ops.index_update``, ``jnp.clip(a_max=...)``,
``from jax.config import config``, ...) and rely on flax defaults of the time (``init`` returned a
``FrozenDict``, checkpoints were msgpack files). :data:`NAMES` lists every removed name we give
back, as data: where old code finds it, what it is today, and how it is given back (the
``migrate`` codemod reads the same table to rewrite these names).

Nothing here runs unless the legacy API is in use: the start-up hook
(``_flax_optim_compat_alias``) calls :func:`activate` when ``flax.optim`` or
``flax_optim_compat`` is imported, or when jax is imported with
``FLAX_OPTIM_COMPAT_LEGACY_JAX=1``; ``FLAX_OPTIM_COMPAT_LEGACY_JAX=0`` turns it all off. A name is
given back through the module's ``__getattr__`` (PEP 562), so it is looked up only when normal
attribute lookup fails: a name the installed jax still has is never shadowed, and the value is
today's object itself (``jax.tree_map is jax.tree_util.tree_map``), no wrapper in the call path.
The one exception is ``jnp.clip``, which still exists but no longer takes ``a_min``/``a_max``:
it is wrapped only when today's signature lacks them, and the wrapper only renames those two.
Each name warns once per process, a :class:`FlaxOptimDeprecationWarning` naming its replacement.

This module imports nothing at load time but the standard library: the hook may load it while
jax is being imported, before the rest of the package.

Examples:
  >>> from flax_optim_compat import _legacy_jax
  >>> entry = _legacy_jax.lookup('jax', 'tree_multimap')
  >>> entry.replacement
  'jax.tree_util.tree_map'
  >>> sorted({e.kind for e in _legacy_jax.NAMES})  # doctest: +NORMALIZE_WHITESPACE
  ['alias', 'at', 'config_attribute', 'config_module', 'expression', 'function', 'keywords',
   'module', 'second_argument']
"""
import functools
import importlib
import importlib.machinery
import os
import re
import sys
import types
import warnings
from typing import NamedTuple

__all__ = ['LegacyName', 'NAMES', 'FLAX_DEFAULTS', 'lookup', 'activate', 'is_active',
           'defaults_active', 'legacy_use']


class LegacyName(NamedTuple):
  """One removed name, as data.

  Attributes:
    module: the module old code finds it in (``'jax.numpy'``).
    name: its name there (``'DeviceArray'``); for ``kind='module'``/``'config_module'`` the
      submodule's last component.
    kind: how it is given back (and how the codemod rewrites a use):
      ``'alias'``: the object at ``target`` (a rename);
      ``'function'``: the function ``target`` of ``_legacy_values`` (a few lines of today's jax),
      or the object at a dotted ``target`` (numpy's and jax's names that moved out of their
      library: the codemod does not rewrite them, it marks them FOM299);
      ``'config_attribute'``: the function ``target`` of this module, set on today's ``jax.config``;
      ``'at'``: ``f(x, idx, y)`` is ``x.at[idx].<target>(y)``;
      ``'second_argument'``: ``f(x, y)`` is ``y``;
      ``'expression'``: the function ``target`` of ``_legacy_values``; ``replacement`` is an
      expression of its arguments (by its parameters' names) and of the module the call is on
      (``jnp`` for a ``jax.numpy`` function, ``jax`` for a ``jax`` one), which the codemod
      writes;
      ``'keywords'``: the function at ``target`` with the keywords of ``keywords`` renamed;
      ``'module'``: the submodule is the module at ``target``;
      ``'config_module'``: the submodule holds ``config``, the object at ``target``.
    target: what it is today, a dotted path (or the ``.at`` method for ``'at'``).
    replacement: what the warning tells the user to write instead.
    removed: the release that removed it.
    keywords: ``((old, new), ...)`` for ``kind='keywords'``.
    annotation_only: an ``'alias'`` the codemod rewrites only where it annotates: an
      ``isinstance`` check against the old name matched less than one against ``target``
      (``jax.random.KeyArray`` was the class of typed keys, which a legacy ``PRNGKey`` is not)."""
  module: str
  name: str
  kind: str
  target: str
  replacement: str
  removed: str
  keywords: tuple = ()
  annotation_only: bool = False

  @property
  def qualname(self) -> str:
    return f'{self.module}.{self.name}'


def _tree(name, removed='jax 0.6.0'):
  return LegacyName('jax', name, 'alias', f'jax.tree_util.{name}', f'jax.tree_util.{name}',
                    removed)


def _index(name, method):
  return LegacyName('jax.ops', name, 'at', method, f'x.at[idx].{method}(y)', 'jax 0.3.2')


def _array_type(module, name, removed, annotation_only=False):
  return LegacyName(module, name, 'alias', 'jax.Array', 'jax.Array', removed,
                    annotation_only=annotation_only)


def _numpy(name, target, replacement, removed):
  return LegacyName('numpy', name, 'function', target, replacement, removed)


def _flax_nn(name):
  return LegacyName('flax.nn', name, 'function', f'flax.linen.{name}', f'flax.linen.{name}',
                    'flax 0.4.0')


# Every name found in two or more public programs that used flax.optim (flax's own examples,
# v0.2-v0.5.3), and the removed names of the same family.
NAMES = (
    _tree('tree_map'),
    LegacyName('jax', 'tree_multimap', 'alias', 'jax.tree_util.tree_map',
               'jax.tree_util.tree_map', 'jax 0.3.16'),
    _tree('tree_leaves'),
    _tree('tree_flatten'),
    _tree('tree_unflatten'),
    _tree('tree_structure'),
    _tree('tree_transpose'),
    LegacyName('jax', 'host_id', 'alias', 'jax.process_index', 'jax.process_index()',
               'not yet'),
    LegacyName('jax', 'host_count', 'alias', 'jax.process_count', 'jax.process_count()',
               'not yet'),
    LegacyName('jax', 'host_ids', 'function', 'host_ids', 'range(jax.process_count())',
               'jax 0.4.32'),
    LegacyName('jax.tree_util', 'tree_multimap', 'alias', 'jax.tree_util.tree_map',
               'jax.tree_util.tree_map', 'jax 0.3.16'),
    LegacyName('jax.random', 'shuffle', 'function', 'shuffle',
               'jax.random.permutation(key, x, axis, independent=True)', 'jax 0.4.31'),
    LegacyName('jax.profiler', 'StepTraceContext', 'alias', 'jax.profiler.StepTraceAnnotation',
               'jax.profiler.StepTraceAnnotation', 'a jax after 0.2.12, which renamed it'),
    LegacyName('jax.config', 'enable_omnistaging', 'config_attribute', 'enable_omnistaging',
               'nothing (omnistaging is always on since jax 0.2.12): drop the call',
               'a jax after 0.2.12'),
    _index('index_update', 'set'),
    _index('index_add', 'add'),
    _index('index_mul', 'multiply'),
    _index('index_min', 'min'),
    _index('index_max', 'max'),
    LegacyName('jax.ops', 'index', 'alias', 'jax.numpy.s_', 'jnp.s_ (or plain x.at[...])',
               'jax 0.3.2'),
    LegacyName('jax.numpy', 'clip', 'keywords', 'jax.numpy.clip', 'jnp.clip(x, min=..., max=...)',
               'jax after 0.4.27 deprecated them', (('a_min', 'min'), ('a_max', 'max'))),
    LegacyName('jax.lax', 'tie_in', 'second_argument', '', 'the second argument (tie_in(x, y) returns y)',
               'jax 0.4.29'),
    _array_type('jax.numpy', 'DeviceArray', 'jax 0.4.14'),
    _array_type('jax.interpreters.xla', 'DeviceArray', 'jax 0.4.14'),
    _array_type('jax.random', 'KeyArray', 'jax 0.4.24', annotation_only=True),
    _array_type('jax.random', 'PRNGKeyArray', 'jax 0.4.24', annotation_only=True),
    LegacyName('jax', 'config', 'config_module', 'jax.config', '`import jax` and jax.config',
               'jax 0.4.29'),
    LegacyName('jax.experimental', 'optimizers', 'module', 'jax.example_libraries.optimizers',
               'jax.example_libraries.optimizers (or optax)', 'jax 0.3.16'),
    LegacyName('jax.experimental', 'stax', 'module', 'jax.example_libraries.stax',
               'jax.example_libraries.stax (or flax.linen)', 'jax 0.3.16'),
    LegacyName('jax', 'partial', 'function', 'functools.partial', 'functools.partial',
               'jax 0.2.21'),
    # pmap inputs of the time: input pipelines (jax3d's NeSF, brax's normalization) and replicated
    # embeddings (EditableNeRF) put them on the devices a pmap runs on.
    # The codemod writes the expressions (the same values on the same devices; the sharding a
    # 1-d mesh's, as the runtime layer's: jax 0.4.13's PmapSharding is gone).
    LegacyName('jax', 'device_put_sharded', 'expression', 'device_put_sharded',
               'jax.device_put(jax.tree_util.tree_map(lambda *xs: jax.numpy.stack(xs), *shards), '
               "jax.sharding.NamedSharding(jax.sharding.Mesh(devices, ('i',)), "
               "jax.sharding.PartitionSpec('i')))",
               'a jax after 0.9 (deprecated in 0.8.1)'),
    LegacyName('jax', 'device_put_replicated', 'expression', 'device_put_replicated',
               'jax.device_put(jax.tree_util.tree_map(lambda leaf: jax.numpy.stack([leaf] * '
               "len(devices)), x), jax.sharding.NamedSharding(jax.sharding.Mesh(devices, ('i',)), "
               "jax.sharding.PartitionSpec('i')))",
               'a jax after 0.9 (deprecated in 0.8.1)'),
    # numpy's aliases that corpus programs (or the data code of outside programs) use and that
    # the installed numpy may lack (given back only then): the builtin types of numpy < 1.24,
    # and the numpy 2.0 removals, each the very object it named.
    _numpy('int', 'builtins.int', 'int', 'numpy 1.24'),
    _numpy('float', 'builtins.float', 'float', 'numpy 1.24'),
    _numpy('object', 'builtins.object', 'object', 'numpy 1.24'),
    _numpy('float_', 'numpy.float64', 'np.float64', 'numpy 2.0'),
    _numpy('NaN', 'numpy.nan', 'np.nan', 'numpy 2.0'),
    _numpy('NINF', 'NINF', '-np.inf', 'numpy 2.0'),
    _numpy('product', 'numpy.prod', 'np.prod', 'numpy 2.0'),
    # jnp.fix: RegNeRF's visualisation code (two public copies).
    LegacyName('jax.numpy', 'fix', 'expression', 'fix', 'jnp.trunc(jnp.true_divide(x, True))',
               'a jax after 0.5.1'),
    # Pre-Linen flax.nn's functions that are flax.linen's (flax <= 0.3 re-exported the same jax
    # functions, and linen's pooling is flax.nn's code): NeRF programs register them with gin.
    # flax.nn's module system (Module, Model, Dense, ...) stays refused in one line.
    *(_flax_nn(name) for name in ('relu', 'gelu', 'sigmoid', 'softplus', 'elu', 'tanh',
                                  'leaky_relu', 'log_softmax', 'log_sigmoid', 'initializers',
                                  'max_pool', 'avg_pool')),
    # jax.nn's initializers that flax.linen's layer modules imported into their own namespace
    # until flax 0.6.5 (flax 0.5.3's linear.py: `from flax.linen.initializers import zeros`,
    # the very object jax.nn.initializers.zeros): module fields default to
    # `flax.linen.linear.zeros` (michaelaerni/interpolation_robustness's models/jax.py).
    *(LegacyName(f'flax.linen.{module}', name, 'alias', f'flax.linen.initializers.{name}',
                 f'flax.linen.initializers.{name}', 'flax 0.6.5')
      for module, names in (('linear', ('zeros', 'lecun_normal', 'variance_scaling')),
                            ('attention', ('zeros',)),
                            ('recurrent', ('zeros', 'orthogonal')))
      for name in names),
    # The three functions of jax.lib.xla_bridge that corpus programs call (get_backend in 5
    # files, process_index 3, device_count 1), each today's public function of the same result.
    *(LegacyName('jax.lib.xla_bridge', name, 'function', target, target, 'jax 0.8.0')
      for name, target in (('get_backend', 'jax.extend.backend.get_backend'),
                           ('device_count', 'jax.device_count'),
                           ('process_index', 'jax.process_index'))),
)

# flax config flags set while the legacy API is in use, unless the user set the flag's
# environment variable (FLAX_RETURN_FROZENDICT, ...): (flag, legacy value, why).
FLAX_DEFAULTS = (
    ('flax_return_frozendict', True,
     'model.init returned a FrozenDict until flax 0.7.1: old code calls .unfreeze() on it'),
    ('flax_use_orbax_checkpointing', False,
     'checkpoints.save_checkpoint wrote one msgpack file (relative paths allowed) until flax '
     '0.6.7; orbax writes a directory and refuses relative paths'),
)

_BY_MODULE = {}
for _entry in NAMES:
  _BY_MODULE.setdefault(_entry.module, {})[_entry.name] = _entry
_SUBMODULES = {entry.qualname: entry for entry in NAMES
               if entry.kind in ('module', 'config_module')}
# Removed modules of which only the table's names come back (any other attribute is refused).
PARTIAL_MODULES = frozenset({'flax.nn', 'jax.lib.xla_bridge'})


def _names_of(module):
  return ', '.join(e.name for e in NAMES if e.module == module)


PRE_LINEN_MESSAGE = ('pre-Linen flax.nn was removed in flax 0.4.0 (flax 0.3.6 had moved it to '
                     'flax.deprecated.nn) and flax_optim_compat does not restore it (it gives back '
                     f'flax.optim, and of flax.nn only the functions flax.linen has: '
                     f'{_names_of("flax.nn")}): port the model to flax.linen')
# What a partial module says of any other attribute (at run time, and in migrate's FOM299).
PARTIAL_REFUSALS = {
    'flax.nn': PRE_LINEN_MESSAGE,
    'jax.lib.xla_bridge': ('jax 0.8.0 removed jax.lib.xla_bridge; flax_optim_compat gives back '
                           f'only its {_names_of("jax.lib.xla_bridge")} (jax.devices(), '
                           'jax.default_backend() and jax.extend.backend have the rest)'),
}
# Modules whose attributes we add: patched when they finish executing, or at activate().
PATCHED_MODULES = (frozenset(_BY_MODULE) - {'jax.config'} - PARTIAL_MODULES) | {'flax'}

# 'active': the names are given back; 'defaults': the flax defaults are set too (the legacy
# API itself is in use, not only a removed name).
_state = {'active': False, 'defaults': False}
_warned = set()
_values = {}
_MARK = '_flax_optim_compat_legacy_names'
_DEFAULTS_MARK = '_flax_optim_compat_legacy_defaults'


def lookup(module: str, name: str) -> LegacyName | None:
  """The table entry for ``module.name``, or None."""
  return _BY_MODULE.get(module, {}).get(name)


def is_active() -> bool:
  """Whether :func:`activate` ran in this process."""
  return _state['active']


def defaults_active() -> bool:
  """Whether the flax defaults are set (:func:`activate` ran with ``defaults=True``)."""
  return _state['defaults']


# --- recognising a legacy module from its source -------------------------------------------

# Local names old code gave a table module besides its last component (``import jax.numpy as
# jnp``; ``import jax.numpy as np`` was common in 2020). ``jax.random``'s last component is left
# out: ``random.shuffle`` is the standard library's.
_LOCAL_NAMES = {'jax.numpy': ('jnp', 'np', 'numpy'), 'numpy': ('np', 'onp', 'numpy'),
                'jax.random': ('jrandom',), 'flax.nn': ()}  # `nn.relu` is linen's today
# A string literal (kept) or a comment (dropped): one left-to-right scan, so a `#` inside a string
# is not a comment and a quote inside a comment (`# jax's`) does not start a string.
_COMMENT = re.compile(r'("""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\')'
                      r'|#[^\n]*')
_FROM_IMPORT = re.compile(r'^[ \t]*from[ \t]+([\w.]+)[ \t]+import[ \t]+(\([^)]*\)|[^\n#;]*)', re.M)
_IMPORT = re.compile(r'^[ \t]*import[ \t]+([^\n#;]*)', re.M)
_CHAIN = re.compile(r'[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+')
_API = 'flax.optim'


def _chain_keys():
  keys = set()
  for entry in NAMES:
    if entry.kind in ('keywords', 'module', 'config_module') or entry.removed == 'not yet':
      # `np.clip(a_max=)` is still numpy's; modules are recognised by their imports; a name
      # the installed jax still has needs nothing.
      continue
    keys.add(entry.qualname)
    last = entry.module.rpartition('.')[2]
    for local in _LOCAL_NAMES.get(entry.module, (last,)):
      keys.add(f'{local}.{entry.name}')
  return frozenset(keys)


_CHAIN_KEYS = _chain_keys()


def _imported(statement: str):
  """The dotted names of ``import a.b as c, d``."""
  for part in statement.split(','):
    name = part.split()[0] if part.split() else ''
    if name:
      yield name


def legacy_use(source: str) -> str | None:
  r"""What a module's source shows of the legacy era, before it runs.

  Returns ``'api'`` when it uses ``flax.optim`` (``from flax import optim``, ``import
  flax.optim``, ``flax.optim.Adam``), ``'names'`` when it uses a removed name of :data:`NAMES`
  (``jax.tree_multimap``, ``jnp.DeviceArray``, ``from jax.config import config``, ...), else
  None. Comments are ignored; it reads text, so a name in a string counts too.

  Examples:
    >>> from flax_optim_compat._legacy_jax import legacy_use
    >>> legacy_use('from flax import linen as nn, optim\n')
    'api'
    >>> legacy_use('def f(x: jax.interpreters.xla.DeviceArray): ...\n')
    'names'
    >>> legacy_use("import jax\nx = jax.tree_util.tree_map(f, t)  # not jax's jax.tree_map\n") is None
    True"""
  source = _COMMENT.sub(lambda m: m.group(1) or '', source)
  found = None
  for module, names in _FROM_IMPORT.findall(source):
    names = [n.split()[0] for n in names.strip('()').replace('\n', ' ').split(',') if n.split()]
    if (module == 'flax' and 'optim' in names) or module == _API or module.startswith(_API + '.'):
      return 'api'
    if (module in _SUBMODULES or module in PARTIAL_MODULES or any(lookup(module, n) for n in names)
        or any(f'{module}.{n}' in PARTIAL_MODULES for n in names)):
      found = 'names'
  for statement in _IMPORT.findall(source):
    for name in _imported(statement):
      if name == _API or name.startswith(_API + '.'):
        return 'api'
      if any(name == m or name.startswith(m + '.') for m in (*_SUBMODULES, *PARTIAL_MODULES)):
        found = 'names'
  for chain in _CHAIN.findall(source):
    if chain.startswith(_API + '.'):
      return 'api'
    if found is None:
      parts = chain.split('.')
      if any('.'.join(parts[i:j]) in _CHAIN_KEYS
             for i in range(len(parts)) for j in range(i + 2, len(parts) + 1)):
        found = 'names'
  return found


# --- warnings ------------------------------------------------------------------------------

def _is_internal(frame) -> bool:
  name = frame.f_globals.get('__name__', '')
  return (name in (__name__, '_flax_optim_compat_alias')
          or frame.f_code.co_filename.startswith('<frozen importlib'))


def _warn_once(entry: LegacyName) -> None:
  if entry.qualname in _warned:
    return
  _warned.add(entry.qualname)
  # Not through the package: importing it (flax, optax) would switch the flax defaults on.
  category = _sibling('_deprecation').FlaxOptimDeprecationWarning
  frame, level = sys._getframe(0), 1  # pylint: disable=protected-access
  while frame is not None and _is_internal(frame):
    # `warnings` itself skips importlib's frames when it counts the stack level.
    if not frame.f_code.co_filename.startswith('<frozen importlib'):
      level += 1
    frame = frame.f_back
  if entry.kind == 'keywords':
    what = f'the {"/".join(old for old, _ in entry.keywords)} keywords of {entry.qualname}'
  elif entry.kind in ('module', 'config_module'):
    what = f'the {entry.qualname} module'
  else:
    what = entry.qualname
  verb = 'were' if entry.kind == 'keywords' else 'was'
  when = 'is deprecated' if entry.removed == 'not yet' else f'{verb} removed in {entry.removed}'
  warnings.warn(f'{what} {when}; flax_optim_compat gives it back while the legacy flax.optim '
                f'API is in use. Use {entry.replacement} instead.',
                category, stacklevel=level)


# --- the values ----------------------------------------------------------------------------

def _resolve(path: str):
  module_name, _, attr = path.rpartition('.')
  return getattr(importlib.import_module(module_name), attr)


def enable_omnistaging():
  """Legacy ``jax.config.enable_omnistaging()``: nothing to do, omnistaging is always on."""
  _warn_once(lookup('jax.config', 'enable_omnistaging'))


def _at_function(entry: LegacyName):
  def index_op(x, idx, y, indices_are_sorted=False, unique_indices=False):
    import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
    return getattr(jnp.asarray(x).at[idx], entry.target)(
        y, indices_are_sorted=indices_are_sorted, unique_indices=unique_indices)
  index_op.__name__ = index_op.__qualname__ = entry.name
  index_op.__doc__ = f'Legacy ``{entry.qualname}``: ``{entry.replacement}``.'
  return index_op


def _sibling(name: str) -> types.ModuleType:
  """The package's module ``name`` (one that imports only the standard library at load, as this
  one), without importing the package when it is not imported yet: importing it would import
  flax and optax and switch the flax defaults on, in a program that only uses a removed name.
  Then the start-up hook loaded this module from its file, and it loads ``name`` the same way
  (``_flax_optim_compat_alias.package_module``)."""
  package = __name__.rpartition('.')[0]
  hook = sys.modules.get('_flax_optim_compat_alias')
  if package in sys.modules or hook is None or not hasattr(hook, 'package_module'):
    return importlib.import_module(f'{package}.{name}')
  return hook.package_module(name)


def _value(entry: LegacyName):
  if entry.qualname not in _values:
    if entry.kind == 'at':
      value = _at_function(entry)
    elif entry.kind == 'second_argument':
      value = _sibling('_legacy_values').tie_in
    elif entry.kind == 'module':
      value = importlib.import_module(entry.target)
    elif entry.kind in ('function', 'expression') and '.' not in entry.target:
      value = getattr(_sibling('_legacy_values'), entry.target)  # computed by today's jax
    elif entry.kind == 'config_attribute':
      value = globals()[entry.target]  # a function of this module
    else:
      value = _resolve(entry.target)
    _values[entry.qualname] = value
  return _values[entry.qualname]


def _module_getattr(module: types.ModuleType, names: dict):
  """A PEP 562 ``__getattr__`` for ``module`` answering ``names``, else the module's own."""
  previous = module.__dict__.get('__getattr__')

  def __getattr__(name):  # pylint: disable=invalid-name
    entry = names.get(name)
    if entry is not None:
      _warn_once(entry)
      return _value(entry)
    if previous is not None:
      return previous(name)
    raise AttributeError(f'module {module.__name__!r} has no attribute {name!r}')

  return __getattr__


def _still_has(module: types.ModuleType, name: str) -> bool:
  with warnings.catch_warnings():
    warnings.simplefilter('ignore')  # jax's own deprecation getattr warns on a lookup
    return hasattr(module, name)


def _rejects_keywords(function, keywords) -> bool:
  import inspect  # pylint: disable=import-outside-toplevel  (only when a table function is wrapped)
  try:
    params = inspect.signature(function).parameters
  except (TypeError, ValueError):
    return False
  if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
    return False
  return any(old not in params for old, _ in keywords)


def _keywords_wrapper(function, entry: LegacyName):
  renames = dict(entry.keywords)

  @functools.wraps(function)
  def wrapper(*args, **kwargs):
    if renames.keys() & kwargs.keys():
      _warn_once(entry)
      for old, new in renames.items():
        if old in kwargs:
          if new in kwargs:
            raise TypeError(f'{entry.qualname}() got both {old!r} and {new!r}')
          kwargs[new] = kwargs.pop(old)
    return function(*args, **kwargs)

  wrapper.__flax_optim_compat_wraps__ = function
  return wrapper


def _patch_flax(flax) -> None:
  config = getattr(flax, 'config', None)
  for flag, value, _ in FLAX_DEFAULTS:
    if flag.upper() in os.environ or not hasattr(config, flag):
      continue  # the user chose, or this flax has no such flag
    config.update(flag, value)


# --- the era's pickles ------------------------------------------------------------------------

# jax 0.4.x pickled an array as `jax._src.array._reconstruct_array(fun, args, arr_state,
# aval_state)`; the pickle names that function by its path, so it is the one place to adapt.
_ARRAY_MODULE, _RECONSTRUCT = 'jax._src.array', '_reconstruct_array'


def _avals_take_named_shape() -> bool:
  try:
    sys.modules.get('jax._src.core').ShapedArray((), 'float32').update(named_shape={})
  except TypeError:
    return False
  except Exception:  # pylint: disable=broad-except  (another jax: leave its pickles alone)
    pass
  return True


def _tolerant_reconstruct(reconstruct):
  """Today's reconstructor, taking the ``named_shape`` that jax 0.4.x arrays were pickled with.

  Named shapes only ever held the named axes of a value being traced (``xmap``); an array that
  was pickled, hence concrete, had ``{}``, which today's jax means by having none. A non-empty
  one cannot be a stored array's, and is refused in one line."""

  @functools.wraps(reconstruct)
  def _reconstruct_array(fun, args, arr_state, aval_state):
    if 'named_shape' in aval_state:
      if aval_state['named_shape']:
        raise ValueError(f'cannot unpickle a jax array with named axes '
                         f'{dict(aval_state["named_shape"])!r}: only traced values had them, '
                         'and jax no longer has named shapes')
      aval_state = {k: v for k, v in aval_state.items() if k != 'named_shape'}
    return reconstruct(fun, args, arr_state, aval_state)

  _reconstruct_array.__flax_optim_compat_wraps__ = reconstruct
  return _reconstruct_array


def _patch_pickles() -> None:
  """Arrays pickled by jax 0.4.x load, when today's avals lack their ``named_shape``."""
  module = sys.modules.get(_ARRAY_MODULE)
  reconstruct = getattr(module, _RECONSTRUCT, None)
  if (reconstruct is None or hasattr(reconstruct, '__flax_optim_compat_wraps__')
      or _avals_take_named_shape()):
    return
  setattr(module, _RECONSTRUCT, _tolerant_reconstruct(reconstruct))


def _patch_config(config) -> None:
  """Today's ``jax.config`` object gets the methods old code calls on it that it lost."""
  for entry in _BY_MODULE.get('jax.config', {}).values():
    if not _still_has(config, entry.name):
      setattr(config, entry.name, _value(entry))


def _patch(module: types.ModuleType) -> None:
  """Gives ``module`` the names of the table it misses (once; idempotent)."""
  if not _state['active']:
    return
  if module.__name__ == 'flax':
    if _state['defaults'] and not module.__dict__.get(_DEFAULTS_MARK):
      module.__dict__[_DEFAULTS_MARK] = True
      _patch_flax(module)
    return
  if module.__dict__.get(_MARK):
    return
  module.__dict__[_MARK] = True
  if module.__name__ == 'jax':
    _patch_config(module.config)
    _patch_pickles()
  missing = {}
  for name, entry in _BY_MODULE.get(module.__name__, {}).items():
    if entry.kind == 'keywords':
      function = module.__dict__.get(name)
      if function is not None and _rejects_keywords(function, entry.keywords):
        setattr(module, name, _keywords_wrapper(function, entry))
    elif not _still_has(module, name):
      if entry.kind not in ('module', 'config_module') or _other_spec(entry.qualname) is None:
        missing[name] = entry  # e.g. `jax.experimental.optimizers` without importing it
  if missing:
    module.__getattr__ = _module_getattr(module, missing)


def after_import(module: types.ModuleType) -> None:
  """Called by the start-up hook when a module of :data:`PATCHED_MODULES` finished executing."""
  if _state['active']:
    _patch(module)


def activate(defaults: bool = True) -> None:
  """Gives back the removed names in every loaded module, and from now on in later ones.

  Modules imported later are patched by the start-up hook (``_flax_optim_compat_alias``), which
  calls :func:`after_import`. Idempotent.

  Args:
    defaults: also set the flax defaults of :data:`FLAX_DEFAULTS` (the legacy API is in use).
      The hook passes False when a module's source only uses a removed name: such a program
      gets the names, and the flax defaults only once it imports ``flax.optim``."""
  _state['active'] = True
  _state['defaults'] = _state['defaults'] or defaults
  for name in PATCHED_MODULES:
    module = sys.modules.get(name)
    # A module still executing is patched when it has finished (`after_import`).
    if module is not None and not getattr(module.__spec__, '_initializing', False):
      _patch(module)


# --- removed submodules (`from jax.config import config`, `jax.experimental.optimizers`) -------

def _other_spec(fullname):
  """The spec any other finder has for ``fullname`` (the installed jax still has it), or None."""
  for finder in list(sys.meta_path):
    if (getattr(finder, 'is_flax_optim_compat_legacy_jax', False)
        or getattr(finder, 'is_flax_optim_compat_alias', False)):
      continue  # ours (the alias refuses flax.nn while the names are off)
    find_spec = getattr(finder, 'find_spec', None)
    if find_spec is None:
      continue
    parent = sys.modules.get(fullname.rpartition('.')[0])
    spec = find_spec(fullname, getattr(parent, '__path__', None), None)
    if spec is not None:
      return spec
  return None


class _ConfigModule(types.ModuleType):
  """Legacy ``jax.config``: a module whose ``config`` is today's ``jax.config`` object.

  Importing ``jax.config`` makes this module the ``config`` attribute of ``jax`` (the import
  system sets it), so every other attribute reads through to the config object:
  ``jax.config.update(...)`` and ``jax.config.jax_enable_x64`` keep working."""

  def __init__(self, name, config):
    super().__init__(name, 'Legacy jax.config, given back by flax_optim_compat.')
    self.__dict__['_config'] = config

  def __getattr__(self, name):
    config = self.__dict__['_config']
    if name == 'config':
      _warn_once(_SUBMODULES['jax.config'])
      return config
    return getattr(config, name)


class _SubmoduleLoader:
  """Loads a removed submodule: one of :data:`NAMES` (``kind='module'`` or ``'config_module'``),
  or, given no entry, one of :data:`PARTIAL_MODULES`."""

  def __init__(self, entry: LegacyName | None):
    self.entry = entry
    self._target_spec = None

  def create_module(self, spec):
    if self.entry is None:
      return _PartialModule(spec.name, f'Legacy {spec.name} in part, from flax_optim_compat.')
    if self.entry.kind == 'config_module':
      return _ConfigModule(spec.name, sys.modules['jax'].config)
    _warn_once(self.entry)
    module = _value(self.entry)
    self._target_spec = module.__spec__
    return module

  def exec_module(self, module):
    if self._target_spec is not None:
      # the module of its new home: its own spec back (the import system stamped ours on it)
      module.__spec__ = self._target_spec


class _PartialModule(types.ModuleType):
  """A removed module of :data:`PARTIAL_MODULES`: the table's names, every other one refused."""

  def __getattr__(self, name):
    entry = lookup(self.__name__, name)
    if entry is None:
      if name.startswith('__'):
        raise AttributeError(name)
      raise AttributeError(f'module {self.__name__!r} has no attribute {name!r}: '
                           f'{PARTIAL_REFUSALS[self.__name__]}')
    _warn_once(entry)
    return _value(entry)


def submodule_spec(fullname: str):
  """A spec for a removed submodule old code imports, or None (also when jax still has it)."""
  if fullname in PARTIAL_MODULES and _state['active'] and _other_spec(fullname) is None:
    return importlib.machinery.ModuleSpec(fullname, _SubmoduleLoader(None))
  entry = _SUBMODULES.get(fullname)
  if entry is None or not _state['active'] or _other_spec(fullname) is not None:
    return None
  return importlib.machinery.ModuleSpec(fullname, _SubmoduleLoader(entry))
