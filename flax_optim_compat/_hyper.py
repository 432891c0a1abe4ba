"""Hyper-parameter rules: what a value may be, per-call overrides, schedules, the learning rate.

A hyper-params dataclass's annotations say what each field takes (:func:`allowed_kinds`);
:func:`checked` applies them to one step's hyper-params; :func:`with_schedules` evaluates
schedules at the step the optax state counts; a missing learning rate fails at the first update
(:func:`scale_by_required_learning_rate`); a weight decay is skipped only for a concrete zero
(:func:`decayed_weights`); error messages show values in ``_state_check.describe_value``'s
words.
"""
import dataclasses
import functools
import types
import typing
from typing import Any, Callable, List, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
import optax

from . import _expression_syntax
from . import _state_check
from . import _tree

__all__ = ['MissingLearningRateError', 'PerStepRateError', 'check_constant_rate',
           'rate_set_per_step', 'ScheduledHyperParamsState', 'allowed_kinds',
           'check_value', 'checked', 'as_dict', 'fields_repr', 'with_schedules',
           'scale_by_required_learning_rate', 'require_learning_rate', 'is_concrete_zero',
           'decayed_weights']


def as_dict(hyper_params) -> Any:
  """``{name: value}`` of a hyper-params dataclass (nested ones too); other objects as they are."""
  if dataclasses.is_dataclass(hyper_params):
    return {f.name: as_dict(getattr(hyper_params, f.name))
            for f in dataclasses.fields(hyper_params)}
  return hyper_params


def fields_repr(hyper_params) -> str:
  """``'learning_rate=0.1, beta=0.9'``: the arguments of a def's ``repr``."""
  if dataclasses.is_dataclass(hyper_params):
    return ', '.join(f'{f.name}={getattr(hyper_params, f.name)!r}'
                     for f in dataclasses.fields(hyper_params))
  return repr(hyper_params)


# ----------------------------------------------------------------------------- kinds and checks

@functools.lru_cache(maxsize=None)
def allowed_kinds(annotation) -> Optional[frozenset]:
  """The types a hyper-param field's annotation admits, or None when it says nothing usable.

  ``jax.Array | float | None`` -> ``{jax.Array, float, NoneType}``; ``bool`` -> ``{bool}``.
  A field admitting neither ``jax.Array`` nor ``float`` is static (a Python value).
  """
  if isinstance(annotation, type):
    return frozenset({annotation})
  if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
    return frozenset(a for a in typing.get_args(annotation) if isinstance(a, type))
  return None


def check_value(where: str, annotation, value: Any) -> None:
  """Raises an error naming ``where`` (e.g. ``"Momentum hyper-parameter 'beta'"``) if ``value``
  cannot be a field annotated ``annotation``: ``None`` only where the annotation admits it; a
  static field (``bool`` / ``int`` alone) takes neither a traced value nor a schedule; a
  numeric field takes a number, a scalar array or a schedule (a callable)."""
  kinds = allowed_kinds(annotation)
  if kinds is None:
    return
  if value is None:
    if type(None) not in kinds:
      raise TypeError(f'{where} is None; it needs a number.')
    return
  if not kinds & {jax.Array, float}:  # bool / int: static
    if isinstance(value, jax.core.Tracer):
      raise TypeError(f'{where} cannot be a traced value (it decides the form of the update '
                      'or the state layout): give it a Python value, e.g. at construction.')
    if callable(value):
      raise TypeError(f'{where} cannot be a schedule (it decides the form of the update or '
                      f'the state layout): give it a Python value, got '
                      f'{_state_check.describe_value(value)}.')
    return
  if callable(value):
    return  # a schedule
  if _tree.leaf_kind(value) not in ('b', 'i', 'u', 'f'):
    raise TypeError(f'{where} must be a real number or a scalar array, got '
                    f'{_state_check.describe_value(value)}.')
  if np.ndim(value) != 0:
    raise ValueError(f'{where} must be a scalar, got {_state_check.describe_value(value)}.')


def checked(opt_def, hyper_params):
  """The hyper-params one step of ``opt_def`` runs with, after checking every field.

  The names in ``opt_def.constructor_only_hyper_params`` take the constructor's values (a
  per-call override of them is ignored, as legacy read them from ``self.hyper_params``).

  Raises:
    TypeError: ``hyper_params`` is not of the def's hyper-params class, or a field's value is
      not of a kind its annotation admits (see :func:`check_value`).
    ValueError: a numeric field is an array with more than one element.
  """
  expected = type(opt_def.hyper_params)
  name = type(opt_def).__name__
  if type(hyper_params) is not expected:
    raise TypeError(f'{name}: hyper_params must be a {expected.__name__}, got '
                    f'{_state_check.describe_value(hyper_params)}.')
  fixed = opt_def.constructor_only_hyper_params
  if fixed:
    hyper_params = hyper_params.replace(
        **{field: getattr(opt_def.hyper_params, field) for field in fixed})
  check_fields(name, hyper_params)
  return hyper_params


