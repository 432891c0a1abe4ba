"""Expression text read as syntax, never evaluated: the one checked parse, the one reading of an
optax expression's calls and keywords.

Two readers share it: the command-line parsers (``_expr``: ``--optimizer``, ``--tx``, which
build what the text writes against allowlists) and the conversion's probe (``_checkpoint``:
the keywords ``--tx`` sets against those of the plain optax expression that continues the
legacy numbers, and how it sets its learning rate). Text from a shell or a file is checked for
size before ``ast.parse`` (a parser fed a 100k-character nested expression runs out of memory
or recursion) and its tree for depth before any recursive walk.

In an optax expression, ``optax.X(...)`` calls ``X``; ``optax.inject_hyperparams(optax.X,
...)(...)`` is ``X``'s call with its hyper-parameters injected; ``optax.chain(a, b)`` is the
calls ``a`` and ``b``; a call's arguments bind to the installed optax's own signature.
"""
import ast
import inspect
import io
import tokenize
from typing import List, Optional, Tuple

import optax

__all__ = ['MAX_CHARS', 'MAX_TOKENS', 'MAX_NESTING', 'TextError', 'check_length', 'parse',
           'optax_name', 'single_function', 'chained', 'bound', 'calls', 'literal_value']

# Size limits, checked on the tokens before `ast.parse`: CPython's parser gives up (MemoryError,
# RecursionError) near 3000 nested nodes. Real expressions are far below: a MultiOptimizer of
# ten groups is about 250 tokens at nesting 4.
MAX_CHARS = 4096
MAX_TOKENS = 1000
MAX_NESTING = 24      # brackets: ( [ {
_MAX_AST_DEPTH = 64   # nodes, checked after parsing, before any recursive walk


class TextError(ValueError):
  """Text refused before or while it is parsed; the message says what is wrong with it
  (``'is 5000 characters long; at most 4096 are accepted.'``), the caller names the text."""


def check_length(text: str) -> None:
  """TextError when ``text`` is longer than :data:`MAX_CHARS`."""
  if len(text) > MAX_CHARS:
    raise TextError(f'is {len(text)} characters long; at most {MAX_CHARS} are accepted.')


def parse(text: str) -> ast.expr:
  """``ast.parse(text, mode='eval').body`` after the size checks (characters, tokens, bracket
  nesting) and with the tree's depth checked; every failure a :class:`TextError`."""
  check_length(text)
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
        raise TextError(f'has more than {MAX_TOKENS} tokens; at most {MAX_TOKENS} are accepted.')
      if max_depth > MAX_NESTING:
        raise TextError(f'nests brackets more than {MAX_NESTING} deep; at most {MAX_NESTING} '
                        'levels are accepted.')
  except (tokenize.TokenError, SyntaxError) as e:
    message = e.args[0] if e.args else type(e).__name__
    raise TextError(f'does not parse ({message}).') from None
  try:
    tree = ast.parse(text.strip(), mode='eval')
  except SyntaxError as e:
    raise TextError(f'does not parse ({e.msg}).') from None
  except (ValueError, MemoryError, RecursionError) as e:  # e.g. a null byte
    raise TextError(f'does not parse ({type(e).__name__}: {e}).') from None
  stack = [(tree.body, 1)]
  while stack:
    node, node_depth = stack.pop()
    if node_depth > _MAX_AST_DEPTH:
      raise TextError(f'nests more than {_MAX_AST_DEPTH} levels deep.')
    stack.extend((child, node_depth + 1) for child in ast.iter_child_nodes(node))
  return tree.body


# ----------------------------------------------------------------------------- optax calls


def optax_name(node) -> Optional[str]:
  """``'X'`` for the node ``optax.X``, else None."""
  if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
      and node.value.id == 'optax':
    return node.attr
  return None


