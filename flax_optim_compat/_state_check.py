"""State dicts read from a file, checked against a template: the one set of rules.

Used by the strict restore (``_restore``: ``Optimizer.restore_state``, ``from_bytes``,
``restore_checkpoint``) and by the checkpoint tool (``_checkpoint``: converted files read back,
``to_legacy``), each wrapping :class:`Mismatch` in its own error type:

* keys: a dict has exactly the template's keys (both lists named);
* leaves: ``None`` stays ``None``; an array has the template's shape (without a leading device
  axis with ``strip_axis``) and dtype, or a dtype the caller's ``may_cast`` allows, cast to
  the template's only where every value fits; a Python scalar stands for a 0-d array of a
  compatible kind; raw msgpack (bytes, ext types) is never a leaf;
* the step counter (``.../state/step``, or a step given on its own): integers in
  [0, 2**31 - 1] (legacy took -3 and then divided by a negative bias correction);
* an empty container (``optax.EmptyState()``, ``{}``) written by orbax reads back as ``None``:
  ``orbax=True`` takes ``None`` for it; :func:`is_empty` is the rule (``inspect`` and ``diff``
  read both alike).

Also the words every error message of the core uses for a value (:func:`describe_value`) and what
an array leaf is (:func:`is_array`).

Also here, for the same reason (the core reads them, the checkpoint tool too): the template
state dict of an optimizer (:func:`template`) and the tree orbax wrote, as keys, shapes and
dtypes (:func:`orbax_metadata`; orbax's own tree: :func:`orbax_metadata_tree`, which the tool's
orbax reader uses too); neither imports orbax.
"""
from typing import Callable, Optional, Tuple

import jax
import msgpack
import numpy as np
from flax import serialization

from . import _tree

__all__ = ['Mismatch', 'check', 'step_problem', 'template', 'orbax_metadata',
           'orbax_metadata_tree', 'same_family', 'describe_value', 'is_array', 'is_empty']

_STEP_PATH = ('state', 'step')
_INT32 = np.iinfo(np.int32)


class Mismatch(Exception):
  """The first difference between a state dict and its template: ``path`` (keys) and ``detail``."""

  def __init__(self, path: Tuple[str, ...], detail: str):
    super().__init__(detail)
    self.path = path
    self.detail = detail


def is_array(x, *, with_values: bool = False) -> bool:
  """Whether ``x`` is an array leaf of a state dict: a NumPy array or scalar, a ``jax.Array``,
  and, unless ``with_values``, a ``jax.ShapeDtypeStruct``.

  A ``jax.ShapeDtypeStruct`` has a shape and a dtype but no values: it is a leaf of an abstract
  template, or of what orbax's metadata says a directory holds, and is checked like an array.
  A leaf read from a file's data must hold values: check it ``with_values=True``.
  """
  if isinstance(x, (np.ndarray, np.generic, jax.Array)):
    return True
  return not with_values and isinstance(x, jax.ShapeDtypeStruct)


def is_empty(node) -> bool:
  """Whether ``node`` is an empty container as a state dict holds one: ``{}`` (what
  ``optax.EmptyState()``, an empty dict or tuple become in a state dict) or ``None`` (what
  orbax reads back for one)."""
  return node is None or (isinstance(node, (dict, list, tuple)) and not node)


def _is_py_scalar(x) -> bool:
  return isinstance(x, (bool, int, float, complex))


def describe_value(value) -> str:
  """``value`` in words, as error messages show it: ``'an array of shape (3,) and dtype
  float32'``, ``'a Python float (0.1)'``, ``"a str ('0.1')"``, ``'None'``, ``"a dict
  with keys ['a', 'b']"``, ``'the callable f'``, ``'a Momentum'``."""
  if value is None:
    return 'None'
  if isinstance(value, dict):
    return f'a dict with keys {sorted(value, key=str)}'
  if isinstance(value, jax.ShapeDtypeStruct):
    return (f'a jax.ShapeDtypeStruct of shape {tuple(value.shape)} and dtype '
            f'{np.dtype(value.dtype).name} (no values)')
  if is_array(value):
    return f'an array of shape {tuple(np.shape(value))} and dtype {np.dtype(value.dtype).name}'
  if _is_py_scalar(value):
    return f'a Python {type(value).__name__} ({value!r})'
  if isinstance(value, str):
    return f'a str ({value!r})' if len(value) <= 40 else f'a str of {len(value)} characters'
  if isinstance(value, type):
    return f'the class {value.__name__}'
  if callable(value):
    return f'the callable {getattr(value, "__name__", type(value).__name__)}'
  return f'a {type(value).__name__}'


