"""``--optimizer``: the legacy optimizer def an expression writes, built without evaluating it.

One call of a public def of the package (``Adam(1e-3, weight_decay=1e-4)``) with literal
arguments checked against the def's hyper-parameter annotations; ``WeightNorm`` takes another
def; ``MultiOptimizer`` takes ``(ModelParamTraversal('REGEX'), def)`` pairs, each traversal a
:class:`RegexTraversal` whose :class:`PathRegex` a converter can read back
(:func:`path_regexes`). Parsing, limits and errors are ``_expr``'s.
"""
import ast
import dataclasses
import functools
import inspect
import re
import warnings
from typing import Any, Dict, Optional, Tuple

import jax
import jax.numpy as jnp
from flax import traverse_util

import flax_optim_compat
from .. import _deprecation
from . import _core
from .. import _hyper
from .. import base

__all__ = ['PathRegex', 'RegexTraversal', 'optimizer_classes', 'parse_optimizer',
           'path_regexes']

# Module spellings accepted in front of a name.
_PACKAGE_PREFIXES = ('optim', 'flax_optim_compat', 'flax.optim')
_TRAVERSAL_PREFIXES = _PACKAGE_PREFIXES + ('traverse_util', 'flax.traverse_util')


class PathRegex:
  """A ``ModelParamTraversal`` filter: a regular expression searched in the parameter path.

  ``ModelParamTraversal(PathRegex('kernel$'))`` selects the parameters whose path (as the
  traversal gives it: ``'/'`` + the keys joined by ``'/'``, e.g. ``'/dense/kernel'``) contains
  a match of the pattern (:func:`re.search`). The filter is a value: equal patterns give equal,
  hashable, picklable filters, and :attr:`pattern` is all there is to render the same
  selection elsewhere (e.g. an optax label function).

  Args:
    pattern: a Python regular expression.

  Raises:
    re.error: the pattern does not compile.

  Examples:
    >>> from flax_optim_compat._expr._optimizer import PathRegex
    >>> kernels = PathRegex('kernel$')
    >>> kernels('/dense/kernel', None), kernels('/dense/bias', None)
    (True, False)
    >>> kernels == PathRegex('kernel$'), kernels
    (True, PathRegex('kernel$'))
  """
  __slots__ = ('pattern', '_regex')

  def __init__(self, pattern: str):
    if not isinstance(pattern, str):
      raise TypeError(f'PathRegex takes a string pattern, got {type(pattern).__name__}.')
    object.__setattr__(self, 'pattern', pattern)
    object.__setattr__(self, '_regex', re.compile(pattern))

  def __setattr__(self, name, value):
    raise AttributeError('PathRegex is immutable.')

  def __call__(self, path: str, value: Any = None) -> bool:
    """Whether the pattern occurs in ``path`` (``'/dense/kernel'``); ``value`` is not read."""
    return self._regex.search(path) is not None

  def __repr__(self):
    return f'PathRegex({self.pattern!r})'

  def __eq__(self, other):
    return isinstance(other, PathRegex) and other.pattern == self.pattern

  def __hash__(self):
    return hash((PathRegex, self.pattern))

  def __reduce__(self):
    return PathRegex, (self.pattern,)


class RegexTraversal(traverse_util.ModelParamTraversal):
  """``ModelParamTraversal(PathRegex(pattern))`` that keeps its :class:`PathRegex` readable.

  A real ``ModelParamTraversal`` (legacy ``MultiOptimizer`` and flax see no difference);
  :attr:`path_regex` lets a converter write the same selection for optax (a label function
  from :attr:`PathRegex.pattern`) without reading flax's private attributes.

  Examples:
    >>> import warnings
    >>> from flax_optim_compat._expr._optimizer import PathRegex, RegexTraversal
    >>> with warnings.catch_warnings():  # flax deprecates its traversals
    ...   warnings.simplefilter('ignore', DeprecationWarning)
    ...   kernels = RegexTraversal(PathRegex('kernel$'))
    >>> list(kernels.iterate({'dense': {'kernel': 1, 'bias': 2}})), kernels
    ([1], ModelParamTraversal('kernel$'))
  """

  def __init__(self, path_regex: PathRegex):
    if not isinstance(path_regex, PathRegex):
      raise TypeError(f'RegexTraversal takes a PathRegex, got {type(path_regex).__name__}.')
    super().__init__(path_regex)
    self.path_regex = path_regex

  def __repr__(self):
    return f'ModelParamTraversal({self.path_regex.pattern!r})'


