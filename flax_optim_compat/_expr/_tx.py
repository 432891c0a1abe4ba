"""``--tx``: the optax transformation an expression writes, built without evaluating it.

``optax.X(...)`` calls of what ``_optax`` allows, ``optax.chain``, ``optax.multi_transform``
with a literal labels tree, ``optax.inject_hyperparams(optax.X)(...)`` and schedules, every
literal checked against optax's own annotations. Parsing, limits and errors are ``_core``'s;
what names an optax function is ``_expression_syntax``'s (the probe reads ``--tx`` by it too).
"""
import ast
import dataclasses
import inspect

import optax

from .._expression_syntax import optax_name as _optax_name
from . import _core
from . import _optax

__all__ = ['parse_tx', 'canonical_tx']


def _call(fn, args, kwargs, what: str, ctx: _core.Context):
  try:
    return fn(*args, **kwargs)
  except Exception as e:  # pylint: disable=broad-except
    # optax's own argument checks (ValueError, TypeError, AssertionError, ...), in one line.
    raise ctx.fail(f'{what}: {type(e).__name__}: {e}') from None


def _tx_call(node: ast.Call, ctx: _core.Context):
  """``(kind, value)`` of an optax call node: kind 'transform' or 'schedule'."""
  transforms, schedules = _optax.callables()
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
    what = f'optax.{name}' if name else _core.source_of(node.func)
    raise ctx.fail(f'{what} is not an optax transformation or '
                   'schedule; expected e.g. optax.adamw(1e-3), optax.chain(...), '
                   'optax.inject_hyperparams(optax.adam)(learning_rate=1e-3).')
  label = f'optax.{name}'
  bound = _core.bind(_optax.signature(fn), label, node, ctx)

  def build_one(param, value_node):
    accepts = _optax.parameter_accepts(param)
    return _tx_value(value_node, accepts, _argument(label, param), ctx)

  args, kwargs = _core.build_each(bound, build_one)
  if name in ('multi_transform', 'partition'):
    _check_labels(bound, args, kwargs, label, ctx)
  return kind, _call(fn, args, kwargs, label, ctx)


def _check_labels(bound, args, kwargs, label: str, ctx: _core.Context):
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
      raise ctx.fail(f'{label}: a label must be a string, got {_core.value_words(item)} (a label '
                     'function cannot be given on the command line; write the labels as a '
                     "nested dict, e.g. {'dense': {'kernel': 'decay', 'bias': 'plain'}}).")
    if item not in transforms:
      raise ctx.fail(f'{label}: label {ascii(item)} has no transformation (the transforms '
                     f'are {", ".join(ascii(k) for k in transforms)}).')


def _inject_call(node: ast.Call, ctx: _core.Context):
  """``optax.inject_hyperparams(optax.X, ...)(hyper-params)``."""
  inner = node.func
  if _optax_name(inner.func) != 'inject_hyperparams':
    raise ctx.fail(f'only optax.inject_hyperparams(...)(...) may be called twice, not '
                   f'{_core.source_of(inner.func)}.')
  transforms, _ = _optax.callables()
  label = 'optax.inject_hyperparams'
  bound = _core.bind(_optax.signature(optax.inject_hyperparams), label, inner, ctx)
  factory_name = None

  def build_one(param, value_node):
    nonlocal factory_name
    if param.name == 'inner_factory':
      factory_name = _optax_name(value_node)
      if factory_name not in transforms or factory_name in ('chain', 'multi_transform'):
        raise ctx.fail(f'{label} takes an optax transformation function such as optax.adam '
                       f'(not called), got {_core.node_in_words(value_node)}.')
      return transforms[factory_name]
    return _tx_value(value_node, _optax.parameter_accepts(param),
                     _argument(label, param), ctx)

  args, kwargs = _core.build_each(bound, build_one)
  factory = _call(optax.inject_hyperparams, args, kwargs, label, ctx)
  inner_label = f'optax.inject_hyperparams(optax.{factory_name})'
  bound = _core.bind(_optax.signature(transforms[factory_name]), inner_label, node, ctx)

  def build_hyper(param, value_node):
    accepts = _optax.parameter_accepts(param)
    if accepts.real:   # injected numeric hyper-params may be schedules of the step
      accepts = dataclasses.replace(accepts, schedule=True)
    return _tx_value(value_node, accepts, _argument(inner_label, param), ctx)

  args, kwargs = _core.build_each(bound, build_hyper)
  return _call(factory, args, kwargs, inner_label, ctx)


def _argument(label: str, param: inspect.Parameter) -> str:
  if param.kind is param.VAR_POSITIONAL:
    return f'{label} argument *{param.name}'
  return f'{label} argument {ascii(param.name)}'


