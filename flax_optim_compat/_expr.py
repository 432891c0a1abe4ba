"""The checkpoint tool's command-line expressions (``--optimizer``, ``--tx``): parsed, never evaluated.

A user writes the optimizer that wrote a checkpoint as the Python they already know
(``"Adam(learning_rate=1e-3, weight_decay=1e-4)"``) and the optax transformation to convert into
as optax Python (``"optax.adamw(1e-3, weight_decay=1e-4)"``). Such a string comes from a shell,
a script or a file of unknown origin, so it is never given to ``eval``: it is checked for size
before ``ast.parse`` (a parser fed a 100k-character nested expression runs out of memory or
recursion), parsed, and every node is checked against an allowlist before anything is built:

* names come from the package itself (its public :class:`OptimizerDef` subclasses) or from the
  installed optax (its public transformations and schedules, recognised by their declared return
  types), never from a hand-written list;
* arguments are bound to the real signature (``inspect.signature``): arity checked, unknown
  keywords named;
* every literal is checked against what the parameter takes (the hyper-parameter annotations
  of the def, optax's own annotations) before it is used.

Every refusal is one :class:`ExpressionError` line naming the culprit. Messages quote the input
with :func:`ascii`, so a command-line argument holding undecodable bytes (decoded by Python with
``surrogateescape``) is reported, never re-encoded.
"""
import ast
import collections.abc
import dataclasses
import functools
import inspect
import io
import math
import re
import tokenize
import types
import typing
import warnings
from typing import Any, Callable, Dict, List, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import traverse_util

import flax_optim_compat
from . import _deprecation
from . import _hyper
from . import base

__all__ = ['UsageError', 'ExpressionError', 'PathRegex', 'RegexTraversal', 'MAX_CHARS',
           'MAX_TOKENS', 'MAX_NESTING', 'optimizer_classes', 'parse_optimizer', 'path_regexes',
           'optax_names', 'parse_tx', 'canonical_tx']

# Size limits, checked on the tokens before `ast.parse`: CPython's parser gives up (MemoryError,
# RecursionError) near 3000 nested nodes. Real expressions are far below: a MultiOptimizer of
# ten groups is about 250 tokens at nesting 4.
MAX_CHARS = 4096
MAX_TOKENS = 1000
MAX_NESTING = 24      # brackets: ( [ {
_MAX_AST_DEPTH = 64   # nodes, checked after parsing, before any recursive walk

# Module spellings accepted in front of a name.
_PACKAGE_PREFIXES = ('optim', 'flax_optim_compat', 'flax.optim')
_TRAVERSAL_PREFIXES = _PACKAGE_PREFIXES + ('traverse_util', 'flax.traverse_util')
_DTYPE_PREFIXES = ('jnp', 'jax.numpy', 'np', 'numpy')
_DTYPES = ('bfloat16', 'float16', 'float32', 'float64')
_ECHO_CHARS = 80


class UsageError(ValueError):
  """Bad command-line input (reported as one line, exit status 2)."""


class ExpressionError(UsageError):
  """A command-line expression that is refused; the message is one ASCII line naming the culprit."""


# ----------------------------------------------------------------------------- messages


def _one_line(message: str) -> str:
  """``message`` on one line, non-ASCII characters escaped (safe on any terminal encoding)."""
  text = ' '.join(str(message).split())
  return text.encode('ascii', 'backslashreplace').decode('ascii')


def _quote(text: str, limit: int = _ECHO_CHARS) -> str:
  """``ascii(text)``, cut to about ``limit`` characters."""
  if len(text) <= limit:
    return ascii(text)
  return f'{ascii(text[:limit])[:-1]}...\' ({len(text)} characters)'


def _src(node) -> str:
  """The source of ``node`` (depth-checked before), quoted for a message."""
  return _quote(ast.unparse(node), 60)


def _describe(node) -> str:
  """What ``node`` is, for a refusal: ``a lambda 'lambda: 0'``."""
  kinds = {
      ast.Name: 'the name', ast.Attribute: 'the attribute', ast.Lambda: 'a lambda',
      ast.ListComp: 'a comprehension', ast.SetComp: 'a comprehension',
      ast.DictComp: 'a comprehension', ast.GeneratorExp: 'a comprehension',
      ast.JoinedStr: 'an f-string', ast.FormattedValue: 'an f-string', ast.BinOp: 'arithmetic',
      ast.BoolOp: 'a boolean expression', ast.Compare: 'a comparison',
      ast.IfExp: 'a conditional expression', ast.Subscript: 'a subscript',
      ast.Starred: 'a starred argument', ast.NamedExpr: 'an assignment expression',
      ast.Set: 'a set', ast.Await: 'await', ast.Yield: 'yield', ast.YieldFrom: 'yield',
      ast.Slice: 'a slice', ast.Call: 'a call', ast.UnaryOp: 'an operator',
      ast.List: 'a list', ast.Tuple: 'a tuple', ast.Dict: 'a dict', ast.Constant: 'the literal',
  }
  return f'{kinds.get(type(node), type(node).__name__)} {_src(node)}'


