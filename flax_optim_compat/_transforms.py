"""Small optax-style transforms shared by several legacy optimizers."""
from typing import Any

import jax
import optax

__all__ = ['MissingLearningRateError', 'is_concrete_zero', 'scale_by_learning_rate']


class MissingLearningRateError(ValueError, AssertionError):
  """No learning rate was given at construction nor as an override.

  Legacy raised ``AssertionError('no learning rate provided.')``; this class is both a
  ``ValueError`` (what a bad argument should raise) and an ``AssertionError`` (what old code
  may catch), with the legacy text first.
  """


def scale_by_learning_rate(learning_rate: Any) -> optax.GradientTransformation:
  """Scales updates by ``-learning_rate``, checking for a missing rate only at update time.

  Legacy optimizers accept ``learning_rate=None`` at construction (the rate may come as a
  per-step override), so the check cannot happen when the transform is built.
  ``-lr * u`` equals legacy ``p - (lr * u)`` bit for bit after ``optax.apply_updates``.

  Args:
    learning_rate: a float or scalar array, or ``None`` to fail at the first update.

  Returns:
    An ``optax.GradientTransformation`` with ``optax.EmptyState``.

  Examples:
    >>> import jax.numpy as jnp
    >>> tx = scale_by_learning_rate(0.5)
    >>> updates, _ = tx.update({'w': jnp.array([2.0])}, tx.init(None))
    >>> updates['w']
    Array([-1.], dtype=float32)
  """

  def init_fn(params):
    del params
    return optax.EmptyState()

  def update_fn(updates, state, params=None):
    del params
    if learning_rate is None:
      raise MissingLearningRateError(
          'no learning rate provided. Pass learning_rate= to the optimizer constructor or '
          'to apply_gradient(grads, learning_rate=...).')
    return jax.tree_util.tree_map(lambda u: -learning_rate * u, updates), state

  return optax.GradientTransformation(init_fn, update_fn)




def is_concrete_zero(value: Any) -> bool:
  """True for a Python/NumPy zero; False for anything traced (which must stay in the graph).

  Legacy optimizers skip weight decay with a Python ``if weight_decay != 0``, which fails for a
  traced override; we keep the decay term whenever the value is not known to be zero.
  """
  if isinstance(value, jax.core.Tracer):
    return False
  try:
    return bool(value == 0)
  except Exception:  # pylint: disable=broad-except
    return False