def path_regexes(opt_def) -> Optional[Tuple[PathRegex, ...]]:
  """The :class:`PathRegex` of every group of a MultiOptimizer whose traversals are regexes.

  Args:
    opt_def: any optimizer def, e.g. from :func:`parse_optimizer`.

  Returns:
    One :class:`PathRegex` per ``(traversal, optimizer)`` pair, in order, when ``opt_def`` is
    a ``MultiOptimizer`` and every traversal is a :class:`RegexTraversal`; else None.

  Examples:
    >>> from flax_optim_compat._expr import _optimizer
    >>> _optimizer.path_regexes(_optimizer.parse_optimizer(
    ...     "MultiOptimizer((ModelParamTraversal('kernel$'), Adam(1e-3)))"))
    (PathRegex('kernel$'),)
    >>> _optimizer.path_regexes(_optimizer.parse_optimizer('Adam(1e-3)')) is None
    True
  """
  traversals = getattr(opt_def, 'traversals', None) if isinstance(
      opt_def, base.MultiOptimizer) else None
  if traversals is None or not all(isinstance(t, RegexTraversal) for t in traversals):
    return None
  return tuple(t.path_regex for t in traversals)


@functools.lru_cache(maxsize=None)
def _optimizer_classes() -> Tuple[Tuple[str, type], ...]:
  # OptimizerDef takes a raw hyper-params object; ReplicatedOptimizer is a runtime wrapper
  # (devices, axis name) whose checkpoints are those of the def it wraps.
  excluded = (base.OptimizerDef, base.ReplicatedOptimizer)
  return tuple((name, getattr(flax_optim_compat, name)) for name in flax_optim_compat.__all__
               if isinstance(getattr(flax_optim_compat, name), type)
               and issubclass(getattr(flax_optim_compat, name), base.OptimizerDef)
               and getattr(flax_optim_compat, name) not in excluded)


def optimizer_classes() -> Dict[str, type]:
  """The optimizer classes ``--optimizer`` accepts, by name: the package's public defs.

  Examples:
    >>> from flax_optim_compat._expr import _optimizer
    >>> 'Adam' in _optimizer.optimizer_classes(), 'OptimizerDef' in _optimizer.optimizer_classes()
    (True, False)
  """
  return dict(_optimizer_classes())


def _takes_def(param: inspect.Parameter) -> bool:
  annotation = param.annotation
  return isinstance(annotation, type) and issubclass(annotation, base.OptimizerDef)


@functools.lru_cache(maxsize=None)
def _wrappers() -> Tuple[str, ...]:
  """Names of the defs with a parameter that takes another def (WeightNorm)."""
  return tuple(name for name, cls in _optimizer_classes() if cls is not base.MultiOptimizer
               and any(_takes_def(p) for p in inspect.signature(cls).parameters.values()))


def _hyper_param_kinds(annotation) -> Optional[frozenset]:
  """The types a hyper-param annotation admits (the package's one rule), or None."""
  return _hyper.allowed_kinds(annotation)


def _check_hyper_params(opt_def, ctx: _core.Context, name: str) -> None:
  """The package's own check of a def's hyper-params, as an :class:`ExpressionError`."""
  try:
    _hyper.check_fields(type(opt_def).__name__, opt_def.hyper_params)
  except (TypeError, ValueError) as e:
    raise ctx.fail(f'{name}: {e}') from None


def _kinds_words(kinds: frozenset) -> str:
  words = []
  if float in kinds or (jax.Array in kinds and int not in kinds):
    words.append('a number')
  elif int in kinds:
    words.append('an integer')
  if bool in kinds:
    words.append('True or False')
  if str in kinds:
    words.append('a string')
  if type(None) in kinds:
    words.append('None')
  return ' or '.join(words) or 'nothing the command line can give'


def _admits(kinds: frozenset, value) -> bool:
  if value is None:
    return type(None) in kinds
  if isinstance(value, bool):
    return bool in kinds
  if isinstance(value, int):
    return bool(kinds & {float, int, jax.Array})
  if isinstance(value, float):
    return float in kinds or (jax.Array in kinds and int not in kinds)
  if isinstance(value, str):
    return str in kinds
  return False


def _def_argument_kinds(opt_def, param: inspect.Parameter) -> Optional[frozenset]:
  """What a def's constructor argument takes: its hyper-param field's annotation, else its own."""
  hyper_params = opt_def.hyper_params
  if dataclasses.is_dataclass(hyper_params):
    for field in dataclasses.fields(hyper_params):
      if field.name == param.name:
        return _hyper_param_kinds(field.type)
  if param.annotation is not param.empty:
    kinds = _hyper_param_kinds(param.annotation)
    if kinds is not None:
      return kinds
  default = param.default
  if isinstance(default, bool):
    return frozenset({bool})
  if isinstance(default, (int, float)):
    return frozenset({float})
  return None


