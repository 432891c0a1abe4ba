"""The optax expression of one legacy def call, written by the def itself.

The text comes from the package (``OptimizerDef.plain_optax``), never from a table here: the
call's arguments are normalised to keywords with the legacy signature and passed as source
texts, so ``optim.Momentum(config.lr)`` becomes ``optax.sgd(learning_rate=config.lr,
momentum=0.9, nesterov=False)`` with the legacy defaults written out.

A call whose arguments are unpacked from a parameter of its function (``optim.Adam(**kw)``,
``kw`` what each caller passes) is called as written on a lambda with the legacy signature and
defaults: ``(lambda learning_rate=None, beta1=0.9, ...: optax.adamw(learning_rate=learning_rate,
b1=beta1, ...))(**kw)`` binds every key set as legacy's constructor did (a missing key takes
legacy's default, an unknown one raises TypeError there), and the expression, all of whose
values are run-time ones, is the form right for every value.
"""
import ast
import inspect
import warnings
from typing import Dict, NamedTuple, Optional

import libcst as cst
import numpy as np
import optax

from .. import _deprecation
from . import _refusals
from . import _unit
import flax_optim_compat as _optim

# A learning rate known only at run time: the optax state does not depend on its value.
LR_STAND_IN = '0.1'
SCHEDULE_STAND_IN = 'optax.constant_schedule(0.0)'
# Any other number known only at run time whose default is zero (weight decays).
NONZERO_STAND_IN = 1e-4


class DefCall(NamedTuple):
  """A legacy def call, its arguments by legacy keyword (source texts)."""
  name: str                 # 'Adam'
  sources: Dict[str, str]   # legacy keyword -> source text, as written
  literal: Dict[str, bool]  # legacy keyword -> whether the source is a Python literal
  # The call's arguments as written (``**kw``), where they are unpacked from a parameter:
  # ``sources`` are then the legacy keywords themselves, bound by ``unpacked``'s lambda.
  arguments: Optional[str] = None


def def_call(name: str, call: cst.Call, unit: _unit.SourceFile) -> Optional[DefCall]:
  """Normalises ``optim.Adam(1e-3, beta2=0.99)`` to keywords; None if it cannot.

  ``**kw`` is read where ``dict_keywords`` reads it (a dict assigned once, changed only
  by ``kw['key'] = value`` statements, a key only those set passing the def's default where
  absent). Arguments unpacked from a parameter of the function (``**kw``, ``*args``) give the
  DefCall of ``from_parameter``.
  """
  cls = getattr(_optim, name, None)
  if cls is None:
    return None
  if any(a.star == '*' for a in call.args):
    return from_parameter(cls, name, call, unit)
  positional = [unit.code(a.value) for a in call.args if a.keyword is None and not a.star]
  keywords = {a.keyword.value: unit.code(a.value) for a in call.args if a.keyword}
  for arg in call.args:
    if arg.star == '**':
      defaults = {k: repr(p.default) for k, p in inspect.signature(cls).parameters.items()
                  if p.default is not inspect.Parameter.empty}
      passed = dict_keywords(unit, arg.value, defaults) if isinstance(
          arg.value, cst.Name) else None
      if passed is None:
        return from_parameter(cls, name, call, unit)
      if set(passed) & set(keywords):
        return None
      keywords.update(passed)
  try:
    bound = inspect.signature(cls).bind(*positional, **keywords)
  except TypeError:
    return None
  sources = dict(bound.arguments)
  return DefCall(name, sources, {k: is_literal(v) for k, v in sources.items()})


def from_parameter(cls, name: str, call: cst.Call, unit: _unit.SourceFile) -> Optional[DefCall]:
  """The DefCall of a call whose ``*args`` / ``**kw`` is a parameter of its function (the keys
  are whatever each caller passes), else None: every legacy keyword its own source, bound at
  run time by ``unpacked``'s lambda. Not for a def whose plain form depends on which values
  are None (Adafactor's chain leaves a transform out for a None): no form is right for every
  value there; nor for a signature a lambda cannot copy (a default with no literal source)."""
  if not _starred_are_parameters(call, unit):
    return None
  params = inspect.signature(cls).parameters.values()
  if value_dependent(name) or not all(
      p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD and (
          p.default is inspect.Parameter.empty or is_literal(repr(p.default))) for p in params):
    return None
  sources = {p.name: p.name for p in params}
  arguments = ', '.join(f'{a.star}{unit.code(a.value)}' if a.keyword is None else
                        f'{a.keyword.value}={unit.code(a.value)}' for a in call.args)
  return DefCall(name, sources, dict.fromkeys(sources, False), arguments)


