"""The plain optax expression of a built-in optimizer: data in each optimizer file, one renderer.

A built-in declares ``plain_optax_forms``: candidate plain optax expressions, most specific
first, each a call (or an ``optax.chain`` of calls) whose keywords name the legacy
hyper-parameters they take (:class:`Hyper`), with the hyper-parameter values under which it
applies (``when``) and how close its continuation is to flax 0.5.3's (``exact``). The renderer
(:func:`render`) picks the first form whose conditions hold and writes it as Python source,
keywords only, e.g. ``optax.sgd(learning_rate=0.1, momentum=0.9, nesterov=False)``.
"""
import ast
import dataclasses
import math
from typing import Any, Mapping, NamedTuple, Optional, Tuple

import numpy as np
import optax

__all__ = ['PlainOptax', 'Hyper', 'Attr', 'PlainCall', 'PlainForm', 'render', 'build',
           'zero_params_note', 'EXACTNESS']

# How a continuation in the expression compares with the legacy update as this package runs
# it (the table of docs/optimizers.md): the same bits, within 1e-6 (the same formula with float32
# operations in another order), or not exact (another formula). flax 0.5.3 itself, on its older
# jax, rounds a few products differently again: measured within 2.4e-7 of every exact
# expression over 6 steps (tests/checkpoint/test_convert_tx.py), 0 for GradientDescent and Momentum.
EXACTNESS = ('bit-exact', '1e-6', 'not exact')


class PlainOptax(NamedTuple):
  """A plain optax expression for a legacy optimizer, as Python source.

  Attributes:
    expression: e.g. ``'optax.sgd(learning_rate=0.1, momentum=0.9, nesterov=False)'``:
      keywords only, every name prefixed ``optax.``.
    exact: ``'bit-exact'``, ``'1e-6'`` or ``'not exact'``: how continuing a legacy run in it
      compares with the legacy optimizer (see ``EXACTNESS``).
    difference: when not exact, one line naming the term that differs; else ``None``.
  """
  expression: str
  exact: str
  difference: Optional[str]


class Hyper(NamedTuple):
  """A keyword value: the legacy hyper-parameter ``name`` (its value, or its source text)."""
  name: str


class Attr(NamedTuple):
  """A keyword value: the def's attribute ``name`` (a dtype), left out when it is ``default``."""
  name: str
  default: str


class PlainCall(NamedTuple):
  """``optax.<function>(**keywords)``; in a chain, left out when a hyper-param of ``unless`` has
  the value given there (e.g. ``{'clipping_threshold': None}``)."""
  function: str
  keywords: Tuple[Tuple[str, Any], ...]
  unless: Tuple[Tuple[str, Any], ...] = ()


class PlainForm(NamedTuple):
  """One candidate: ``calls`` (one call, or several for ``optax.chain``), valid ``when`` every
  named hyper-param has the given value, with its ``exact`` class and ``difference`` line;
  ``zero_params``: what differs for a parameter that is all zeros, if anything (LAMB)."""
  calls: Tuple[PlainCall, ...]
  exact: str = 'bit-exact'
  difference: Optional[str] = None
  when: Tuple[Tuple[str, Any], ...] = ()
  zero_params: Optional[str] = None


_UNKNOWN = object()


def _literal_text(value, name: str, owner: str) -> str:
  """Python source of a hyper-parameter value (a literal)."""
  if isinstance(value, (bool, type(None), str)):
    return repr(value)
  if isinstance(value, (int, np.integer)):
    return repr(int(value))
  if isinstance(value, (float, np.floating)):
    value = float(value)
    if math.isfinite(value):
      return repr(value)
    return f"float('{value}')"
  if hasattr(value, 'shape') and np.ndim(value) == 0 and not callable(value):
    array = np.asarray(value)
    return _literal_text(array.item(), name, owner)
  raise ValueError(
      f'{owner} hyper-parameter {name!r} is {value!r}, which has no literal source text; '
      f'pass its source as plain_optax(arg_sources={{{name!r}: "..."}}).')


