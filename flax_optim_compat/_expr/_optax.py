"""What the installed optax offers ``--tx``: its transformations and schedules, and what each
parameter accepts.

Read from optax itself, never from the user's text: a public callable is a transformation or a
schedule by its declared return type, or by name for the few transformations optax leaves
unannotated (:func:`callables`, :data:`UNANNOTATED_TRANSFORMS`), and a parameter takes what its
annotation says (:func:`accepts`, an :class:`Accepts`). ``_tx`` builds an expression against
these.
"""
import collections.abc
import dataclasses
import functools
import inspect
import types
import typing
import warnings
from typing import Callable, Dict, List, Optional, Tuple

import jax
import numpy as np
import optax

__all__ = ['Accepts', 'ANYTHING', 'accepts', 'parameter_accepts', 'signature',
           'UNANNOTATED_TRANSFORMS', 'callables', 'optax_names']


@dataclasses.dataclass(frozen=True)
class Accepts:
  """What an optax parameter takes, read from its annotation."""
  anything: bool = False      # no usable annotation: any literal or literal container
  real: bool = False
  integer: bool = False
  boolean: bool = False
  string: bool = False
  choices: Tuple[str, ...] = ()   # typing.Literal strings
  none: bool = False
  dtype: bool = False
  schedule: bool = False
  transform: bool = False
  items: Optional['Accepts'] = None         # Sequence[X] / tuple[X, ...]
  fixed_items: Optional[Tuple['Accepts', ...]] = None   # tuple[A, B]
  keys: Optional['Accepts'] = None          # Mapping[K, V]
  values: Optional['Accepts'] = None

  def merge(self, other: 'Accepts') -> 'Accepts':
    merged = {}
    for field in dataclasses.fields(self):
      a, b = getattr(self, field.name), getattr(other, field.name)
      if isinstance(a, bool):
        merged[field.name] = a or b
      elif field.name == 'choices':
        merged[field.name] = a + b
      elif a is None or b is None:
        merged[field.name] = a if b is None else b
      elif field.name == 'fixed_items':
        merged[field.name] = a if len(a) >= len(b) else b
      else:
        merged[field.name] = a.merge(b)
    return Accepts(**merged)

  def words(self) -> str:
    if self.anything:
      return 'a literal'
    words = []
    if self.transform:
      words.append('an optax transformation')
    if self.schedule:
      words.append('a number or an optax schedule' if self.real else 'an optax schedule')
    elif self.real:
      words.append('a number')
    elif self.integer:
      words.append('an integer')
    if self.boolean and not self.real:
      words.append('True or False')
    if self.choices:
      words.append(' or '.join(ascii(c) for c in self.choices))
    elif self.string:
      words.append('a string')
    if self.dtype:
      words.append('a dtype (jnp.float32, ...)')
    if self.items is not None or self.fixed_items is not None:
      words.append('a tuple or list')
    if self.values is not None:
      words.append('a dict')
    if self.none:
      words.append('None')
    return ' or '.join(words) or 'a Python function, which the command line cannot give'


ANYTHING = Accepts(anything=True)
_NUMERIC_TYPES = (float, complex, np.ndarray, np.number, jax.Array)


def accepts(annotation) -> Accepts:
  """What a parameter annotated ``annotation`` takes (optax's own annotations)."""
  try:
    return _accepts_cached(annotation)
  except TypeError:  # unhashable annotation
    return ANYTHING


@functools.lru_cache(maxsize=None)
def _accepts_cached(annotation) -> Accepts:
  if annotation in (inspect.Parameter.empty, typing.Any, collections.abc.Hashable) or isinstance(
      annotation, (typing.ForwardRef, typing.TypeVar, str)):
    return ANYTHING
  if annotation is None or annotation is type(None):
    return Accepts(none=True)
  if annotation == optax.Schedule:
    return Accepts(schedule=True)
  origin, args = typing.get_origin(annotation), typing.get_args(annotation)
  if origin is typing.Union or isinstance(annotation, types.UnionType):
    result = Accepts()
    for arg in args:
      result = result.merge(accepts(arg))
    return result
  if origin is typing.Literal:
    return Accepts(string=True, choices=tuple(a for a in args if isinstance(a, str)))
  if origin is type:
    return Accepts(dtype=True)
  if origin is collections.abc.Callable:
    returns = args[-1] if args else None
    if isinstance(returns, type) and issubclass(returns, optax.GradientTransformation):
      return Accepts()   # a factory: only inject_hyperparams takes one, handled there
    if len(args) == 2 and isinstance(args[0], list) and len(args[0]) == 1:
      return Accepts(schedule=True)   # Callable[[count], value]
    return Accepts()
  if origin in (tuple,) and args and args[-1] is not Ellipsis:
    return Accepts(fixed_items=tuple(accepts(a) for a in args))
  if origin in (list, tuple, collections.abc.Sequence, collections.abc.Iterable):
    return Accepts(items=accepts(args[0]) if args else ANYTHING)
  if origin in (dict, collections.abc.Mapping):
    if len(args) != 2:
      return Accepts(keys=ANYTHING, values=ANYTHING)
    return Accepts(keys=accepts(args[0]), values=accepts(args[1]))
  if not isinstance(annotation, type):
    return ANYTHING
  if issubclass(annotation, optax.GradientTransformation):
    return Accepts(transform=True)
  if annotation in (bool, np.bool_):
    return Accepts(boolean=True)
  if annotation is int:
    return Accepts(integer=True)
  if annotation is str:
    return Accepts(string=True)
  if annotation is np.dtype or annotation.__name__ == 'SupportsDType':
    return Accepts(dtype=True)
  if issubclass(annotation, _NUMERIC_TYPES):
    return Accepts(real=True)
  return Accepts()   # another class (a protocol of functions, ...): not expressible