def check_fields(name: str, hyper_params) -> None:
  """:func:`check_value` for every field of a hyper-params dataclass of the def ``name``."""
  for field in dataclasses.fields(hyper_params):
    check_value(f'{name} hyper-parameter {field.name!r}', field.type,
                getattr(hyper_params, field.name))


# ----------------------------------------------------------------------------- schedules

class ScheduledHyperParamsState(NamedTuple):
  """State of :func:`with_schedules`: the step the schedules are evaluated at."""
  count: jax.Array
  inner_state: Any


def with_schedules(build: Callable[[Any], optax.GradientTransformation],
                   hyper_params) -> optax.GradientTransformation:
  """``build(hyper_params)``, with every callable field evaluated at the current step.

  Legacy hyper-params are numbers; optax users pass schedules (``step -> value``). Callable
  fields are evaluated (as ``jax.Array`` s) at the step counted in this transform's state
  (a :class:`ScheduledHyperParamsState`) and the transform is built from the values; without
  callables this is ``build(hyper_params)`` itself (no extra state).

  Examples:
    >>> import jax.numpy as jnp
    >>> import optax
    >>> from flax import struct
    >>> @struct.dataclass
    ... class HP:
    ...   scale: object
    >>> tx = with_schedules(lambda hp: optax.scale(hp.scale),
    ...                     HP(optax.linear_schedule(1.0, 0.0, 2)))
    >>> state = tx.init(None)
    >>> for _ in range(3):
    ...   updates, state = tx.update(jnp.ones(1), state)
    ...   print(updates)
    [1.]
    [0.5]
    [0.]
  """
  scheduled = {f.name: getattr(hyper_params, f.name) for f in dataclasses.fields(hyper_params)
               if callable(getattr(hyper_params, f.name))}
  if not scheduled:
    return build(hyper_params)

  def at(count):
    values = {}
    for name, schedule in scheduled.items():
      try:
        values[name] = jnp.asarray(schedule(count))
      except Exception as e:  # pylint: disable=broad-except
        raise TypeError(f'the hyper-parameter {name!r} is a callable but not a schedule '
                        f'(step -> value): calling it with the step failed ({e}).') from e
    return build(hyper_params.replace(**values))

  def init_fn(params):
    count = jnp.zeros([], jnp.int32)
    return ScheduledHyperParamsState(count, at(count).init(params))

  def update_fn(updates, state, params=None):
    updates, inner_state = at(state.count).update(updates, state.inner_state, params)
    return updates, ScheduledHyperParamsState(state.count + 1, inner_state)

  return optax.GradientTransformation(init_fn, update_fn)


# ----------------------------------------------------------------------------- learning rate

class MissingLearningRateError(ValueError, AssertionError):
  """No learning rate was given at construction nor as an override.

  Legacy raised ``AssertionError('no learning rate provided.')``; this class is both a
  ``ValueError`` (what a bad argument should raise) and an ``AssertionError`` (what old code
  may catch), with the legacy text first.
  """


def require_learning_rate(learning_rate: Any) -> None:
  """Raises :class:`MissingLearningRateError` if ``learning_rate`` is None (at an update)."""
  if learning_rate is None:
    raise MissingLearningRateError(
        'no learning rate provided. Pass learning_rate= to the optimizer constructor or '
        'to apply_gradient(grads, learning_rate=...).')


def rate_set_per_step(opt_def) -> bool:
  """Whether ``opt_def`` has no learning rate of its own (``learning_rate=None``): its run gave
  one to every update (``apply_gradient(grads, learning_rate=lr)``)."""
  return getattr(opt_def.hyper_params, 'learning_rate', 0) is None


class PerStepRateError(MissingLearningRateError):
  """An optimizer without a learning rate asked for its optax continuation (one message)."""