def single_function(text: Optional[str]) -> Optional[str]:
  """``'optax.sgd'`` for the text of one call ``optax.sgd(...)``; None for a chain, a
  multi_transform, an injected call, no text or anything else.

  Examples:
    >>> single_function('optax.sgd(learning_rate=schedule, momentum=0.9)')
    'optax.sgd'
    >>> single_function('optax.chain(optax.clip(1.0), optax.sgd(0.1))') is None
    True
  """
  try:
    node = parse(text) if text else None
  except TextError:
    return None
  name = optax_name(node.func) if isinstance(node, ast.Call) else None
  return None if name in (None, 'chain', 'multi_transform') else f'optax.{name}'


def chained(node) -> List[ast.expr]:
  """The calls ``optax.chain(...)`` chains, or ``[node]`` for anything else."""
  if isinstance(node, ast.Call) and optax_name(node.func) == 'chain':
    return list(node.args)
  return [node]


def _bind(fn, call: ast.Call) -> Optional[inspect.BoundArguments]:
  try:
    return inspect.signature(fn).bind_partial(*call.args, **{
        k.arg: k.value for k in call.keywords if k.arg})
  except (TypeError, ValueError):
    return None


def bound(call) -> Optional[Tuple[str, bool, inspect.BoundArguments]]:
  """``(optax function name, injected, its argument nodes bound to its signature)`` of one
  call node, or None (not a call of an optax function, or arguments that do not bind);
  ``optax.inject_hyperparams(optax.X)(...)`` reads as ``optax.X(...)``, injected."""
  if not isinstance(call, ast.Call):
    return None
  func, injected = call.func, False
  if isinstance(func, ast.Call) and optax_name(func.func) == 'inject_hyperparams':
    outer = _bind(optax.inject_hyperparams, func)
    name = optax_name(outer.arguments.get('inner_factory')) if outer is not None else None
    injected = True
  else:
    name = optax_name(func)
  fn = getattr(optax, name, None) if name else None
  if fn is None or not callable(fn):
    return None
  arguments = _bind(fn, call)
  return None if arguments is None else (name, injected, arguments)


def _source(written) -> str:
  """The source text of an argument node (of the nodes a ``*args`` or ``**kwargs`` took)."""
  if isinstance(written, dict):
    return ', '.join(f'{k}={ast.unparse(v)}' for k, v in written.items())
  if isinstance(written, tuple):
    return ', '.join(ast.unparse(n) for n in written)
  return ast.unparse(written)


def literal_value(node):
  """The Python value of a literal node (numbers, strings, tuples, ...); ValueError else."""
  if not isinstance(node, ast.AST):
    raise ValueError(f'{_source(node)} is not one literal')
  try:
    return ast.literal_eval(node)
  except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
    raise ValueError(f'{ast.unparse(node)} is not a literal') from None


def calls(text: Optional[str]) -> Optional[List[Tuple[str, dict]]]:
  """``[(optax function, {keyword: value})]`` of an optax expression: one call, or the calls of
  an ``optax.chain``; every keyword the call leaves out has optax's default (what the user did
  not write still runs); a value that is no literal is its source text. ``values['']`` is the
  set of keywords written out, ``values['*']`` the numbers ``inject_hyperparams`` injects
  (the state holds them). None for no text, text that does not parse, or something else (a
  multi_transform, a call that does not bind).

  Examples:
    >>> [(name, values['b1'], sorted(values[''])) for name, values in calls(
    ...     'optax.chain(optax.clip(1.0), optax.adam(0.1, b2=0.99))')[1:]]
    [('adam', 0.9, ['b2', 'learning_rate'])]
  """
  if not text:
    return None
  try:
    node = parse(text)
  except TextError:
    return None

  def one(call):
    found = bound(call)
    if found is None:
      return None
    name, injected, arguments = found
    values = {'': set(arguments.arguments), '*': set()}
    for param in arguments.signature.parameters.values():
      if param.name in arguments.arguments:
        written = arguments.arguments[param.name]
        try:
          values[param.name] = literal_value(written)
        except ValueError:
          values[param.name] = _source(written)
          continue
        if injected and isinstance(values[param.name], (int, float)) and not isinstance(
            values[param.name], bool):
          values['*'].add(param.name)
      elif param.default is not inspect.Parameter.empty:
        values[param.name] = param.default
    return name, values

  found = [one(c) for c in chained(node)]
  return None if any(c is None for c in found) else found