def parameter_accepts(param: inspect.Parameter) -> Accepts:
  """What an optax parameter takes: its annotation, and the kind of optax's own default.

  optax's defaults are optax's word too where an annotation disagrees with them: optax 0.2.5
  declares ``adafactor(multiply_by_parameter_scale: float = True)``, so ``True`` is accepted.
  """
  result = accepts(param.annotation)
  default = param.default
  if result.anything or default is inspect.Parameter.empty:
    return result
  for kind, words in ((bool, Accepts(boolean=True)), (int, Accepts(integer=True)),
                      (float, Accepts(real=True)), (str, Accepts(string=True)),
                      (type(None), Accepts(none=True))):
    if type(default) is kind:  # pylint: disable=unidiomatic-typecheck  # bool is not an int here
      return result.merge(words)
  return result


def signature(fn) -> inspect.Signature:
  """``fn``'s signature, annotations resolved where a module writes them as strings."""
  try:
    # Evaluates the annotation strings of optax's own source, never the user's text.
    return inspect.signature(fn, eval_str=True)
  except Exception:  # pylint: disable=broad-except
    return inspect.signature(fn)


# Public optax transformations that declare no return type, so their annotation cannot say
# what they are: in optax 0.2.8, scale_by_factored_rms (Adafactor's second-moment scaling, the
# first call of the plain optax chain of a legacy Adafactor whose epsilon2 is not 1e-3).
# tests/expr/test_expr.py checks the list against the installed optax: each name exists and, called
# with its defaults, returns a GradientTransformation; every other unannotated public optax
# function that can be called with its defaults returns something else. (optax.monitor
# declares no return type either; it takes only functions, which an expression cannot write.)
UNANNOTATED_TRANSFORMS = ('scale_by_factored_rms',)


@functools.lru_cache(maxsize=None)
def callables() -> Tuple[Dict[str, Callable], Dict[str, Callable]]:
  """``(transformations, schedules)``: optax's public callables by declared return type.

  A callable is a transformation when it declares that it returns a ``GradientTransformation``
  (or a subclass) or is named in :data:`UNANNOTATED_TRANSFORMS`; a schedule when it declares
  ``optax.Schedule``. Nothing is called.
  """
  transforms, schedules = {}, {}
  for name in dir(optax):
    if name.startswith('_'):
      continue
    try:
      with warnings.catch_warnings():
        warnings.simplefilter('ignore')   # reading a deprecated alias may warn
        obj = getattr(optax, name)
      if isinstance(obj, type) or not callable(obj):
        continue
      returns = signature(obj).return_annotation
    except Exception:  # pylint: disable=broad-except
      continue
    if name in UNANNOTATED_TRANSFORMS or (
        isinstance(returns, type) and issubclass(returns, optax.GradientTransformation)):
      transforms[name] = obj
    elif returns == optax.Schedule:
      schedules[name] = obj
  return transforms, schedules


def optax_names() -> Dict[str, List[str]]:
  """The optax names ``--tx`` accepts: ``{'transformations': [...], 'schedules': [...]}``.

  Taken from the installed optax: its public callables declared to return a
  ``GradientTransformation`` or a schedule, the transformations optax leaves unannotated
  (:data:`UNANNOTATED_TRANSFORMS`), plus ``inject_hyperparams``.

  Examples:
    >>> from flax_optim_compat._expr import _optax
    >>> names = _optax.optax_names()
    >>> 'adamw' in names['transformations'], 'exponential_decay' in names['schedules']
    (True, True)
  """
  transforms, schedules = callables()
  return {'transformations': sorted(transforms) + ['inject_hyperparams'],
          'schedules': sorted(schedules)}