def _value(opt_def, name: str, sources: Mapping[str, str]):
  """``(source text, value)`` of hyper-param ``name``; value is ``_UNKNOWN`` for non-literals."""
  if name in sources:
    text = sources[name]
    try:
      return text, ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
      return text, _UNKNOWN
  value = getattr(opt_def.hyper_params, name)
  return _literal_text(value, name, type(opt_def).__name__), value


def _holds(opt_def, conditions, sources) -> Optional[bool]:
  """True / False when every condition can be decided, None when one is only source text."""
  result = True
  for name, expected in conditions:
    _, value = _value(opt_def, name, sources)
    if value is _UNKNOWN:
      return None
    if expected is None or isinstance(expected, bool) or value is None or isinstance(value, bool):
      same = value is expected
    else:
      same = bool(np.all(np.asarray(value) == expected))
    result = result and same
  return result


def _render_call(opt_def, call: PlainCall, sources) -> str:
  args = []
  for keyword, spec in call.keywords:
    if isinstance(spec, Hyper):
      text = _value(opt_def, spec.name, sources)[0]
    elif isinstance(spec, Attr):
      dtype = np.dtype(getattr(opt_def, spec.name)).name
      if dtype == spec.default:
        continue
      text = repr(dtype)
    else:
      text = _literal_text(spec, keyword, f'optax.{call.function}')
    args.append(f'{keyword}={text}')
  return f'optax.{call.function}({", ".join(args)})'


def _select(opt_def, forms, sources):
  """``(form, calls)``: the first form whose conditions hold, and its calls that apply."""
  known = {f.name for f in dataclasses.fields(opt_def.hyper_params)}
  unknown = sorted(set(sources) - known)
  if unknown:
    raise ValueError(f'{type(opt_def).__name__} has no hyper-parameter {unknown[0]!r} '
                     f'(it has {", ".join(sorted(known))}).')
  for form in forms:
    if _holds(opt_def, form.when, sources) is not True:
      continue
    calls = [c for c in form.calls if not (c.unless and _holds(opt_def, c.unless, sources))]
    return form, calls
  raise ValueError(f'{type(opt_def).__name__} has no plain optax expression for these '
                   'hyper-parameters.')


def render(opt_def, forms, arg_sources: Optional[Mapping[str, str]] = None) -> PlainOptax:
  """The first of ``forms`` that applies to ``opt_def``'s hyper-params, as a :class:`PlainOptax`.

  A form whose conditions depend on a hyper-param given only as source text is skipped (the
  next, more general form is the conservative answer); a chain call whose ``unless`` condition
  cannot be decided is kept.
  """
  sources = dict(arg_sources or {})
  form, calls = _select(opt_def, forms, sources)
  parts = [_render_call(opt_def, c, sources) for c in calls]
  expression = parts[0] if len(parts) == 1 else f'optax.chain({", ".join(parts)})'
  return PlainOptax(expression, form.exact, form.difference)


def zero_params_note(opt_def, forms) -> Optional[str]:
  """The chosen form's ``zero_params`` line (None when all-zero params continue alike)."""
  return _select(opt_def, forms, {})[0].zero_params


def build(opt_def, forms) -> optax.GradientTransformation:
  """The transformation :func:`render` names for ``opt_def``'s own values, built directly."""
  _, calls = _select(opt_def, forms, {})
  parts = []
  for call in calls:
    kwargs = {}
    for keyword, spec in call.keywords:
      if isinstance(spec, Hyper):
        kwargs[keyword] = getattr(opt_def.hyper_params, spec.name)
      elif isinstance(spec, Attr):
        kwargs[keyword] = np.dtype(getattr(opt_def, spec.name))
      else:
        kwargs[keyword] = spec
    parts.append(getattr(optax, call.function)(**kwargs))
  return parts[0] if len(parts) == 1 else optax.chain(*parts)
