"""The checkpoint tool's command-line expressions (``--optimizer``, ``--tx``): parsed, never evaluated.

A user writes the optimizer that wrote a checkpoint as the Python they already know
(``"Adam(learning_rate=1e-3, weight_decay=1e-4)"``) and the optax transformation to convert into
as optax Python (``"optax.adamw(1e-3, weight_decay=1e-4)"``). Such a string comes from a shell,
a script or a file of unknown origin, so it is never given to ``eval``: it is parsed by the one
checked parse (``_expression_syntax.parse``: sizes checked before ``ast.parse``, depth after),
and every node is checked against an allowlist before anything is built:

* names come from the package itself (its public :class:`OptimizerDef` subclasses) or from the
  installed optax (its public transformations and schedules, recognised by their declared return
  types; the few transformations optax leaves unannotated are named in ``_expr/_optax`` and
  tested against optax);
* arguments are bound to the real signature (``inspect.signature``): arity checked, unknown
  keywords named;
* every literal is checked against what the parameter takes (the hyper-parameter annotations
  of the def, optax's own annotations) before it is used.

Every refusal is one :class:`ExpressionError` line naming the culprit. Messages quote the input
with :func:`ascii`, so a command-line argument holding undecodable bytes (decoded by Python with
``surrogateescape``) is reported, never re-encoded.

The expressions live in four modules, each with one job:

* ``_core`` (this one): the errors and what both expressions share: the checked parse with
  its messages (:func:`parse_expression`), the message context (:class:`Context`), literals
  and dtype names read from nodes, a call's arguments bound to a signature;
* ``_optimizer``: ``--optimizer``, the legacy defs (``WeightNorm`` and ``MultiOptimizer``
  of ``ModelParamTraversal`` regexes included): :func:`parse_optimizer`, :class:`PathRegex`;
* ``_optax``: what the installed optax offers ``--tx``: its transformations and schedules
  by name, and what each parameter accepts, read from optax's annotations;
* ``_tx``: ``--tx``, an optax expression built from those: :func:`parse_tx`,
  :func:`canonical_tx`.
"""
import ast
import inspect
import math
import re
from typing import Optional

import jax.numpy as jnp

from .. import _expression_syntax

__all__ = ['UsageError', 'ExpressionError', 'Context', 'parse_expression', 'dotted', 'name_in',
           'dtype_of', 'DTYPES', 'literal', 'NOT_LITERAL', 'check_number', 'refuse_literal_kind',
           'bind', 'build_each', 'quote', 'source_of', 'node_in_words', 'value_words']

# Module spellings accepted in front of a dtype name.
_DTYPE_PREFIXES = ('jnp', 'jax.numpy', 'np', 'numpy')
DTYPES = ('bfloat16', 'float16', 'float32', 'float64')
_ECHO_CHARS = 80


class UsageError(ValueError):
  """Bad command-line input (reported as one line, exit status 2)."""


class ExpressionError(UsageError):
  """A command-line expression that is refused; the message is one ASCII line naming the culprit."""


# ----------------------------------------------------------------------------- messages


# A value to fill in, as tools that write commands (migrate's report) spell it: ``<name>``.
PLACEHOLDER = re.compile(r'<([A-Za-z_][A-Za-z0-9_]*)>')


def placeholder(name: str) -> str:
  """``<name>``: the spelling every parser here refuses with "fill the placeholder name"."""
  return f'<{name}>'


def one_line(message, encoding: str = 'ascii') -> str:
  """``message`` as one line of text: line breaks become spaces, and the characters
  ``encoding`` cannot write are escaped (the default, ASCII, is safe on any terminal)."""
  text = ' '.join(str(message).splitlines()).strip()
  return text.encode(encoding, 'backslashreplace').decode(encoding)


def quote(text: str, limit: int = _ECHO_CHARS) -> str:
  """``ascii(text)``, cut to about ``limit`` characters."""
  if len(text) <= limit:
    return ascii(text)
  return f'{ascii(text[:limit])[:-1]}...\' ({len(text)} characters)'


def source_of(node) -> str:
  """The source of ``node`` (depth-checked before), quoted for a message."""
  return quote(ast.unparse(node), 60)


def node_in_words(node) -> str:
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
  return f'{kinds.get(type(node), type(node).__name__)} {source_of(node)}'


def value_words(value) -> str:
  if value is None or isinstance(value, bool):
    return repr(value)
  if isinstance(value, str):
    return f'the string {quote(value, 40)}'
  if isinstance(value, (int, float)):
    return f'the number {value!r}'
  return f'{type(value).__name__} {quote(repr(value), 40)}'


