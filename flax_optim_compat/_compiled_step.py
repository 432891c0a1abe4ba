"""Eager ``apply_gradient`` of built-in optimizers through a cached compiled step.

Un-jitted, a step of an optax-backed optimizer runs op by op: the legacy-state translation
and every optax operation dispatch one small computation per leaf, so an eager step costs
several times a legacy flax 0.5.3 step. Their math is pure jax, so an un-traced call can run
the def's own step compiled instead: :func:`apply_gradient` keeps one ``jax.jit`` of it per

* the step function (the def's bound ``apply_gradient``, so the def itself, by identity),
* the tree structures of hyper-params, params, state and grads (``jax.jit``'s own cache
  adds every leaf's shape and dtype: a new shape retraces inside the same entry),
* the static parts of the hyper-params: Python bools, ints, strings, callables (schedules),
  dtypes, float zeros (``weight_decay=0.0`` removes a term from the transform) and floats
  equal to the def's own value (its construction-time constants keep their Python-float
  arithmetic, so an un-overridden step computes exactly what the un-cached step computes),

and passes the other hyper-parameter values (overrides: floats, NumPy and jax arrays) as
arguments, so a new learning rate every step does not recompile.

Only un-traced inputs of defs that declare ``pure_jax_step`` (the built-ins, and
``WeightNorm`` / ``MultiOptimizer`` made of them) take this path: a user's per-leaf
``OptimizerDef`` may branch in Python on values and keeps running eagerly, as does anything
whose trace turns out to need concrete values. Errors (grads that do not match the target, a
missing learning rate) come from the def's own checks, which run while the step is traced,
before anything is computed.
"""
import collections
import math
import threading
from typing import Any

import jax
import numpy as np

__all__ = ['apply_gradient', 'cache_info', 'cache_clear', 'MAX_ENTRIES']

MAX_ENTRIES = 64  # compiled steps kept (least recently used dropped first)

# Errors that mean "this step needs concrete values": run it un-compiled instead.
_NEEDS_CONCRETE = (jax.errors.ConcretizationTypeError, jax.errors.TracerBoolConversionError,
                   jax.errors.TracerIntegerConversionError, jax.errors.TracerArrayConversionError)

_EAGER = object()  # cache value: this key runs un-compiled


class _Dynamic:
  """Key stand-in for a hyper-parameter passed as an argument (its kind, not its value)."""
  __slots__ = ('kind',)

  def __init__(self, kind):
    self.kind = kind

  def __eq__(self, other):
    return isinstance(other, _Dynamic) and self.kind == other.kind

  def __hash__(self):
    return hash(('_Dynamic', self.kind))


_lock = threading.Lock()
_cache: 'collections.OrderedDict[Any, Any]' = collections.OrderedDict()
_stats = {'hits': 0, 'misses': 0, 'traces': 0, 'eager': 0}


def cache_info() -> dict:
  """``{'entries', 'hits', 'misses', 'traces', 'eager'}`` of the compiled-step cache."""
  with _lock:
    return dict(_stats, entries=len(_cache))


def cache_clear() -> None:
  """Drops every cached compiled step and zeroes the counters."""
  with _lock:
    _cache.clear()
    _stats.update(hits=0, misses=0, traces=0, eager=0)


def _is_float(x) -> bool:
  if isinstance(x, bool):
    return False
  if isinstance(x, (float, np.floating)):
    return True
  return isinstance(x, np.ndarray) and np.issubdtype(x.dtype, np.floating)


def _same_constant(x, default) -> bool:
  """``x`` is the def's own host-side value (same type, same value, same sign of zero)."""
  if x is default:
    return True
  if type(x) is not type(default) or isinstance(x, np.ndarray):
    return False
  return bool(x == default) and math.copysign(1.0, x) == math.copysign(1.0, default)


def _split_hyper_params(leaves, treedef, hyper_params, defaults):
  """``(key, dynamic positions, dynamic values)`` of the flattened hyper-params (``leaves``,
  ``treedef``); TypeError if a static part is unhashable."""
  if hyper_params is defaults:  # no override: ``update_hyper_params()`` hands back the same
    default_leaves = leaves
  else:
    default_leaves, default_treedef = jax.tree_util.tree_flatten(defaults)
    if default_treedef != treedef:
      default_leaves = [None] * len(leaves)
  key, positions, values = [], [], []
  for i, (x, default) in enumerate(zip(leaves, default_leaves)):
    if isinstance(x, jax.Array):
      key.append(_Dynamic(('array', x.shape, x.dtype, x.weak_type)))
    elif _is_float(x) and not (_same_constant(x, default) or np.all(np.asarray(x) == 0)):
      key.append(_Dynamic(('host', type(x), np.shape(x), np.result_type(x))))
    elif isinstance(x, np.ndarray):  # a zero array: static by shape, dtype and sign bits
      key.append(('zeros', x.shape, x.dtype, np.signbit(x).tobytes()))
      continue
    else:  # the type too: 1 == 1.0 == True in Python, not in a trace; 0.0 vs -0.0 by sign
      key.append((type(x), x, math.copysign(1.0, x) if _is_float(x) else None))
      continue
    positions.append(i)
    values.append(x)
  return tuple(key), tuple(positions), values