def check_constant_rate(opt_def, continuation: Optional[str] = None) -> None:
  """The one rule for a continuation in optax: a def whose ``learning_rate`` is None had its
  rate set per step, and no constant-rate transformation continues it.

  Raises :class:`PerStepRateError` naming the forms that do continue it: the rate injected and
  set before each update, or a schedule of optax's ``count`` (which continues from the
  checkpoint's step). ``continuation``: the optax expression with ``learning_rate=schedule``,
  where the def has one.

  Examples:
    >>> import flax_optim_compat as optim
    >>> check_constant_rate(optim.Momentum(0.1))
    >>> check_constant_rate(optim.Momentum(), 'optax.sgd(learning_rate=schedule, momentum=0.9)')
    Traceback (most recent call last):
    ...
    flax_optim_compat._hyper.PerStepRateError: Momentum(learning_rate=None, beta=0.9, weight_decay=0, nesterov=False) has no learning rate: the run set it per step (apply_gradient(grads, learning_rate=lr)), so no constant-rate optax transformation continues it. Continue with the rate set per step: optax.inject_hyperparams(optax.sgd)(learning_rate=..., momentum=0.9) and opt_state.hyperparams['learning_rate'] = lr before each update (convert with that --tx / tx=), or a schedule of optax's count, which continues from the checkpoint's step: optax.sgd(learning_rate=schedule, momentum=0.9) with schedule = lambda count: <the rate the run used at step count>.
  """
  if not rate_set_per_step(opt_def):
    return
  injected = 'optax.inject_hyperparams(optax.X)(learning_rate=..., ...)'
  scheduled = 'optax.X(learning_rate=schedule, ...)'
  function = _expression_syntax.single_function(continuation)
  if function is not None:
    arguments = continuation.split('(', 1)[1]
    injected = f'optax.inject_hyperparams({function})({arguments}'.replace(
        'learning_rate=schedule', 'learning_rate=...')
    scheduled = continuation
  elif continuation:
    scheduled = continuation
  raise PerStepRateError(
      f'{opt_def!r} has no learning rate: the run set it per step (apply_gradient(grads, '
      'learning_rate=lr)), so no constant-rate optax transformation continues it. Continue with '
      f"the rate set per step: {injected} and opt_state.hyperparams['learning_rate'] = lr "
      'before each update (convert with that --tx / tx=), or a schedule of optax\'s count, '
      f'which continues from the checkpoint\'s step: {scheduled} with schedule = lambda count: '
      '<the rate the run used at step count>.')


def scale_by_required_learning_rate(learning_rate: Any, *,
                                    flip_sign: bool = True) -> optax.GradientTransformation:
  """``optax.scale_by_learning_rate``, but a missing rate fails at the first update.

  Legacy optimizers accept ``learning_rate=None`` at construction (the rate may come as a
  per-step override), so the check cannot happen when the transform is built; optax's own
  function treats ``None`` as "no scaling" instead. A number, an array (also traced) or an
  optax schedule (``step -> rate``, fed the legacy ``step`` through the state's ``count``) go
  to ``optax.scale_by_learning_rate`` unchanged: ``(-lr) * u`` equals legacy ``p - lr * u``
  bit for bit after ``optax.apply_updates``. ``flip_sign`` as optax's.

  Examples:
    >>> import jax.numpy as jnp
    >>> tx = scale_by_required_learning_rate(0.5)
    >>> updates, _ = tx.update({'w': jnp.array([2.0])}, tx.init(None))
    >>> updates['w']
    Array([-1.], dtype=float32)
  """
  if learning_rate is not None:
    return optax.scale_by_learning_rate(learning_rate, flip_sign=flip_sign)

  def update_fn(updates, state, params=None):
    del updates, state, params
    require_learning_rate(learning_rate)

  return optax.GradientTransformation(lambda params: optax.EmptyState(), update_fn)


# ----------------------------------------------------------------------------- weight decay

def is_concrete_zero(value: Any) -> bool:
  """True for a Python/NumPy zero; False for a jax array (traced or not) or anything else.

  Legacy optimizers skip weight decay with a Python ``if weight_decay != 0``, which fails for a
  traced override; we keep the decay term whenever the value is not a host-side zero, so the
  structure of a transform's state never depends on the value of a jax array (a schedule's
  value at step 0 and at a traced step build the same chain).
  """
  if isinstance(value, (bool, int, float, np.number, np.ndarray)):
    return bool(np.all(np.asarray(value) == 0))
  return False


def decayed_weights(weight_decay: Any) -> List[optax.GradientTransformation]:
  """``[optax.add_decayed_weights(weight_decay)]``, or ``[]`` for a concrete zero."""
  return [] if is_concrete_zero(weight_decay) else [optax.add_decayed_weights(weight_decay)]
