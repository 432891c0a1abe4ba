"""The jax names that programs of the flax.optim era use and today's jax removed: one table.

Each entry says what a removed name was and what replaces it, as data. Two readers share it:
the runtime layer that gives old programs those names back, and ``migrate``'s rules FOM201-
FOM208, which rewrite the names in the program's source so that it runs on plain jax. A name
added here is restored and rewritten alike.

The kinds (what ``replacement`` means):

* ``ALIAS``: the same object under another fully qualified name (``jax.tree_map`` is
  ``jax.tree_util.tree_map``; ``jax.host_id`` is ``jax.process_index``; the array types are
  ``jax.Array``).
* ``ANNOTATION``: like ``ALIAS``, but only where the name annotates: an ``isinstance`` check
  against it meant something narrower than the replacement (``jax.random.KeyArray`` was the
  class of typed keys, which a legacy ``PRNGKey`` is not; ``pxla.ShardedDeviceArray`` the class
  of ``pmap`` outputs only).
* ``MODULE``: a module that moved: every name under it moved with it
  (``jax.experimental.optimizers`` -> ``jax.example_libraries.optimizers``).
* ``INDEX_OP``: ``name(x, idx, y, **kw)`` is ``x.at[idx].<replacement>(y, **kw)`` (jax
  implemented both as the same scatter); ``idx`` was written ``jax.ops.index[...]``.
* ``INDEX``: ``jax.ops.index`` was NumPy's ``index_exp``: ``jax.ops.index[i]`` is ``i`` inside
  ``.at[...]``.
* ``TIE_IN``: ``name(x, y)`` returned ``y`` (a no-op since jax's omnistaging, 0.2.0).
* ``KEYWORDS``: the function stays, some keywords were renamed: ``keywords`` maps each old
  keyword to the new one, or to ``''`` for one that is now positional only (``jnp.clip(a=x,
  a_min=lo, a_max=hi)`` is ``jnp.clip(x, min=lo, max=hi)``; ``min``/``max`` exist since jax
  0.4.27, below this package's jax floor, and ``a_min``/``a_max`` are gone from today's jax).
"""
from typing import NamedTuple, Tuple

ALIAS = 'alias'
ANNOTATION = 'annotation'
MODULE = 'module'
INDEX_OP = 'index_op'
INDEX = 'index'
TIE_IN = 'tie_in'
KEYWORDS = 'keywords'


class RemovedName(NamedTuple):
  """One removed name: what replaces it, how (its kind), and the migrate rule's code."""
  name: str                  # fully qualified, as the program's imports resolve it
  replacement: str           # fully qualified (ALIAS, ANNOTATION, MODULE), a method name
                             # (INDEX_OP), '' (TIE_IN)
  kind: str
  code: str                  # the migrate rule that rewrites it (FOM2xx)
  keywords: Tuple[Tuple[str, str], ...] = ()   # KEYWORDS: (old keyword, new keyword or '')


def _tree(name: str, new: str = '') -> RemovedName:
  return RemovedName(f'jax.{name}', f'jax.tree_util.{new or name}', ALIAS, 'FOM201')


def _index_op(op: str) -> RemovedName:
  return RemovedName(f'jax.ops.index_{op}', {'update': 'set'}.get(op, op), INDEX_OP, 'FOM203')


TABLE: Tuple[RemovedName, ...] = (
    _tree('tree_map'), _tree('tree_multimap', 'tree_map'), _tree('tree_leaves'),
    _tree('tree_flatten'), _tree('tree_unflatten'), _tree('tree_structure'),
    _tree('tree_transpose'),
    RemovedName('jax.tree_util.tree_multimap', 'jax.tree_util.tree_map', ALIAS, 'FOM201'),
    RemovedName('jax.host_id', 'jax.process_index', ALIAS, 'FOM202'),
    RemovedName('jax.host_count', 'jax.process_count', ALIAS, 'FOM202'),
    _index_op('update'), _index_op('add'), _index_op('mul'), _index_op('min'), _index_op('max'),
    RemovedName('jax.ops.index', 'numpy.index_exp', INDEX, 'FOM203'),
    RemovedName('jax.numpy.clip', 'jax.numpy.clip', KEYWORDS, 'FOM204',
                (('a', ''), ('a_min', 'min'), ('a_max', 'max'))),
    RemovedName('jax.lax.tie_in', '', TIE_IN, 'FOM205'),
    RemovedName('jax.numpy.DeviceArray', 'jax.Array', ALIAS, 'FOM206'),
    RemovedName('jax.interpreters.xla.DeviceArray', 'jax.Array', ALIAS, 'FOM206'),
    RemovedName('jax.interpreters.pxla.ShardedDeviceArray', 'jax.Array', ANNOTATION, 'FOM206'),
    RemovedName('jax.random.KeyArray', 'jax.Array', ANNOTATION, 'FOM206'),
    # `from jax.config import config`: the module jax.config is gone, its object is jax.config.
    RemovedName('jax.config.config', 'jax.config', ALIAS, 'FOM207'),
    RemovedName('jax.experimental.optimizers', 'jax.example_libraries.optimizers', MODULE,
                'FOM208'),
    RemovedName('jax.experimental.stax', 'jax.example_libraries.stax', MODULE, 'FOM208'),
)

BY_NAME = {entry.name: entry for entry in TABLE}


def module_entry(name: str):
  """The MODULE entry ``name`` is (or lies under), else None."""
  for entry in TABLE:
    if entry.kind == MODULE and (name == entry.name or name.startswith(entry.name + '.')):
      return entry
  return None