def _compilable_leaves(leaves) -> bool:
  """Concrete arrays only: jax arrays, or NumPy arrays jax keeps in their own dtype."""
  for x in leaves:
    if isinstance(x, jax.core.Tracer):
      return False
    if isinstance(x, jax.Array):
      continue
    if not (isinstance(x, np.ndarray) and jax.dtypes.canonicalize_dtype(x.dtype) == x.dtype):
      return False
  return True


def _compile(step_fn, hp_treedef, hp_leaves, positions, in_treedef):
  """A jitted ``(dynamic hyper-param values, input leaves) -> output leaves`` and its out tree."""
  template = list(hp_leaves)
  for i in positions:
    template[i] = None  # only the dynamic values' slots: static leaves stay as given
  out_tree = {}

  def flat_step(dynamic_values, leaves):
    hp_leaves = list(template)
    for i, value in zip(positions, dynamic_values):
      hp_leaves[i] = value
    params, state, grads = in_treedef.unflatten(leaves)
    out = step_fn(hp_treedef.unflatten(hp_leaves), params, state, grads)
    out_leaves, out_tree['treedef'] = jax.tree_util.tree_flatten(out)
    with _lock:
      _stats['traces'] += 1
    return out_leaves

  return jax.jit(flat_step), out_tree


def apply_gradient(opt_def, hyper_params, params, state, grads):
  """``opt_def.apply_gradient(hyper_params, params, state, grads)``, compiled and cached when
  it is safe.

  Args:
    opt_def: the ``OptimizerDef`` whose step this is.
    hyper_params: the hyper-params for this step (``opt_def.update_hyper_params(...)``).
    params: the target.
    state: the ``OptimizerState``.
    grads: gradients with the structure and shapes of ``params``.

  Returns:
    ``(new_params, new_state)``: what the def's own ``apply_gradient`` returns (it is what
    runs, traced once per cache key).

  Examples:
    >>> import jax.numpy as jnp
    >>> import flax_optim_compat as optim
    >>> from flax_optim_compat import _compiled_step
    >>> opt_def = optim.Momentum(learning_rate=0.1, beta=0.9)
    >>> params = {'w': jnp.array([1.0, 2.0])}
    >>> state = opt_def.init_state(params)
    >>> for lr in (0.1, 0.2):  # a new learning rate is an argument, not a recompile
    ...   params, state = _compiled_step.apply_gradient(
    ...       opt_def, opt_def.update_hyper_params(learning_rate=lr), params, state,
    ...       {'w': jnp.ones(2)})
    >>> params['w'].round(4), int(state.step)  # m = 1, 1.9: 1 - 0.1 * 1 - 0.2 * 1.9
    (Array([0.52, 1.52], dtype=float32), 2)
  """
  step_fn = opt_def.apply_gradient  # a bound method: equal and hashed by the def, by identity
  run = lambda: step_fn(hyper_params, params, state, grads)
  if not opt_def.pure_jax_step:
    return run()
  leaves, in_treedef = jax.tree_util.tree_flatten((params, state, grads))
  hp_leaves, hp_treedef = jax.tree_util.tree_flatten(hyper_params)
  if not _compilable_leaves(leaves) or any(isinstance(x, jax.core.Tracer) for x in hp_leaves):
    return run()
  try:
    hp_key, positions, values = _split_hyper_params(
        hp_leaves, hp_treedef, hyper_params, opt_def.hyper_params)
    if not _compilable_leaves(v for v in values if not isinstance(v, (float, np.floating))):
      return run()
    key = (step_fn, hp_treedef, hp_key, in_treedef)
    with _lock:  # the one lookup hashes the key: a TypeError if a static part is unhashable
      entry = _cache.get(key)
      if entry is not None:
        _cache.move_to_end(key)
        _stats['hits'] += 1
      else:
        _stats['misses'] += 1
  except TypeError:  # nothing to key a cache on
    return run()

  if entry is _EAGER:
    return run()
  hit = entry is not None
  if not hit:
    entry = _compile(step_fn, hp_treedef, hp_leaves, positions, in_treedef)
  compiled, out_tree = entry
  try:
    out_leaves = compiled(values, leaves)
  except _NEEDS_CONCRETE:  # a new shape's trace may need values too: that entry goes eager
    entry = _EAGER
    out = run()
  else:
    out = out_tree['treedef'].unflatten(out_leaves)
    if hit:
      return out
  with _lock:
    if entry is _EAGER or key not in _cache:
      _cache[key] = entry
      while len(_cache) > MAX_ENTRIES:
        _cache.popitem(last=False)
    if entry is _EAGER:
      _stats['eager'] += 1
  return out