def _starred_are_parameters(call: cst.Call, unit: _unit.SourceFile) -> bool:
  """Whether every ``*args`` / ``**kw`` of ``call`` is a parameter of its function (none is
  also true: ``from_parameter`` then binds the keywords as written)."""
  return all(_unit.parameter(unit, a.value) is not None for a in call.args if a.star)


def value_dependent(name: str) -> bool:
  """Whether the def's plain forms leave a transform out for some value (``unless``)."""
  return any(c.unless for form in getattr(_optim, name).plain_optax_forms for c in form.calls)


# Why a group of a MultiOptimizer (or a def chosen in branches for one) is not rewritten from
# a DefCall with ``arguments``: its transform sits inside the multi_transform, whose learning
# rates (initial, injected) are read from the defs' texts outside any such lambda.
UNPACKED_GROUP = ('its arguments are unpacked from a parameter, known only at run time, which '
                  'migrate binds for a def created alone, not for a group of a MultiOptimizer')


# The schedule's name inside ``unpacked``'s lambda: bound outside it, so the lambda's legacy
# keywords never shadow a name the schedule reads; no legacy def has a parameter so named.
SCHEDULE = 'schedule'


def unpacked(call: DefCall, expression: str, rate_required: bool = False,
             schedule: Optional[str] = None) -> str:
  """``expression`` (its values the legacy keywords) as a lambda with the legacy signature and
  defaults, called with ``call``'s arguments as written.

  ``rate_required``: the learning rate has no default (legacy's None would fail at the first
  update, and optax reads None as no scaling: the update would climb the gradient), so a key
  set without one raises TypeError where the def is made. ``schedule``: the source of the
  schedule ``expression`` names ``SCHEDULE``, bound around the lambda.
  """
  params = []
  for p in inspect.signature(getattr(_optim, call.name)).parameters.values():
    required = p.default is inspect.Parameter.empty or (
        rate_required and p.name == 'learning_rate' and not params)
    params.append(p.name if required else f'{p.name}={p.default!r}')
  function = f'lambda {", ".join(params)}: {expression}'
  if schedule is not None:
    return f'(lambda {SCHEDULE}: {function})({schedule})({call.arguments})'
  return f'({function})({call.arguments})'


def unread_arguments(name: str, call: cst.Call, unit: Optional[_unit.SourceFile] = None) -> str:
  """Why ``def_call`` cannot read the arguments of ``call`` (a def of class ``name``, in
  ``unit`` where given: a ``**kw`` that is a parameter is named as one)."""
  starred = [a for a in call.args if a.star]
  if unit is not None and starred and _starred_are_parameters(call, unit) and (
      value_dependent(name)):
    texts = ', '.join(f'{a.star}{unit.code(a.value)}' for a in starred)
    return (f'the arguments {texts} are known only at run time (a parameter\'s value, whatever '
            f'each call passes), and the optax form of {name} leaves a transform out where an '
            'argument is None, so no one form is right for every value')
  for arg in call.args:
    if arg.star == '*':
      return '*-unpacked positional arguments, known only at run time'
    if arg.star == '**':
      text = cst.Module([]).code_for_node(arg.value)
      return (f'the keywords of **{text} are known only at run time (migrate reads **kw from a '
              'dict literal or dict(...) assigned once, with string keys, read nowhere else '
              'and not repeating a keyword, or from a parameter of the function, its value '
              'whatever each call passes)')
  return f'arguments that do not fit the signature of {name}'


def is_literal(text: str) -> bool:
  try:
    ast.literal_eval(text)
    return True
  except (ValueError, SyntaxError):
    return False


def _instance(name: str):
  with warnings.catch_warnings():
    warnings.simplefilter('ignore', _deprecation.FlaxOptimDeprecationWarning)
    return getattr(_optim, name)()


def plain(name: str, sources: Dict[str, str]):
  """The def's ``PlainOptax`` (expression, exact, difference) for these argument sources."""
  return _instance(name).plain_optax(sources)