def _value_words(value) -> str:
  if value is None or isinstance(value, bool):
    return repr(value)
  if isinstance(value, str):
    return f'the string {_quote(value, 40)}'
  if isinstance(value, (int, float)):
    return f'the number {value!r}'
  return f'{type(value).__name__} {_quote(repr(value), 40)}'


class _Context:
  """The text being parsed and how to name it in messages (``--optimizer 'Adam(...)'``)."""

  def __init__(self, text: str, source: str):
    self.text = text
    self.source = source
    self.dtype_nodes = set()   # ids of nodes read as a dtype (canonical spelling jnp.<name>)
    self.where = ''            # the part being built, e.g. 'MultiOptimizer group 1: '

  def fail(self, detail: str) -> ExpressionError:
    return ExpressionError(_one_line(f'{self.source} {_quote(self.text)}: {self.where}{detail}'))


# ----------------------------------------------------------------------------- parsing


def _parse(text, ctx: _Context) -> ast.expr:
  """``ast.parse(text, mode='eval').body`` after the size checks; every failure one line."""
  if not isinstance(text, str):
    raise ExpressionError(f'{ctx.source}: expected a string, got {type(text).__name__}.')
  if len(text) > MAX_CHARS:
    raise ctx.fail(f'is {len(text)} characters long; at most {MAX_CHARS} are accepted.')
  try:
    text.encode('utf-8')
  except UnicodeEncodeError as e:
    char = text[e.start]
    what = (f'the undecodable byte 0x{ord(char) - 0xdc00:02x}'
            if 0xdc80 <= ord(char) <= 0xdcff else f'the lone surrogate {ascii(char)}')
    raise ctx.fail(f'is not valid UTF-8 text ({what} at position {e.start}).') from None
  if not text.strip():
    raise ctx.fail('is empty; expected e.g. "Adam(learning_rate=1e-3)".')
  depth = max_depth = count = 0
  try:
    for token in tokenize.generate_tokens(io.StringIO(text.strip()).readline):
      if token.type in (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER, tokenize.COMMENT):
        continue
      count += 1
      if token.type == tokenize.OP and token.string in '([{':
        depth += 1
        max_depth = max(max_depth, depth)
      elif token.type == tokenize.OP and token.string in ')]}':
        depth -= 1
      if count > MAX_TOKENS:
        raise ctx.fail(f'has more than {MAX_TOKENS} tokens; at most {MAX_TOKENS} are accepted.')
      if max_depth > MAX_NESTING:
        raise ctx.fail(f'nests brackets more than {MAX_NESTING} deep; at most {MAX_NESTING} '
                       'levels are accepted.')
  except (tokenize.TokenError, SyntaxError) as e:
    message = e.args[0] if e.args else type(e).__name__
    raise ctx.fail(f'does not parse ({message}).') from None
  try:
    tree = ast.parse(text.strip(), mode='eval')
  except SyntaxError as e:
    raise ctx.fail(f'does not parse ({e.msg}).') from None
  except (ValueError, MemoryError, RecursionError) as e:  # e.g. a null byte
    raise ctx.fail(f'does not parse ({type(e).__name__}: {e}).') from None
  stack = [(tree.body, 1)]
  while stack:
    node, node_depth = stack.pop()
    if node_depth > _MAX_AST_DEPTH:
      raise ctx.fail(f'nests more than {_MAX_AST_DEPTH} levels deep.')
    stack.extend((child, node_depth + 1) for child in ast.iter_child_nodes(node))
  return tree.body


def _dotted(node) -> Optional[str]:
  """``'a.b.c'`` for a chain of names, else None."""
  parts = []
  while isinstance(node, ast.Attribute):
    parts.append(node.attr)
    node = node.value
  if not isinstance(node, ast.Name):
    return None
  parts.append(node.id)
  return '.'.join(reversed(parts))


def _name_in(func, prefixes) -> Optional[str]:
  """The name called by ``func`` (``Adam`` for ``Adam``, ``optim.Adam``), or None."""
  if isinstance(func, ast.Name):
    return func.id
  if isinstance(func, ast.Attribute) and _dotted(func.value) in prefixes:
    return func.attr
  return None


def _dtype(node, ctx: _Context):
  """The jnp scalar type of ``jnp.float32`` / ``jax.numpy.float32`` / ``'float32'``, or None."""
  if isinstance(node, ast.Constant) and isinstance(node.value, str):
    name = node.value
  elif isinstance(node, ast.Attribute) and _dotted(node.value) in _DTYPE_PREFIXES:
    name = node.attr
  else:
    return None
  if name not in _DTYPES:
    return None
  ctx.dtype_nodes.add(id(node))
  return getattr(jnp, name)


_NOT_LITERAL = object()


