"""Which optimizer wrote a checkpoint: the per-parameter state layouts of legacy optimizers.

A legacy checkpoint stores, for every parameter, the fields of its optimizer's per-parameter
state dataclass (``_AdamParamState`` -> ``{'grad_ema', 'grad_sq_ema'}``); those field names are
all a file says about the optimizer that wrote it. This module holds the one table from field
names to optimizer names and the functions that name a leaf state or a whole ``param_states``
tree. It imports nothing from the package: the package's ``__init__`` registers its classes
with :func:`register_classes`, in an explicit order; the layouts of older flax versions that
no class of ours writes are literal data here.

Optimizers with the same fields cannot be told apart from a file (Adam, AdaBelief and LAMB;
Momentum and LARS): their names are joined in registration order ('Adam, AdaBelief or LAMB').
"""
from typing import Any, Dict, Iterable, List, Optional, Tuple

__all__ = ['register', 'register_classes', 'optimizer_names', 'known_layouts', 'name_leaf_state',
           'name_param_states', 'group_param_states', 'is_per_group_multi_state', 'UNOPTIMIZED']

# The name of a leaf whose state is None: not optimized (MultiOptimizer / `create(focus=...)`).
UNOPTIMIZED = 'None'

# fields -> optimizer names, in registration order.
_REGISTERED: Dict[frozenset, List[str]] = {}
# fields -> (wrapper name, the field holding the wrapped optimizer's leaf state).
_WRAPPERS: Dict[frozenset, Tuple[str, str]] = {}
# Every registered class name, in registration order.
_NAMES: List[str] = []

# Layouts of older flax versions, recognised for messages and `inspect` (no class writes them).
HISTORICAL = (
    (frozenset({'v'}), 'RMSProp from flax <= 0.2.2 (before the `mg` field)'),
    (frozenset({'direction_state', 'scale_state', 'mult'}),
     'WeightNorm from flax < 0.4.0 (field `mult`; its layout and numerics changed in 0.4.0)'),
)


def register(name: str, fields: Iterable[str], wraps: Optional[str] = None) -> None:
  """Records that optimizer ``name`` writes per-parameter states with keys ``fields``.

  Args:
    name: the optimizer's legacy class name, e.g. ``'Adam'``.
    fields: the field names of its per-parameter state (``()`` for GradientDescent).
    wraps: for a wrapper such as WeightNorm, the field holding the wrapped optimizer's own
      per-parameter state (named recursively: ``'WeightNorm(Momentum or LARS)'``).

  Registering the same name and fields again changes nothing.
  """
  fields = frozenset(fields)
  if wraps is not None and wraps not in fields:  # checked before anything is recorded
    raise ValueError(f'register({name!r}): wraps={wraps!r} is not one of its fields '
                     f'{sorted(fields)}.')
  if name not in _NAMES:
    _NAMES.append(name)
  if wraps is not None:
    _WRAPPERS[fields] = (name, wraps)
    return
  names = _REGISTERED.setdefault(fields, [])
  if name not in names:
    names.append(name)


def register_classes(optimizers: Iterable[Any], wrappers: Iterable[Any] = ()) -> None:
  """Registers classes by their ``checkpoint_fields()``, in the order given; a wrapper's
  ``wrapped_state_field`` holds the wrapped optimizer's leaf state (WeightNorm)."""
  for cls in optimizers:
    register(cls.__name__, cls.checkpoint_fields())
  for cls in wrappers:
    register(cls.__name__, cls.checkpoint_fields(), wraps=cls.wrapped_state_field)


def optimizer_names() -> Tuple[str, ...]:
  """The registered class names, in order: ``('GradientDescent', ..., 'WeightNorm')``."""
  return tuple(_NAMES)


def _join_names(names: List[str]) -> str:
  return names[0] if len(names) == 1 else ', '.join(names[:-1]) + ' or ' + names[-1]


def known_layouts() -> Tuple[Tuple[frozenset, str], ...]:
  """``((fields, name), ...)``: every registered layout, then the historical ones."""
  registered = tuple((fields, _join_names(names)) for fields, names in _REGISTERED.items())
  wrappers = tuple((fields, f'{name}(...)') for fields, (name, _) in _WRAPPERS.items())
  return registered + wrappers + HISTORICAL


def name_leaf_state(state: Any) -> Optional[str]:
  """The optimizer that writes per-parameter state ``state`` (a state-dict node), or None.

  ``None`` (an unoptimized leaf) is named :data:`UNOPTIMIZED`; an unknown layout gives None.
  """
  if state is None:
    return UNOPTIMIZED
  if not isinstance(state, dict):
    return None
  keys = frozenset(state)
  if keys in _WRAPPERS:
    name, field = _WRAPPERS[keys]
    return f'{name}({name_leaf_state(state[field]) or "?"})'
  if keys in _REGISTERED:
    return _join_names(_REGISTERED[keys])
  return dict(HISTORICAL).get(keys)


def _param_paths(target: Any, path: Tuple[str, ...] = ()) -> List[Tuple[str, ...]]:
  """The paths of the leaves of a target state dict (sorted keys). An empty dict is a module
  without params (flax 0.5.3 writes `'Dropout_0': {}`), not a param."""
  if isinstance(target, dict):
    return [p for k in sorted(target, key=str) for p in _param_paths(target[k], path + (k,))]
  return [path]


def _lookup(tree: Any, path: Tuple[str, ...]) -> Tuple[bool, Any]:
  for key in path:
    if not isinstance(tree, dict) or key not in tree:
      return False, None
    tree = tree[key]
  return True, tree


def group_param_states(target: Any,
                       param_states: Any) -> Optional[List[Tuple[str, List[Tuple[str, ...]]]]]:
  """``[(name, [param path, ...]), ...]``: the params grouped by the optimizer of their state.

  Groups come in the order of their first param (sorted paths); unoptimized params form the
  group :data:`UNOPTIMIZED`. None if a param has no state or an unknown one.

  Args:
    target: the ``target`` state dict (nested dicts of arrays).
    param_states: the ``state/param_states`` state dict, mirroring ``target``.
  """
  groups: Dict[str, List[Tuple[str, ...]]] = {}
  for path in _param_paths(target):
    found, node = _lookup(param_states, path)
    name = name_leaf_state(node) if found else None
    if name is None:
      return None
    groups.setdefault(name, []).append(path)
  return list(groups.items())


def name_param_states(target: Any, param_states: Any) -> Optional[str]:
  """One name for a whole ``param_states`` tree: 'Adam, AdaBelief or LAMB', 'MultiOptimizer ...'.

  None if a param has no recognisable state, or if no param is optimized.
  """
  groups = group_param_states(target, param_states)
  if groups is None:
    return None
  real = [name for name, _ in groups if name != UNOPTIMIZED]
  if not real:
    return None
  if len(groups) == 1:
    return real[0]
  unoptimized = len(real) < len(groups)
  return ('MultiOptimizer (or create(focus=...)) over ' + ' and '.join(f'({g})' for g in real)
          + (' with unoptimized (None) leaves' if unoptimized else ''))


def is_per_group_multi_state(state: Any) -> bool:
  """Whether ``state`` has the MultiOptimizer layout of flax < 0.3.3.

  That layout keeps one ``{'step', 'param_states'}`` per sub-optimizer under keys '0', '1', ...
  (each group its own step); flax >= 0.3.3 cannot restore it.
  """
  return (isinstance(state, dict) and bool(state)
          and all(str(k).isdigit() and isinstance(v, dict) and 'step' in v
                  for k, v in state.items()))