def _def_literal(node, param: inspect.Parameter, name: str, ctx: _core.Context):
  """The value of a literal argument of optimizer ``name``, before the def is built."""
  where = f'{name} argument {ascii(param.name)}'
  value = _core.literal(node)
  if value is _core.NOT_LITERAL:
    dtype = _core.dtype_of(node, ctx)
    if dtype is not None and param.default is not param.empty and _is_dtype(param.default):
      return dtype
    if isinstance(node, ast.Call) and _core.name_in(node.func, _PACKAGE_PREFIXES) in dict(
        _optimizer_classes()):
      raise ctx.fail(f'{where}: only {" and ".join(_wrappers())} takes an optimizer argument.')
    if isinstance(node, (ast.List, ast.Tuple, ast.Dict, ast.Set)):
      raise ctx.fail(f'{where} takes a single literal, not {_core.node_in_words(node)}.')
    raise ctx.fail(f'{where}: only literal arguments are allowed (numbers, strings, '
                   f'True/False/None), not {_core.node_in_words(node)}.')
  _core.refuse_literal_kind(value, where, ctx)
  if isinstance(value, str) and param.default is not param.empty and _is_dtype(param.default):
    dtype = _core.dtype_of(node, ctx)
    if dtype is None:
      raise ctx.fail(f'{where} takes a dtype ({", ".join(_core.DTYPES)}), got '
                     f'{_core.value_words(value)}.')
    return dtype
  if isinstance(value, (int, float)) and not isinstance(value, bool):
    _core.check_number(value, where, ctx)
  return value


def _is_dtype(value) -> bool:
  try:
    return isinstance(value, type) and jnp.issubdtype(jnp.dtype(value), jnp.floating)
  except TypeError:
    return False


def _construct(cls, args, kwargs, name: str, ctx: _core.Context):
  try:
    with warnings.catch_warnings():
      warnings.simplefilter('ignore', _deprecation.FlaxOptimDeprecationWarning)
      return cls(*args, **kwargs)
  except Exception as e:  # pylint: disable=broad-except
    # A constructor's own checks (TypeError, ValueError, ...), in one line.
    raise ctx.fail(f'{name}: {e}') from None


def _build_def(node, ctx: _core.Context, outermost: bool):
  """The OptimizerDef of one optimizer call node."""
  if not isinstance(node, ast.Call):
    raise ctx.fail('expected a call such as "Adam(learning_rate=1e-3)", got '
                   f'{_core.source_of(node)}.')
  name = _core.name_in(node.func, _PACKAGE_PREFIXES)
  classes = dict(_optimizer_classes())
  if name not in classes:
    raise ctx.fail(f'unknown optimizer {_core.source_of(node.func)}; one of {", ".join(classes)}.')
  cls = classes[name]
  if cls is base.MultiOptimizer:
    if not outermost:
      raise ctx.fail('MultiOptimizer can only be the outermost optimizer.')
    return _build_multi(node, ctx)
  bound = _core.bind(inspect.signature(cls), name, node, ctx)
  given = {}   # param name -> (param, value) of literal arguments

  def build_one(param, value_node):
    if _takes_def(param):
      if not isinstance(value_node, ast.Call):
        raise ctx.fail(f'{name} argument {ascii(param.name)} takes an optimizer such as '
                       f'Adam(1e-3), got {_core.node_in_words(value_node)}.')
      return _build_def(value_node, ctx, outermost=False)
    value = _def_literal(value_node, param, name, ctx)
    given[param.name] = (param, value)
    return value

  args, kwargs = _core.build_each(bound, build_one)
  opt_def = _construct(cls, args, kwargs, name, ctx)
  for param, value in given.values():
    kinds = _def_argument_kinds(opt_def, param)
    if _is_dtype(value):
      continue
    if kinds is None:
      if isinstance(value, str):
        raise ctx.fail(f'{name} argument {ascii(param.name)} takes no string, got '
                       f'{_core.value_words(value)}.')
      continue
    if not _admits(kinds, value):
      raise ctx.fail(f'{name} argument {ascii(param.name)} takes {_kinds_words(kinds)}, '
                     f'got {_core.value_words(value)}.')
  _check_hyper_params(opt_def, ctx, name)
  return opt_def