def zero_params_difference(name: str) -> Optional[str]:
  """How the def's plain optax form moves an all-zero param where legacy did not, or None.

  The params are not known here, and flax's layers initialise biases to zeros, so a plain form
  that treats an all-zero param differently (``optax.lamb``'s trust ratio) is not exact for
  the code being migrated.
  """
  notes = _instance(name).plain_optax_notes({'zeros': np.zeros((1,), np.float32)})
  return notes[0].split(': ', 1)[1] if notes else None


def exact_transform(call: DefCall, sources: Dict[str, str], optim_alias: str) -> str:
  """The package's own exact transform, ``optim.X(...).optax_transform()``."""
  args = ', '.join(f'{k}={v}' for k, v in sources.items())
  return f'{optim_alias}.{call.name}({args}).optax_transform()'


def inject(expression: str, initial: str) -> str:
  """``expression`` (with ``learning_rate=learning_rate``) with its learning rate injected.

  One ``optax.F(learning_rate=learning_rate, b1=..., ...)`` call becomes
  ``optax.inject_hyperparams(optax.F, static_args=('b1', ...), hyperparam_dtype=jnp.float32)(
  learning_rate=INITIAL, b1=..., ...)``: only the learning rate, which the apply sites set,
  is in the state; the others stay the code's constants (a stand-in for one of them in a
  convert command never reaches the state). Anything else (a chain) becomes a factory of the
  learning rate alone.
  """
  node = cst.parse_expression(expression)
  if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and all(
      a.keyword is not None for a in node.args) and not any(
          _mentions(a.value, 'learning_rate') for a in node.args
          if a.keyword.value != 'learning_rate'):
    func = cst.Module([]).code_for_node(node.func)
    args = ', '.join(
        f'{a.keyword.value}={initial}' if a.keyword.value == 'learning_rate' else
        f'{a.keyword.value}={cst.Module([]).code_for_node(a.value)}' for a in node.args)
    factory = getattr(optax, func.split('.', 1)[1], None) if func.startswith('optax.') else None
    if factory is None:
      static = tuple(a.keyword.value for a in node.args if a.keyword.value != 'learning_rate')
    else:   # every parameter, defaults included: inject_hyperparams injects those too
      static = tuple(name for name in inspect.signature(factory).parameters
                     if name != 'learning_rate')
    static_args = f'static_args={static!r}, ' if static else ''
    return f'optax.inject_hyperparams({func}, {static_args}hyperparam_dtype=jnp.float32)({args})'
  return (f'optax.inject_hyperparams(lambda learning_rate: {expression}, '
          f'hyperparam_dtype=jnp.float32)(learning_rate={initial})')


def _mentions(node: cst.CSTNode, name: str) -> bool:
  if isinstance(node, cst.Name) and node.value == name:
    return True
  return any(_mentions(c, name) for c in node.children)


def command_optimizer(call: DefCall, learning_rate: Optional[str] = None) -> str:
  """``--optimizer`` of the convert command: literal keywords, stand-ins for run-time values.

  ``learning_rate``: the text to write for it instead (a placeholder where it reaches the
  converted state: an injected learning rate known only at run time).
  """
  cls = getattr(_optim, call.name)
  params = inspect.signature(cls).parameters
  parts = []
  for key, text in call.sources.items():
    if key == 'learning_rate' and learning_rate is not None:
      parts.append(f'{key}={learning_rate}')
    elif call.literal[key]:
      parts.append(f'{key}={text}')
    elif key == 'learning_rate':
      parts.append(f'{key}={LR_STAND_IN}')
    else:
      parts.append(f'{key}={_stand_in(params[key].default)}')
  if 'learning_rate' not in call.sources:
    parts.insert(0, f'learning_rate={learning_rate or LR_STAND_IN}')
  return f'{call.name}({", ".join(parts)})'


def command_sources(call: DefCall, learning_rate: Optional[str]) -> Dict[str, str]:
  """Argument sources for the command's ``--tx``: literals, or same-layout stand-ins."""
  params = inspect.signature(getattr(_optim, call.name)).parameters
  sources = {}
  for key, text in call.sources.items():
    if call.literal[key]:
      sources[key] = text
    elif key == 'learning_rate':
      sources[key] = LR_STAND_IN
    else:
      sources[key] = _stand_in(params[key].default)
  if learning_rate is not None:
    sources['learning_rate'] = learning_rate
  elif 'learning_rate' not in sources:
    sources['learning_rate'] = LR_STAND_IN
  return sources


