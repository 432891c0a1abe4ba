"""Small optax-style transforms shared by several legacy optimizers."""
import dataclasses
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

__all__ = ['MissingLearningRateError', 'ScheduledHyperParamsState', 'is_concrete_zero',
           'scale_by_required_learning_rate', 'with_hyper_param_schedules']


class MissingLearningRateError(ValueError, AssertionError):
  """No learning rate was given at construction nor as an override.

  Legacy raised ``AssertionError('no learning rate provided.')``; this class is both a
  ``ValueError`` (what a bad argument should raise) and an ``AssertionError`` (what old code
  may catch), with the legacy text first.
  """


def scale_by_required_learning_rate(learning_rate: Any, *,
                                    flip_sign: bool = True) -> optax.GradientTransformation:
  """``optax.scale_by_learning_rate``, but a missing rate fails at the first update.

  Legacy optimizers accept ``learning_rate=None`` at construction (the rate may come as a
  per-step override), so the check cannot happen when the transform is built; optax's own
  function treats ``None`` as "no scaling" instead. A number, an array (also traced) or an
  optax schedule (``step -> rate``, fed the legacy ``step`` through the state's ``count``) go
  to ``optax.scale_by_learning_rate`` unchanged: ``(-lr) * u`` equals legacy ``p - lr * u``
  bit for bit after ``optax.apply_updates``.

  Args:
    learning_rate: a float, a scalar array, a schedule, or ``None`` to fail at the first
      update with :class:`MissingLearningRateError`.
    flip_sign: scale by ``-learning_rate`` (default) or ``+learning_rate``.

  Returns:
    An ``optax.GradientTransformation``.

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
    raise MissingLearningRateError(
        'no learning rate provided. Pass learning_rate= to the optimizer constructor or '
        'to apply_gradient(grads, learning_rate=...).')

  return optax.GradientTransformation(lambda params: optax.EmptyState(), update_fn)


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


class ScheduledHyperParamsState(NamedTuple):
  """State of :func:`with_hyper_param_schedules`: the step the schedules are evaluated at."""
  count: jax.Array
  inner_state: Any


def with_hyper_param_schedules(build: Callable[[Any], optax.GradientTransformation],
                               hyper_params) -> optax.GradientTransformation:
  """``build(hyper_params)``, with every callable field evaluated at the current step.

  Legacy hyper-params are numbers; optax users pass schedules (``step -> value``). Fields of
  the ``hyper_params`` dataclass that are callable are evaluated (as ``jax.Array`` s) at the
  step counted in this transform's state, the transform is built from the evaluated values
  and run; without callables this is ``build(hyper_params)`` itself (no extra state).

  Args:
    build: ``hyper_params -> optax.GradientTransformation``.
    hyper_params: a ``flax.struct`` dataclass whose fields may be schedules.

  Returns:
    An ``optax.GradientTransformation``; with schedules its state is a
    :class:`ScheduledHyperParamsState`.

  Examples:
    >>> import jax.numpy as jnp
    >>> import optax
    >>> from flax import struct
    >>> @struct.dataclass
    ... class HP:
    ...   scale: object
    >>> tx = with_hyper_param_schedules(lambda hp: optax.scale(hp.scale),
    ...                                 HP(optax.linear_schedule(1.0, 0.0, 2)))
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