# ----------------------------------------------------------------------------- rules

def step_problem(values, what: str = 'the step') -> Optional[str]:
  """Why the integer step counter(s) ``values`` (``what``: named so in the message) cannot be
  restored; None when they can."""
  if isinstance(values, jax.ShapeDtypeStruct):
    return None
  values = np.asarray(values)
  if not values.size:
    return None
  if values.max() > _INT32.max:
    return f'{what} {values.max()} is not in [0, 2**31 - 1]: it does not fit in int32'
  if values.min() < 0:
    return (f'{what} {values.min()} is not in [0, 2**31 - 1]: it is negative, and the next '
            'update would divide by a negative bias correction')
  return None


def same_family(path, got: np.dtype, want: np.dtype) -> bool:  # pylint: disable=unused-argument
  """A ``may_cast`` for :func:`check`: any leaf into a dtype of its own family (float, int, ...)."""
  return _tree.dtype_kind(got) == _tree.dtype_kind(want)


def _kind_ok(expected_dtype: np.dtype, actual) -> bool:
  """Whether a Python scalar may stand for a 0-d leaf of ``expected_dtype`` (weak typing)."""
  kind = _tree.dtype_kind(expected_dtype)
  if isinstance(actual, bool):
    return kind == 'b'
  if isinstance(actual, int):
    return kind in 'iufc'
  if isinstance(actual, float):
    return kind in 'fc'
  return kind == 'c'


def _cast(value, dtype: np.dtype, path):
  """``value`` as ``dtype``; Mismatch where a value does not fit (NumPy values are checked)."""
  if isinstance(value, jax.ShapeDtypeStruct):
    return jax.ShapeDtypeStruct(value.shape, dtype)
  if isinstance(value, jax.Array):
    return value.astype(dtype)
  value = np.asarray(value)
  if _tree.dtype_kind(dtype) in 'iu' and value.size:
    info = np.iinfo(dtype)
    if value.min() < info.min or value.max() > info.max:
      raise Mismatch(path, f'the values do not fit in {dtype.name}')
  try:
    with np.errstate(over='raise', invalid='raise'):
      return value.astype(dtype)
  except (OverflowError, FloatingPointError):
    raise Mismatch(path, f'the values do not fit in {dtype.name}') from None


def _check_leaf(expected, actual, path, strip_axis, may_cast):
  """The value to restore for one leaf, or Mismatch."""
  if isinstance(actual, (bytes, msgpack.ExtType)):
    raise Mismatch(path, f'not a valid legacy checkpoint (the leaf is raw msgpack '
                   f'{describe_value(actual)[2:]}, not an array: the file is corrupt or was not '
                   'written by flax.serialization)')
  if expected is None:
    if actual is not None:
      raise Mismatch(path, 'the target expects None but the checkpoint has '
                     f'{describe_value(actual)}')
    return None
  is_step = path[-2:] == _STEP_PATH
  if is_array(expected):
    shape = tuple(np.shape(expected))[1 if strip_axis else 0:]
    dtype = np.dtype(expected.dtype)
    if _is_py_scalar(actual) and shape == () and _kind_ok(dtype, actual):
      problem = step_problem(actual) if is_step else None
      if problem:
        raise Mismatch(path, problem)
      try:
        return np.asarray(actual, dtype)
      except (OverflowError, ValueError):
        raise Mismatch(path, f'{actual!r} does not fit in {dtype.name}') from None
    if not is_array(actual):
      raise Mismatch(path, f'the target expects an array of shape {shape} and dtype '
                     f'{dtype.name} but the checkpoint has {describe_value(actual)}')
    got_shape, got_dtype = tuple(np.shape(actual)), np.dtype(actual.dtype)
    if got_shape != shape:
      raise Mismatch(path, f'shape mismatch: the checkpoint has shape {got_shape} '
                     f'({got_dtype.name}) but the target expects shape {shape} ({dtype.name})')
    if is_step and got_dtype.kind in 'iu' and dtype.kind in 'iu':
      problem = step_problem(actual)
      if problem:
        raise Mismatch(path, problem)
      return actual if got_dtype == dtype else _cast(actual, dtype, path)
    if got_dtype == dtype:
      return actual
    if may_cast(path, got_dtype, dtype):
      return _cast(actual, dtype, path)
    raise Mismatch(path, f'dtype mismatch: the checkpoint has dtype {got_dtype.name} '
                   f'(shape {got_shape}) but the target expects dtype {dtype.name} '
                   f'(shape {shape})')
  if _is_py_scalar(expected):
    allowed = {'b': 'b', 'i': 'iu', 'f': 'iuf', 'c': 'iufc'}[np.result_type(type(expected)).kind]
    if _is_py_scalar(actual):
      got_kind = np.result_type(type(actual)).kind
    elif is_array(actual) and np.shape(actual) == ():
      got_kind = _tree.dtype_kind(np.dtype(actual.dtype))
    else:
      got_kind = None
    if got_kind is None or got_kind not in allowed:
      raise Mismatch(path, f'the target expects a scalar like {expected!r} but the checkpoint '
                     f'has {describe_value(actual)}')
    return actual
  if type(actual) is not type(expected):
    raise Mismatch(path, f'the target expects {describe_value(expected)} but the checkpoint '
                   f'has {describe_value(actual)}')
  return actual