def stand_ins(call: DefCall) -> Dict[str, str]:
  """The run-time arguments the command replaces with stand-ins, and by what."""
  params = inspect.signature(getattr(_optim, call.name)).parameters
  return {key: (LR_STAND_IN if key == 'learning_rate' else _stand_in(params[key].default))
          for key, literal in call.literal.items() if not literal}


def _stand_in(default) -> str:
  """A stand-in for a hyper-parameter known only at run time: its default, but never a
  numeric zero. The code's expression takes the form right for every value (``optax.adamw``
  for a run-time ``weight_decay``), and zero would select another state layout (``optax.adam``)."""
  if isinstance(default, (int, float)) and not isinstance(default, bool) and default == 0:
    return repr(NONZERO_STAND_IN)
  return repr(default)


def zero_params_marker(name: str) -> Optional[str]:
  """The FOM009 marker text for a plain form that moves all-zero params (kept: the package's
  transform has another state layout, which no convert command could target), or None."""
  difference = zero_params_difference(name)
  if difference is None:
    return None
  return (f'{_refusals.NOT_EXACT} the plain optax expression is not exact for a param that '
          f'is all zeros (a bias initialised to zeros): {difference}')


def optim_alias(unit, call: cst.Call) -> str:
  """How the file spells the module of the def ``call`` (``optim`` of ``optim.Adam(...)``)."""
  func = call.func
  if isinstance(func, cst.Attribute):
    return unit.code(func.value)
  return 'optim'


def dict_keywords(unit: _unit.SourceFile, name: cst.Name,
                  defaults: Optional[Dict[str, str]] = None) -> Optional[Dict[str, str]]:
  """The keywords ``**name`` passes, as source texts valid where it is passed, or None.

  Only for a variable assigned once, to a dict literal with string keys (``{'beta1': 0.9}``)
  or to ``dict(beta1=0.9)``, and read nowhere but as ``**name``: nothing can change the dict
  between its assignment and the call. A literal value is its own text; any other value is
  ``name['key']``, the value the dict holds (its expression ran once, at the assignment).

  ``defaults`` (keyword -> the def's default, as text) also admits items set by statements
  ``name['key'] = value`` (``optimizer_kwargs['weight_decay'] = wd`` under an ``if``): a key
  only such a statement sets may be absent, so it passes ``name.get('key', default)``, what the
  def gets either way; every key of the literal is then ``name['key']`` (a statement may have
  set it again). The texts are read where ``**name`` is, so they see the dict as the call did.
  """
  value = _unit.assigned_value(unit, name)
  reads = _unit.accesses(unit, name) if value is not None else None
  if reads is None:
    return None
  set_later = []
  for r in reads:
    parent = unit.parent(r)
    if isinstance(parent, cst.Arg) and parent.star == '**':
      continue
    target = unit.parent(parent) if isinstance(parent, cst.Subscript) else None
    key = _set_key(parent) if isinstance(target, cst.AssignTarget) and defaults else None
    if key is None:
      return None
    set_later.append(key)
  if isinstance(value, cst.Dict) and all(
      isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString)
      for e in value.elements):
    items = [(e.key.evaluated_value, e.value) for e in value.elements]
  elif isinstance(value, cst.Call) and 'builtins.dict' in unit.names(value.func) and all(
      a.keyword is not None for a in value.args):
    items = [(a.keyword.value, a.value) for a in value.args]
  else:
    return None
  keys = [k for k, _ in items]
  if len(set(keys)) != len(keys) or not all(isinstance(k, str) and k.isidentifier()
                                            for k in keys + set_later):
    return None
  out = {}
  for key, node in items:
    text = unit.code(node)
    try:
      ast.literal_eval(text)
    except (ValueError, SyntaxError):
      text = f'{name.value}[{key!r}]'
    out[key] = f'{name.value}[{key!r}]' if set_later else text
  for key in set_later:
    if key not in out:
      if key not in defaults:
        return None
      out[key] = f'{name.value}.get({key!r}, {defaults[key]})'
  return out


def _set_key(subscript: cst.Subscript) -> Optional[str]:
  """The literal string key of ``name['key']``, else None."""
  if len(subscript.slice) != 1 or not isinstance(subscript.slice[0].slice, cst.Index):
    return None
  index = subscript.slice[0].slice.value
  return index.evaluated_value if isinstance(index, cst.SimpleString) else None