def _build_traversal(node, ctx: _core.Context, index: int):
  where = f'MultiOptimizer group {index}'
  if not (isinstance(node, ast.Call)
          and _core.name_in(node.func, _TRAVERSAL_PREFIXES) == 'ModelParamTraversal'):
    raise ctx.fail(f'{where}: expected ModelParamTraversal(\'REGEX\') first, got '
                   f'{_core.node_in_words(node)}.')
  if (len(node.args) + len(node.keywords) != 1
      or any(k.arg != 'filter_fn' for k in node.keywords)):
    raise ctx.fail(f'{where}: ModelParamTraversal takes one argument, a regular expression '
                   'string searched in the parameter path (e.g. \'kernel$\').')
  arg = node.args[0] if node.args else node.keywords[0].value
  if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
    raise ctx.fail(f'{where}: ModelParamTraversal takes a regular expression string (a '
                   'function cannot be given on the command line), got '
                   f'{_core.node_in_words(arg)}.')
  try:
    filter_fn = PathRegex(arg.value)
  except (re.error, RecursionError, OverflowError) as e:
    raise ctx.fail(f'{where}: ModelParamTraversal({_core.quote(arg.value, 40)}): not a valid '
                   f'regular expression ({e}).') from None
  with warnings.catch_warnings():
    # flax deprecates its traversals; the CLI only uses this one to select groups.
    warnings.simplefilter('ignore', DeprecationWarning)
    return RegexTraversal(filter_fn)


def _build_multi(node, ctx: _core.Context):
  if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
    raise ctx.fail('MultiOptimizer takes only (ModelParamTraversal(\'REGEX\'), optimizer) '
                   'pairs, no keywords or *args.')
  if not node.args:
    raise ctx.fail('MultiOptimizer needs at least one (ModelParamTraversal(\'REGEX\'), '
                   'optimizer) pair.')
  pairs = []
  for i, pair in enumerate(node.args):
    if not isinstance(pair, (ast.Tuple, ast.List)) or len(pair.elts) != 2:
      raise ctx.fail(f'MultiOptimizer group {i} must be a (ModelParamTraversal(\'REGEX\'), '
                     f'optimizer) pair, got {_core.node_in_words(pair)}.')
    traversal_node, def_node = pair.elts
    traversal = _build_traversal(traversal_node, ctx, i)
    ctx.where = f'MultiOptimizer group {i}: '
    pairs.append((traversal, _build_def(def_node, ctx, outermost=False)))
    ctx.where = ''
  return _construct(base.MultiOptimizer, pairs, {}, 'MultiOptimizer', ctx)


def parse_optimizer(text: str, *, source: str = '--optimizer'):
  """The :class:`OptimizerDef` that ``text`` writes, built without evaluating it.

  ``text`` is one call of one of :func:`optimizer_classes` (``optim.`` / ``flax.optim.``
  prefixes allowed) with literal arguments: numbers (``-1e-3`` too), ``True``/``False``/``None``
  where the hyper-parameter takes them, and a dtype name (``'float32'``, ``jnp.float32``) for
  a dtype argument. ``WeightNorm`` takes another optimizer call. ``MultiOptimizer`` takes
  ``(ModelParamTraversal('REGEX'), optimizer)`` pairs, where REGEX is searched
  (:func:`re.search`) in each parameter path as the traversal gives it
  (``'/dense/kernel'``; see :class:`PathRegex`).

  Args:
    text: the expression, e.g. ``"Adam(learning_rate=1e-3, weight_decay=1e-4)"``.
    source: how messages name the input (the command-line option).

  Returns:
    The optimizer def.

  Raises:
    ExpressionError: anything else, in one line naming what is wrong.

  Examples:
    >>> from flax_optim_compat._expr import _optimizer
    >>> _optimizer.parse_optimizer('WeightNorm(Momentum(0.1, beta=0.8), wn_decay=1e-3)')
    WeightNorm(Momentum(learning_rate=0.1, beta=0.8, weight_decay=0, nesterov=False), wn_decay=0.001, wn_eps=1e-08)
    >>> multi = _optimizer.parse_optimizer(
    ...     "MultiOptimizer((ModelParamTraversal('kernel$'), Adam(1e-3)),"
    ...     " (ModelParamTraversal('bias$'), GradientDescent(0.1)))")
    >>> multi.traversals
    (ModelParamTraversal('kernel$'), ModelParamTraversal('bias$'))
    >>> _optimizer.path_regexes(multi)
    (PathRegex('kernel$'), PathRegex('bias$'))
    >>> _optimizer.parse_optimizer("Adam(learning_rate='fast')")
    Traceback (most recent call last):
    ...
    flax_optim_compat._expr._core.ExpressionError: --optimizer "Adam(learning_rate='fast')": Adam argument 'learning_rate' takes a number or None, got the string 'fast'.
  """
  ctx = _core.Context(text, source)
  return _build_def(_core.parse_expression(text, ctx), ctx, outermost=True)