def _tx_value(node, accepts: _optax.Accepts, where: str, ctx: _core.Context):
  """The value of an argument node, checked against what the parameter ``accepts``."""
  if isinstance(node, ast.Call):
    if not isinstance(node.func, ast.Call) and not _optax_name(node.func):
      raise ctx.fail(f'{where}: only literals and optax calls are allowed, not '
                     f'{_core.node_in_words(node)}.')
    kind, value = _tx_call(node, ctx)
    if not getattr(accepts, kind):
      kind_words = 'transformation' if kind == 'transform' else kind
      raise ctx.fail(f'{where} takes {accepts.words()}, not the optax {kind_words} '
                     f'{_core.source_of(node)}.')
    return value
  transforms, schedules = _optax.callables()
  if _optax_name(node) in transforms or _optax_name(node) in schedules:
    raise ctx.fail(f'{where}: optax.{node.attr} must be called, e.g. optax.{node.attr}(...).')
  if isinstance(node, (ast.Tuple, ast.List)):
    if accepts.fixed_items is not None:
      if len(node.elts) != len(accepts.fixed_items):
        raise ctx.fail(f'{where} takes {len(accepts.fixed_items)} items, got '
                       f'{len(node.elts)}.')
      items = [_tx_value(e, a, where, ctx) for e, a in zip(node.elts, accepts.fixed_items)]
    elif accepts.items is not None or accepts.anything:
      items = [_tx_value(e, accepts.items or _optax.ANYTHING, where, ctx) for e in node.elts]
    else:
      raise ctx.fail(f'{where} takes {accepts.words()}, not {_core.node_in_words(node)}.')
    return tuple(items) if isinstance(node, ast.Tuple) else items
  if isinstance(node, ast.Dict):
    if accepts.values is None and not accepts.anything:
      raise ctx.fail(f'{where} takes {accepts.words()}, not {_core.node_in_words(node)}.')
    result = {}
    for key_node, value_node in zip(node.keys, node.values):
      key = _core.literal(key_node) if key_node is not None else _core.NOT_LITERAL
      if isinstance(key, bool) or not isinstance(key, (str, int)):
        raise ctx.fail(f'{where}: dict keys must be strings or integers, not '
                       f'{_core.node_in_words(key_node) if key_node is not None else "**"}.')
      keys = accepts.keys or _optax.ANYTHING
      if not keys.anything and not (keys.string if isinstance(key, str) else
                                    keys.integer or keys.real):
        raise ctx.fail(f'{where}: a key must be {keys.words()}, got {_core.value_words(key)}.')
      result[key] = _tx_value(value_node, accepts.values or _optax.ANYTHING, where, ctx)
    return result
  # A dtype name: jnp.float32 wherever a value may be one, 'float32' where a dtype is declared.
  if accepts.dtype or (accepts.anything and isinstance(node, ast.Attribute)):
    dtype = _core.dtype_of(node, ctx)
    if dtype is not None:
      return dtype
  value = _core.literal(node)
  if value is _core.NOT_LITERAL:
    raise ctx.fail(f'{where}: only literals and optax calls are allowed, not '
                   f'{_core.node_in_words(node)}.')
  _core.refuse_literal_kind(value, where, ctx)
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
      raise ctx.fail(f'{where} takes {accepts.words()}; {_core.value_words(value)} is not one of '
                     f'{", ".join(_core.DTYPES)}.')
    raise ctx.fail(f'{where} takes {accepts.words()}, got {_core.value_words(value)}.')
  if isinstance(value, (int, float)) and not isinstance(value, bool):
    _core.check_number(value, where, ctx)
  return value


def _parse_tx(text: str, source: str):
  ctx = _core.Context(text, source)
  node = _core.parse_expression(text, ctx)
  if _optax_name(node) in _optax.callables()[0]:
    raise ctx.fail(f'optax.{node.attr} must be called, e.g. optax.{node.attr}(...).')
  if not isinstance(node, ast.Call):
    raise ctx.fail(f'expected an optax transformation such as "optax.adamw(1e-3)", got '
                   f'{_core.node_in_words(node)}.')
  if not isinstance(node.func, ast.Call) and not _optax_name(node.func):
    raise ctx.fail(f'{_core.source_of(node.func)} is not an optax transformation; expected e.g. '
                   'optax.adamw(1e-3), optax.chain(...), '
                   'optax.inject_hyperparams(optax.adam)(learning_rate=1e-3).')
  kind, tx = _tx_call(node, ctx)
  if kind != 'transform':
    raise ctx.fail(f'expected an optax transformation, got the schedule {_core.source_of(node)}.')
  return tx, node, ctx


def parse_tx(text: str, *, source: str = '--tx') -> optax.GradientTransformation:
  """The optax transformation that ``text`` writes, built without evaluating it.

  Accepted, with keywords checked against optax's own signatures and every literal against
  the parameter's annotation:

  * ``optax.<name>(...)`` for every public optax function declared to return a
    ``GradientTransformation`` (aliases such as ``adamw``, ``sgd``, ``lamb``, ``rmsprop``;
    transforms such as ``scale_by_adam``, ``add_decayed_weights``, ``trace``,
    ``set_to_zero``) or listed as one that optax leaves unannotated
    (``scale_by_factored_rms``), and ``optax.chain(...)`` of them;
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
    >>> from flax_optim_compat._expr import _tx
    >>> tx = _tx.parse_tx('optax.chain(optax.trace(decay=0.9), optax.scale(-0.5))')
    >>> updates, _ = tx.update({'w': jnp.array([4.0])}, tx.init({'w': jnp.array([1.0])}))
    >>> updates['w']
    Array([-2.], dtype=float32)
    >>> _tx.parse_tx('optax.adam(1e-3, beta1=0.9)')
    Traceback (most recent call last):
    ...
    flax_optim_compat._expr._core.ExpressionError: --tx 'optax.adam(1e-3, beta1=0.9)': optax.adam got an unexpected keyword argument 'beta1' (it takes learning_rate, b1, b2, eps, eps_root, mu_dtype, nesterov).
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
    >>> from flax_optim_compat._expr import _tx
    >>> _tx.canonical_tx('optax.inject_hyperparams(optax.sgd, hyperparam_dtype="float32")'
    ...                    '( learning_rate = 0.1 )')
    'optax.inject_hyperparams(optax.sgd, hyperparam_dtype=jnp.float32)(learning_rate=0.1)'
  """
  _, node, ctx = _parse_tx(text, source)
  return ast.unparse(_Canonical(ctx.dtype_nodes).visit(node))