class Context:
  """The text being parsed and how to name it in messages (``--optimizer 'Adam(...)'``)."""

  def __init__(self, text: str, source: str):
    self.text = text
    self.source = source
    self.dtype_nodes = set()   # ids of nodes read as a dtype (canonical spelling jnp.<name>)
    self.where = ''            # the part being built, e.g. 'MultiOptimizer group 1: '

  def fail(self, detail: str) -> ExpressionError:
    return ExpressionError(one_line(f'{self.source} {quote(self.text)}: {self.where}{detail}'))


# ----------------------------------------------------------------------------- parsing


def parse_expression(text, ctx: Context) -> ast.expr:
  """``ast.parse(text, mode='eval').body`` after the size checks; every failure one line."""
  if not isinstance(text, str):
    raise ExpressionError(f'{ctx.source}: expected a string, got {type(text).__name__}.')
  try:
    _expression_syntax.check_length(text)
  except _expression_syntax.TextError as e:
    raise ctx.fail(str(e)) from None
  try:
    text.encode('utf-8')
  except UnicodeEncodeError as e:
    char = text[e.start]
    what = (f'the undecodable byte 0x{ord(char) - 0xdc00:02x}'
            if 0xdc80 <= ord(char) <= 0xdcff else f'the lone surrogate {ascii(char)}')
    raise ctx.fail(f'is not valid UTF-8 text ({what} at position {e.start}).') from None
  if not text.strip():
    raise ctx.fail('is empty; expected e.g. "Adam(learning_rate=1e-3)".')
  placeholder = PLACEHOLDER.search(text)
  if placeholder:   # a value the command's writer could not know (e.g. migrate's report)
    raise ctx.fail(f'fill the placeholder {placeholder.group(1)}: replace '
                   f'{placeholder.group(0)} with its value.')
  try:
    return _expression_syntax.parse(text)
  except _expression_syntax.TextError as e:
    raise ctx.fail(str(e)) from None


def dotted(node) -> Optional[str]:
  """``'a.b.c'`` for a chain of names, else None."""
  parts = []
  while isinstance(node, ast.Attribute):
    parts.append(node.attr)
    node = node.value
  if not isinstance(node, ast.Name):
    return None
  parts.append(node.id)
  return '.'.join(reversed(parts))


def name_in(func, prefixes) -> Optional[str]:
  """The name called by ``func`` (``Adam`` for ``Adam``, ``optim.Adam``), or None."""
  if isinstance(func, ast.Name):
    return func.id
  if isinstance(func, ast.Attribute) and dotted(func.value) in prefixes:
    return func.attr
  return None


def dtype_of(node, ctx: Context):
  """The jnp scalar type of ``jnp.float32`` / ``jax.numpy.float32`` / ``'float32'``, or None."""
  if isinstance(node, ast.Constant) and isinstance(node.value, str):
    name = node.value
  elif isinstance(node, ast.Attribute) and dotted(node.value) in _DTYPE_PREFIXES:
    name = node.attr
  else:
    return None
  if name not in DTYPES:
    return None
  ctx.dtype_nodes.add(id(node))
  return getattr(jnp, name)


NOT_LITERAL = object()


def literal(node):
  """The value of a number (``-1e-3`` too), string, bool or None node; else ``NOT_LITERAL``."""
  if isinstance(node, ast.Constant):
    return node.value
  if (isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd))
      and isinstance(node.operand, ast.Constant)
      and type(node.operand.value) in (int, float, complex)):
    return -node.operand.value if isinstance(node.op, ast.USub) else node.operand.value
  return NOT_LITERAL


def check_number(value, where: str, ctx: Context):
  if isinstance(value, float) and not math.isfinite(value):
    raise ctx.fail(f'{where} takes a finite number, got {value!r}.')
  if isinstance(value, int) and not -2**63 <= value < 2**63:
    raise ctx.fail(f'{where}: {value} does not fit in 64 bits.')


def refuse_literal_kind(value, where: str, ctx: Context):
  """Literal kinds no parameter takes here: complex numbers, bytes, ``...``."""
  if isinstance(value, complex):
    raise ctx.fail(f'{where}: complex numbers are not accepted, got {value!r}.')
  if isinstance(value, bytes):
    raise ctx.fail(f'{where}: bytes are not accepted, got {quote(repr(value), 40)}.')
  if value is Ellipsis:
    raise ctx.fail(f'{where}: ... is not accepted.')


def bind(signature: inspect.Signature, name: str, node: ast.Call, ctx: Context):
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


def build_each(bound: inspect.BoundArguments, build_one):
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