def _no_cast(path, got, want) -> bool:  # pylint: disable=unused-argument
  return False


def check(expected, actual, path: Tuple[str, ...] = (), *, strip_axis: bool = False,
          may_cast: Callable[[Tuple[str, ...], np.dtype, np.dtype], bool] = _no_cast,
          orbax: bool = False):
  """``actual`` checked against the template state dict ``expected``; the values to restore.

  Args:
    expected: the template: a state dict of arrays, ``jax.ShapeDtypeStruct``s, Python scalars
      or None.
    actual: what was read.
    path: the keys of ``actual`` inside what the caller reports (error paths start there).
    strip_axis: compare array shapes without the template's leading (device) axis.
    may_cast: ``(path, dtype read, template dtype) -> bool``: where another dtype is cast to
      the template's (default: nowhere); a value that does not fit is a Mismatch.
    orbax: ``actual`` came from orbax, which writes an empty container as ``None``.

  Raises:
    Mismatch: the first difference, in the template's key order.
  """
  if isinstance(expected, dict):
    if orbax and not expected and is_empty(actual):
      return {}
    if not isinstance(actual, dict):
      raise Mismatch(path, f'the target expects {describe_value(expected)} but the checkpoint '
                     f'has {describe_value(actual)}')
    missing = sorted(set(expected) - set(actual))
    extra = sorted(set(actual) - set(expected), key=str)
    if missing or extra:
      parts = [f'missing {missing}' if missing else '', f'unexpected {extra}' if extra else '']
      raise Mismatch(path, f'the checkpoint has keys {sorted(actual, key=str)} but the target '
                     f'expects {sorted(expected)} ({", ".join(p for p in parts if p)})')
    return {key: check(expected[key], actual[key], path + (key,), strip_axis=strip_axis,
                       may_cast=may_cast, orbax=orbax)
            for key in expected}
  return _check_leaf(expected, actual, path, strip_axis, may_cast)


# ----------------------------------------------------------------------------- templates, orbax

def template(opt_target, opt_state) -> dict:
  """The state dict ``{'target', 'state'}`` an optimizer of this target and state writes."""
  return {'target': serialization.to_state_dict(opt_target),
          'state': serialization.to_state_dict(opt_state)}


def _shapes_and_dtypes(node):
  """Orbax's metadata tree as a state dict of ``jax.ShapeDtypeStruct`` leaves."""
  if isinstance(node, dict):
    return {str(k): _shapes_and_dtypes(v) for k, v in node.items()}
  if isinstance(node, (list, tuple)):
    return {str(i): _shapes_and_dtypes(v) for i, v in enumerate(node)}
  shape, dtype = getattr(node, 'shape', None), getattr(node, 'dtype', None)
  if shape is not None and dtype is not None:
    return jax.ShapeDtypeStruct(tuple(shape), np.dtype(dtype))
  return node


def orbax_metadata_tree(checkpointer, directory):
  """orbax's own metadata tree of what ``checkpointer`` wrote in ``directory`` (its containers
  as written, a metadata object per leaf; no array data)."""
  tree = checkpointer.metadata(directory)
  tree = getattr(tree, 'item_metadata', tree)  # orbax >= 0.9 wraps the tree
  return getattr(tree, 'tree', tree)


def orbax_metadata(checkpointer, directory) -> dict:
  """What the orbax ``checkpointer`` wrote in ``directory``: keys, shapes and dtypes, no data."""
  return _shapes_and_dtypes(orbax_metadata_tree(checkpointer, directory))