def _literal(node):
  """The value of a number (``-1e-3`` too), string, bool or None node; else ``_NOT_LITERAL``."""
  if isinstance(node, ast.Constant):
    return node.value
  if (isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd))
      and isinstance(node.operand, ast.Constant)
      and type(node.operand.value) in (int, float, complex)):
    return -node.operand.value if isinstance(node.op, ast.USub) else node.operand.value
  return _NOT_LITERAL


def _check_number(value, where: str, ctx: _Context):
  if isinstance(value, float) and not math.isfinite(value):
    raise ctx.fail(f'{where} takes a finite number, got {value!r}.')
  if isinstance(value, int) and not -2**63 <= value < 2**63:
    raise ctx.fail(f'{where}: {value} does not fit in 64 bits.')


def _refuse_literal_kind(value, where: str, ctx: _Context):
  """Literal kinds no parameter takes here: complex numbers, bytes, ``...``."""
  if isinstance(value, complex):
    raise ctx.fail(f'{where}: complex numbers are not accepted, got {value!r}.')
  if isinstance(value, bytes):
    raise ctx.fail(f'{where}: bytes are not accepted, got {_quote(repr(value), 40)}.')
  if value is Ellipsis:
    raise ctx.fail(f'{where}: ... is not accepted.')


def _bind(signature: inspect.Signature, name: str, node: ast.Call, ctx: _Context):
  """``signature.bind`` of the call's argument nodes; arity and keywords checked by name."""
  if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None
                                                               for k in node.keywords):
    raise ctx.fail(f'{name}: no *args / **kwargs; write the arguments out.')
  params = signature.parameters
  names = ', '.join(params) or 'no arguments'
  accepts_kwargs = any(p.kind is p.VAR_KEYWORD for p in params.values())
  for keyword in node.keywords:
    param = params.get(keyword.arg)
    if not accepts_kwargs and (param is None or param.kind in (param.POSITIONAL_ONLY,
                                                                 param.VAR_POSITIONAL)):
      raise ctx.fail(f'{name} got an unexpected keyword argument {ascii(keyword.arg)} '
                     f'(it takes {names}).')
  positional = [p for p in params.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
  if (not any(p.kind is p.VAR_POSITIONAL for p in params.values())
      and len(node.args) > len(positional)):
    raise ctx.fail(f'{name} takes at most {len(positional)} positional arguments '
                   f'({", ".join(p.name for p in positional) or "none"}), got {len(node.args)}.')
  try:
    return signature.bind(*node.args, **{k.arg: k.value for k in node.keywords})
  except TypeError as e:
    raise ctx.fail(f'{name}: {e}.') from None


def _build_each(bound: inspect.BoundArguments, build_one):
  """``(args, kwargs)`` of ``bound`` with ``build_one(param, node)`` in place of every node."""
  arguments = {}
  params = bound.signature.parameters
  for name, value in bound.arguments.items():
    param = params[name]
    if param.kind is param.VAR_POSITIONAL:
      arguments[name] = tuple(build_one(param, item) for item in value)
    elif param.kind is param.VAR_KEYWORD:
      arguments[name] = {key: build_one(param.replace(name=key), item)
                         for key, item in value.items()}
    else:
      arguments[name] = build_one(param, value)
  built = inspect.BoundArguments(bound.signature, arguments)
  return built.args, built.kwargs


# ----------------------------------------------------------------------------- --optimizer


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
    >>> from flax_optim_compat._expr import PathRegex
    >>> kernels = PathRegex('kernel$')
    >>> kernels('/dense/kernel', None), kernels('/dense/bias', None)
    (True, False)
    >>> kernels.matches_keys(('dense', 'kernel'))
    True
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

  def matches_keys(self, keys) -> bool:
    """The same test for the keys of a path (``('dense', 'kernel')`` -> ``'/dense/kernel'``)."""
    return self('/' + '/'.join(str(k) for k in keys))

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
    >>> from flax_optim_compat._expr import PathRegex, RegexTraversal
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
    >>> from flax_optim_compat import _expr
    >>> _expr.path_regexes(_expr.parse_optimizer(
    ...     "MultiOptimizer((ModelParamTraversal('kernel$'), Adam(1e-3)))"))
    (PathRegex('kernel$'),)
    >>> _expr.path_regexes(_expr.parse_optimizer('Adam(1e-3)')) is None
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
    >>> from flax_optim_compat import _expr
    >>> 'Adam' in _expr.optimizer_classes(), 'OptimizerDef' in _expr.optimizer_classes()
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


def _check_hyper_params(opt_def, ctx: _Context, name: str) -> None:
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


def _def_literal(node, param: inspect.Parameter, name: str, ctx: _Context):
  """The value of a literal argument of optimizer ``name``, before the def is built."""
  where = f'{name} argument {ascii(param.name)}'
  value = _literal(node)
  if value is _NOT_LITERAL:
    dtype = _dtype(node, ctx)
    if dtype is not None and param.default is not param.empty and _is_dtype(param.default):
      return dtype
    if isinstance(node, ast.Call) and _name_in(node.func, _PACKAGE_PREFIXES) in dict(
        _optimizer_classes()):
      raise ctx.fail(f'{where}: only {" and ".join(_wrappers())} takes an optimizer argument.')
    if isinstance(node, (ast.List, ast.Tuple, ast.Dict, ast.Set)):
      raise ctx.fail(f'{where} takes a single literal, not {_describe(node)}.')
    raise ctx.fail(f'{where}: only literal arguments are allowed (numbers, strings, '
                   f'True/False/None), not {_describe(node)}.')
  _refuse_literal_kind(value, where, ctx)
  if isinstance(value, str) and param.default is not param.empty and _is_dtype(param.default):
    dtype = _dtype(node, ctx)
    if dtype is None:
      raise ctx.fail(f'{where} takes a dtype ({", ".join(_DTYPES)}), got {_value_words(value)}.')
    return dtype
  if isinstance(value, (int, float)) and not isinstance(value, bool):
    _check_number(value, where, ctx)
  return value


def _is_dtype(value) -> bool:
  try:
    return isinstance(value, type) and jnp.issubdtype(jnp.dtype(value), jnp.floating)
  except TypeError:
    return False


def _construct(cls, args, kwargs, name: str, ctx: _Context):
  try:
    with warnings.catch_warnings():
      warnings.simplefilter('ignore', _deprecation.FlaxOptimDeprecationWarning)
      return cls(*args, **kwargs)
  except Exception as e:  # pylint: disable=broad-except
    # A constructor's own checks (TypeError, ValueError, ...), in one line.
    raise ctx.fail(f'{name}: {e}') from None


def _build_def(node, ctx: _Context, outermost: bool):
  """The OptimizerDef of one optimizer call node."""
  if not isinstance(node, ast.Call):
    raise ctx.fail(f'expected a call such as "Adam(learning_rate=1e-3)", got {_src(node)}.')
  name = _name_in(node.func, _PACKAGE_PREFIXES)
  classes = dict(_optimizer_classes())
  if name not in classes:
    raise ctx.fail(f'unknown optimizer {_src(node.func)}; one of {", ".join(classes)}.')
  cls = classes[name]
  if cls is base.MultiOptimizer:
    if not outermost:
      raise ctx.fail('MultiOptimizer can only be the outermost optimizer.')
    return _build_multi(node, ctx)
  bound = _bind(inspect.signature(cls), name, node, ctx)
  given = {}   # param name -> (param, value) of literal arguments

  def build_one(param, value_node):
    if _takes_def(param):
      if not isinstance(value_node, ast.Call):
        raise ctx.fail(f'{name} argument {ascii(param.name)} takes an optimizer such as '
                       f'Adam(1e-3), got {_describe(value_node)}.')
      return _build_def(value_node, ctx, outermost=False)
    value = _def_literal(value_node, param, name, ctx)
    given[param.name] = (param, value)
    return value

  args, kwargs = _build_each(bound, build_one)
  opt_def = _construct(cls, args, kwargs, name, ctx)
  for param, value in given.values():
    kinds = _def_argument_kinds(opt_def, param)
    if _is_dtype(value):
      continue
    if kinds is None:
      if isinstance(value, str):
        raise ctx.fail(f'{name} argument {ascii(param.name)} takes no string, got '
                       f'{_value_words(value)}.')
      continue
    if not _admits(kinds, value):
      raise ctx.fail(f'{name} argument {ascii(param.name)} takes {_kinds_words(kinds)}, '
                     f'got {_value_words(value)}.')
  _check_hyper_params(opt_def, ctx, name)
  return opt_def


def _build_traversal(node, ctx: _Context, index: int):
  where = f'MultiOptimizer group {index}'
  if not (isinstance(node, ast.Call)
          and _name_in(node.func, _TRAVERSAL_PREFIXES) == 'ModelParamTraversal'):
    raise ctx.fail(f'{where}: expected ModelParamTraversal(\'REGEX\') first, got '
                   f'{_describe(node)}.')
  if (len(node.args) + len(node.keywords) != 1
      or any(k.arg != 'filter_fn' for k in node.keywords)):
    raise ctx.fail(f'{where}: ModelParamTraversal takes one argument, a regular expression '
                   'string searched in the parameter path (e.g. \'kernel$\').')
  arg = node.args[0] if node.args else node.keywords[0].value
  if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
    raise ctx.fail(f'{where}: ModelParamTraversal takes a regular expression string (a '
                   f'function cannot be given on the command line), got {_describe(arg)}.')
  try:
    filter_fn = PathRegex(arg.value)
  except (re.error, RecursionError, OverflowError) as e:
    raise ctx.fail(f'{where}: ModelParamTraversal({_quote(arg.value, 40)}): not a valid '
                   f'regular expression ({e}).') from None
  with warnings.catch_warnings():
    # flax deprecates its traversals; the CLI only uses this one to select groups.
    warnings.simplefilter('ignore', DeprecationWarning)
    return RegexTraversal(filter_fn)


def _build_multi(node, ctx: _Context):
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
                     f'optimizer) pair, got {_describe(pair)}.')
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
    >>> from flax_optim_compat import _expr
    >>> _expr.parse_optimizer('WeightNorm(Momentum(0.1, beta=0.8), wn_decay=1e-3)')
    WeightNorm(Momentum(learning_rate=0.1, beta=0.8, weight_decay=0, nesterov=False), wn_decay=0.001, wn_eps=1e-08)
    >>> multi = _expr.parse_optimizer(
    ...     "MultiOptimizer((ModelParamTraversal('kernel$'), Adam(1e-3)),"
    ...     " (ModelParamTraversal('bias$'), GradientDescent(0.1)))")
    >>> multi.traversals
    (ModelParamTraversal('kernel$'), ModelParamTraversal('bias$'))
    >>> _expr.path_regexes(multi)
    (PathRegex('kernel$'), PathRegex('bias$'))
    >>> _expr.parse_optimizer("Adam(learning_rate='fast')")
    Traceback (most recent call last):
    ...
    flax_optim_compat._expr.ExpressionError: --optimizer "Adam(learning_rate='fast')": Adam argument 'learning_rate' takes a number or None, got the string 'fast'.
  """
  ctx = _Context(text, source)
  return _build_def(_parse(text, ctx), ctx, outermost=True)


# ----------------------------------------------------------------------------- --tx


@dataclasses.dataclass(frozen=True)
class _Accepts:
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
  items: Optional['_Accepts'] = None         # Sequence[X] / tuple[X, ...]
  fixed_items: Optional[Tuple['_Accepts', ...]] = None   # tuple[A, B]
  keys: Optional['_Accepts'] = None          # Mapping[K, V]
  values: Optional['_Accepts'] = None

  def merge(self, other: '_Accepts') -> '_Accepts':
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
    return _Accepts(**merged)

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


_ANYTHING = _Accepts(anything=True)
_NUMERIC_TYPES = (float, complex, np.ndarray, np.number, jax.Array)


def _accepts(annotation) -> _Accepts:
  """What a parameter annotated ``annotation`` takes (optax's own annotations)."""
  try:
    return _accepts_cached(annotation)
  except TypeError:  # unhashable annotation
    return _ANYTHING


@functools.lru_cache(maxsize=None)
def _accepts_cached(annotation) -> _Accepts:
  if annotation in (inspect.Parameter.empty, typing.Any, collections.abc.Hashable) or isinstance(
      annotation, (typing.ForwardRef, typing.TypeVar, str)):
    return _ANYTHING
  if annotation is None or annotation is type(None):
    return _Accepts(none=True)
  if annotation == optax.Schedule:
    return _Accepts(schedule=True)
  origin, args = typing.get_origin(annotation), typing.get_args(annotation)
  if origin is typing.Union or isinstance(annotation, types.UnionType):
    result = _Accepts()
    for arg in args:
      result = result.merge(_accepts(arg))
    return result
  if origin is typing.Literal:
    return _Accepts(string=True, choices=tuple(a for a in args if isinstance(a, str)))
  if origin is type:
    return _Accepts(dtype=True)
  if origin is collections.abc.Callable:
    returns = args[-1] if args else None
    if isinstance(returns, type) and issubclass(returns, optax.GradientTransformation):
      return _Accepts()   # a factory: only inject_hyperparams takes one, handled there
    if len(args) == 2 and isinstance(args[0], list) and len(args[0]) == 1:
      return _Accepts(schedule=True)   # Callable[[count], value]
    return _Accepts()
  if origin in (tuple,) and args and args[-1] is not Ellipsis:
    return _Accepts(fixed_items=tuple(_accepts(a) for a in args))
  if origin in (list, tuple, collections.abc.Sequence, collections.abc.Iterable):
    return _Accepts(items=_accepts(args[0]) if args else _ANYTHING)
  if origin in (dict, collections.abc.Mapping):
    if len(args) != 2:
      return _Accepts(keys=_ANYTHING, values=_ANYTHING)
    return _Accepts(keys=_accepts(args[0]), values=_accepts(args[1]))
  if not isinstance(annotation, type):
    return _ANYTHING
  if issubclass(annotation, optax.GradientTransformation):
    return _Accepts(transform=True)
  if annotation in (bool, np.bool_):
    return _Accepts(boolean=True)
  if annotation is int:
    return _Accepts(integer=True)
  if annotation is str:
    return _Accepts(string=True)
  if annotation is np.dtype or annotation.__name__ == 'SupportsDType':
    return _Accepts(dtype=True)
  if issubclass(annotation, _NUMERIC_TYPES):
    return _Accepts(real=True)
  return _Accepts()   # another class (a protocol of functions, ...): not expressible


def _signature(fn) -> inspect.Signature:
  """``fn``'s signature, annotations resolved where a module writes them as strings."""
  try:
    # Evaluates the annotation strings of optax's own source, never the user's text.
    return inspect.signature(fn, eval_str=True)
  except Exception:  # pylint: disable=broad-except
    return inspect.signature(fn)


@functools.lru_cache(maxsize=None)
def _optax_callables() -> Tuple[Dict[str, Callable], Dict[str, Callable]]:
  """``(transformations, schedules)``: optax's public callables by declared return type."""
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
      returns = _signature(obj).return_annotation
    except Exception:  # pylint: disable=broad-except
      continue
    if isinstance(returns, type) and issubclass(returns, optax.GradientTransformation):
      transforms[name] = obj
    elif returns == optax.Schedule:
      schedules[name] = obj
  return transforms, schedules


def optax_names() -> Dict[str, List[str]]:
  """The optax names ``--tx`` accepts: ``{'transformations': [...], 'schedules': [...]}``.

  Taken from the installed optax: its public callables declared to return a
  ``GradientTransformation`` or a schedule, plus ``inject_hyperparams``.

  Examples:
    >>> from flax_optim_compat import _expr
    >>> names = _expr.optax_names()
    >>> 'adamw' in names['transformations'], 'exponential_decay' in names['schedules']
    (True, True)
  """
  transforms, schedules = _optax_callables()
  return {'transformations': sorted(transforms) + ['inject_hyperparams'],
          'schedules': sorted(schedules)}


def _call(fn, args, kwargs, what: str, ctx: _Context):
  try:
    return fn(*args, **kwargs)
  except Exception as e:  # pylint: disable=broad-except
    # optax's own argument checks (ValueError, TypeError, AssertionError, ...), in one line.
    raise ctx.fail(f'{what}: {type(e).__name__}: {e}') from None


def _optax_name(func) -> Optional[str]:
  return func.attr if isinstance(func, ast.Attribute) and _dotted(func.value) == 'optax' else None


def _tx_call(node: ast.Call, ctx: _Context):
  """``(kind, value)`` of an optax call node: kind 'transform' or 'schedule'."""
  transforms, schedules = _optax_callables()
  if isinstance(node.func, ast.Call):
    return 'transform', _inject_call(node, ctx)
  name = _optax_name(node.func)
  if name == 'inject_hyperparams':
    raise ctx.fail('optax.inject_hyperparams(optax.X, ...) must be called with the '
                   'hyper-parameters: optax.inject_hyperparams(optax.adam)(learning_rate=1e-3).')
  if name in transforms:
    kind, fn = 'transform', transforms[name]
  elif name in schedules:
    kind, fn = 'schedule', schedules[name]
  else:
    what = f'optax.{name}' if name else _src(node.func)
    raise ctx.fail(f'{what} is not an optax transformation or '
                   'schedule; expected e.g. optax.adamw(1e-3), optax.chain(...), '
                   'optax.inject_hyperparams(optax.adam)(learning_rate=1e-3).')
  label = f'optax.{name}'
  bound = _bind(_signature(fn), label, node, ctx)

  def build_one(param, value_node):
    accepts = _accepts(param.annotation)
    return _tx_value(value_node, accepts, _argument(label, param), ctx)

  args, kwargs = _build_each(bound, build_one)
  if name in ('multi_transform', 'partition'):
    _check_labels(bound, args, kwargs, label, ctx)
  return kind, _call(fn, args, kwargs, label, ctx)


def _check_labels(bound, args, kwargs, label: str, ctx: _Context):
  """Every label of a multi_transform's labels tree names one of its transforms."""
  values = dict(zip(bound.signature.parameters, args), **kwargs)
  transforms, labels = values.get('transforms'), values.get('param_labels')
  if not isinstance(transforms, dict):
    return
  seen = []
  stack = [labels]
  while stack:
    item = stack.pop()
    if isinstance(item, dict):
      stack.extend(item.values())
    elif isinstance(item, (list, tuple)):
      stack.extend(item)
    else:
      seen.append(item)
  for item in seen:
    if not isinstance(item, str) and not isinstance(item, int):
      raise ctx.fail(f'{label}: a label must be a string, got {_value_words(item)} (a label '
                     'function cannot be given on the command line; write the labels as a '
                     "nested dict, e.g. {'dense': {'kernel': 'decay', 'bias': 'plain'}}).")
    if item not in transforms:
      raise ctx.fail(f'{label}: label {ascii(item)} has no transformation (the transforms '
                     f'are {", ".join(ascii(k) for k in transforms)}).')


def _inject_call(node: ast.Call, ctx: _Context):
  """``optax.inject_hyperparams(optax.X, ...)(hyper-params)``."""
  inner = node.func
  if _optax_name(inner.func) != 'inject_hyperparams':
    raise ctx.fail(f'only optax.inject_hyperparams(...)(...) may be called twice, not '
                   f'{_src(inner.func)}.')
  transforms, _ = _optax_callables()
  label = 'optax.inject_hyperparams'
  bound = _bind(_signature(optax.inject_hyperparams), label, inner, ctx)
  factory_name = None

  def build_one(param, value_node):
    nonlocal factory_name
    if param.name == 'inner_factory':
      factory_name = _optax_name(value_node)
      if factory_name not in transforms or factory_name in ('chain', 'multi_transform'):
        raise ctx.fail(f'{label} takes an optax transformation function such as optax.adam '
                       f'(not called), got {_describe(value_node)}.')
      return transforms[factory_name]
    return _tx_value(value_node, _accepts(param.annotation), _argument(label, param), ctx)

  args, kwargs = _build_each(bound, build_one)
  factory = _call(optax.inject_hyperparams, args, kwargs, label, ctx)
  inner_label = f'optax.inject_hyperparams(optax.{factory_name})'
  bound = _bind(_signature(transforms[factory_name]), inner_label, node, ctx)

  def build_hyper(param, value_node):
    accepts = _accepts(param.annotation)
    if accepts.real:   # injected numeric hyper-params may be schedules of the step
      accepts = dataclasses.replace(accepts, schedule=True)
    return _tx_value(value_node, accepts, _argument(inner_label, param), ctx)

  args, kwargs = _build_each(bound, build_hyper)
  return _call(factory, args, kwargs, inner_label, ctx)


def _argument(label: str, param: inspect.Parameter) -> str:
  if param.kind is param.VAR_POSITIONAL:
    return f'{label} argument *{param.name}'
  return f'{label} argument {ascii(param.name)}'


def _tx_value(node, accepts: _Accepts, where: str, ctx: _Context):
  """The value of an argument node, checked against what the parameter ``accepts``."""
  if isinstance(node, ast.Call):
    if not isinstance(node.func, ast.Call) and not _optax_name(node.func):
      raise ctx.fail(f'{where}: only literals and optax calls are allowed, not '
                     f'{_describe(node)}.')
    kind, value = _tx_call(node, ctx)
    if not getattr(accepts, kind):
      kind_words = 'transformation' if kind == 'transform' else kind
      raise ctx.fail(f'{where} takes {accepts.words()}, not the optax {kind_words} '
                     f'{_src(node)}.')
    return value
  if _optax_name(node) in _optax_callables()[0] or _optax_name(node) in _optax_callables()[1]:
    raise ctx.fail(f'{where}: optax.{node.attr} must be called, e.g. optax.{node.attr}(...).')
  if isinstance(node, (ast.Tuple, ast.List)):
    if accepts.fixed_items is not None:
      if len(node.elts) != len(accepts.fixed_items):
        raise ctx.fail(f'{where} takes {len(accepts.fixed_items)} items, got '
                       f'{len(node.elts)}.')
      items = [_tx_value(e, a, where, ctx) for e, a in zip(node.elts, accepts.fixed_items)]
    elif accepts.items is not None or accepts.anything:
      items = [_tx_value(e, accepts.items or _ANYTHING, where, ctx) for e in node.elts]
    else:
      raise ctx.fail(f'{where} takes {accepts.words()}, not {_describe(node)}.')
    return tuple(items) if isinstance(node, ast.Tuple) else items
  if isinstance(node, ast.Dict):
    if accepts.values is None and not accepts.anything:
      raise ctx.fail(f'{where} takes {accepts.words()}, not {_describe(node)}.')
    result = {}
    for key_node, value_node in zip(node.keys, node.values):
      key = _literal(key_node) if key_node is not None else _NOT_LITERAL
      if isinstance(key, bool) or not isinstance(key, (str, int)):
        raise ctx.fail(f'{where}: dict keys must be strings or integers, not '
                       f'{_describe(key_node) if key_node is not None else "**"}.')
      keys = accepts.keys or _ANYTHING
      if not keys.anything and not (keys.string if isinstance(key, str) else
                                    keys.integer or keys.real):
        raise ctx.fail(f'{where}: a key must be {keys.words()}, got {_value_words(key)}.')
      result[key] = _tx_value(value_node, accepts.values or _ANYTHING, where, ctx)
    return result
  # A dtype name: jnp.float32 wherever a value may be one, 'float32' where a dtype is declared.
  if accepts.dtype or (accepts.anything and isinstance(node, ast.Attribute)):
    dtype = _dtype(node, ctx)
    if dtype is not None:
      return dtype
  value = _literal(node)
  if value is _NOT_LITERAL:
    raise ctx.fail(f'{where}: only literals and optax calls are allowed, not '
                   f'{_describe(node)}.')
  _refuse_literal_kind(value, where, ctx)
  if value is None:
    ok = accepts.none or accepts.anything
  elif isinstance(value, bool):
    ok = accepts.boolean or accepts.anything
  elif isinstance(value, int):
    ok = accepts.integer or accepts.real or accepts.anything
  elif isinstance(value, float):
    ok = accepts.real or accepts.anything
  else:  # str
    ok = ((accepts.string and (not accepts.choices or value in accepts.choices))
          or accepts.anything)
  if not ok:
    if accepts.dtype and isinstance(value, str):
      raise ctx.fail(f'{where} takes {accepts.words()}; {_value_words(value)} is not one of '
                     f'{", ".join(_DTYPES)}.')
    raise ctx.fail(f'{where} takes {accepts.words()}, got {_value_words(value)}.')
  if isinstance(value, (int, float)) and not isinstance(value, bool):
    _check_number(value, where, ctx)
  return value


def _parse_tx(text: str, source: str):
  ctx = _Context(text, source)
  node = _parse(text, ctx)
  if _optax_name(node) in _optax_callables()[0]:
    raise ctx.fail(f'optax.{node.attr} must be called, e.g. optax.{node.attr}(...).')
  if not isinstance(node, ast.Call):
    raise ctx.fail(f'expected an optax transformation such as "optax.adamw(1e-3)", got '
                   f'{_describe(node)}.')
  if not isinstance(node.func, ast.Call) and not _optax_name(node.func):
    raise ctx.fail(f'{_src(node.func)} is not an optax transformation; expected e.g. '
                   'optax.adamw(1e-3), optax.chain(...), '
                   'optax.inject_hyperparams(optax.adam)(learning_rate=1e-3).')
  kind, tx = _tx_call(node, ctx)
  if kind != 'transform':
    raise ctx.fail(f'expected an optax transformation, got the schedule {_src(node)}.')
  return tx, node, ctx


def parse_tx(text: str, *, source: str = '--tx') -> optax.GradientTransformation:
  """The optax transformation that ``text`` writes, built without evaluating it.

  Accepted, with keywords checked against optax's own signatures and every literal against
  the parameter's annotation:

  * ``optax.<name>(...)`` for every public optax function declared to return a
    ``GradientTransformation`` (aliases such as ``adamw``, ``sgd``, ``lamb``, ``rmsprop``;
    transforms such as ``scale_by_adam``, ``add_decayed_weights``, ``trace``,
    ``set_to_zero``), and ``optax.chain(...)`` of them;
  * ``optax.inject_hyperparams(optax.X, hyperparam_dtype=jnp.float32)(...)`` (also
    ``jax.numpy.float32`` / ``'float32'``; a numeric hyper-parameter may be a schedule);
  * ``optax.multi_transform({'label': tx, ...}, labels)`` where ``labels`` is a label string
    or a literal nested dict of label strings that mirrors the params (a label function
    cannot be written on the command line);
  * schedules where a parameter takes one (``optax.exponential_decay(1e-3, 100, 0.9)``);
  * literals: numbers (``-1e-3``), strings, ``True``/``False``/``None``, and tuples, lists and
    dicts of them where the parameter takes a container.

  Args:
    text: the expression, e.g. ``"optax.adamw(1e-3, weight_decay=1e-4)"``.
    source: how messages name the input (the command-line option).

  Returns:
    The ``optax.GradientTransformation``.

  Raises:
    ExpressionError: anything else, in one line naming what is wrong.

  Examples:
    >>> import jax.numpy as jnp
    >>> from flax_optim_compat import _expr
    >>> tx = _expr.parse_tx('optax.chain(optax.trace(decay=0.9), optax.scale(-0.5))')
    >>> updates, _ = tx.update({'w': jnp.array([4.0])}, tx.init({'w': jnp.array([1.0])}))
    >>> updates['w']
    Array([-2.], dtype=float32)
    >>> _expr.parse_tx('optax.adam(1e-3, beta1=0.9)')
    Traceback (most recent call last):
    ...
    flax_optim_compat._expr.ExpressionError: --tx 'optax.adam(1e-3, beta1=0.9)': optax.adam got an unexpected keyword argument 'beta1' (it takes learning_rate, b1, b2, eps, eps_root, mu_dtype, nesterov).
  """
  return _parse_tx(text, source)[0]


class _Canonical(ast.NodeTransformer):
  """Every dtype spelling as ``jnp.<name>``."""

  def __init__(self, dtype_nodes):
    self.dtype_nodes = dtype_nodes

  def visit(self, node):
    if id(node) in self.dtype_nodes:
      name = node.value if isinstance(node, ast.Constant) else node.attr
      return ast.Attribute(value=ast.Name(id='jnp', ctx=ast.Load()), attr=name, ctx=ast.Load())
    return super().visit(node)


def canonical_tx(text: str, *, source: str = '--tx') -> str:
  """``text`` checked as :func:`parse_tx` does, in one normal spelling (for messages).

  Spacing and quotes as ``ast.unparse`` writes them; dtypes as ``jnp.float32``.

  Examples:
    >>> from flax_optim_compat import _expr
    >>> _expr.canonical_tx('optax.inject_hyperparams(optax.sgd, hyperparam_dtype="float32")'
    ...                    '( learning_rate = 0.1 )')
    'optax.inject_hyperparams(optax.sgd, hyperparam_dtype=jnp.float32)(learning_rate=0.1)'
  """
  _, node, ctx = _parse_tx(text, source)
  return ast.unparse(_Canonical(ctx.dtype_nodes).visit(node))
