"""Legacy ``flax.optim.adagrad``: Adagrad with ``eps`` outside the square root."""
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax
from flax import struct

from . import _hyper
from ._adapter import OptaxBackedDef
from ._plain_optax import Hyper, PlainCall, PlainForm

__all__ = ['Adagrad']


@struct.dataclass
class _AdagradHyperParams:
  learning_rate: jax.Array | float | None
  eps: jax.Array | float


@struct.dataclass
class _AdagradParamState:
  G: jax.Array  # pylint: disable=invalid-name  (the legacy checkpoint key)


class ScaleByRssEpsOutsideState(NamedTuple):
  """The running sum of squared gradients (named as in ``optax.ScaleByRssState``)."""
  sum_of_squares: optax.Updates


def scale_by_rss_eps_outside(eps: jax.typing.ArrayLike = 1e-8) -> optax.GradientTransformation:
  """``g / (sqrt(G + g**2) + eps)`` with the sum ``G`` starting at zero.

  Differs from ``optax.scale_by_rss`` in one term: optax scales by ``rsqrt(G' + eps)`` (``eps``
  inside the square root, and ``0`` where ``G' == 0``) where legacy divides by
  ``sqrt(G') + eps``. No optax option moves ``eps`` outside, and the two disagree by up to ~10%
  of a step wherever ``G'`` is near ``eps`` (measured: 5e-2 max abs over 50 steps with
  ``eps=0.01``), so this transform keeps legacy's form.

  Args:
    eps: added to ``sqrt(G')``; ``eps=0`` with a zero gradient gives ``0/0 = NaN``, as legacy.

  Returns:
    An ``optax.GradientTransformation`` with a :class:`ScaleByRssEpsOutsideState`.

  Examples:
    >>> import jax.numpy as jnp
    >>> tx = scale_by_rss_eps_outside(eps=0.0)
    >>> updates, state = tx.update(jnp.array([3.0, -4.0]), tx.init(jnp.zeros(2)))
    >>> updates, state.sum_of_squares
    (Array([ 1., -1.], dtype=float32), Array([ 9., 16.], dtype=float32))
  """

  def init_fn(params):
    return ScaleByRssEpsOutsideState(sum_of_squares=optax.tree.zeros_like(params))

  def update_fn(updates, state, params=None):
    del params
    sum_of_squares = jax.tree_util.tree_map(
        lambda g, acc: acc + jnp.square(g), updates, state.sum_of_squares)
    updates = jax.tree_util.tree_map(
        lambda g, acc: g / (jnp.sqrt(acc) + eps), updates, sum_of_squares)
    return updates, ScaleByRssEpsOutsideState(sum_of_squares=sum_of_squares)

  return optax.GradientTransformation(init_fn, update_fn)


def adagrad_transform(hyper_params: _AdagradHyperParams) -> optax.GradientTransformation:
  """``scale_by_rss_eps_outside -> -lr``.

  Legacy computes ``(lr * g) / (sqrt(G') + eps)``, we compute ``-lr * (g / (sqrt(G') + eps))``:
  the same terms associated differently (float32 rounding only).
  """
  hp = hyper_params
  return optax.chain(scale_by_rss_eps_outside(hp.eps),
                     _hyper.scale_by_required_learning_rate(hp.learning_rate))


class Adagrad(OptaxBackedDef):
  """Adagrad: ``G' = G + g**2``; ``p' = p - lr * g / (sqrt(G') + eps)``.

  Args:
    learning_rate: the step size (``None``: pass ``learning_rate=`` every step).
    eps: added to ``sqrt(G')``, outside the square root.

  Examples:
    >>> import jax.numpy as jnp
    >>> import flax_optim_compat as optim
    >>> optimizer = optim.Adagrad(learning_rate=0.1).create({'w': jnp.array([1.0])})
    >>> optimizer = optimizer.apply_gradient({'w': jnp.array([4.0])})
    >>> optimizer.target['w'], optimizer.state.param_states['w'].G
    (Array([0.9], dtype=float32), Array([16.], dtype=float32))

  Differences from optax:
    ``optax.adagrad`` starts the sum at ``0.1`` (legacy: ``0``) and puts ``eps`` inside the
    square root (``g * rsqrt(G' + eps)``); no option reproduces legacy's ``g / (sqrt(G') + eps)``,
    so the scaling is :func:`scale_by_rss_eps_outside`. ``G`` is stored under the legacy name
    and maps to that transform's ``sum_of_squares``.

  References:
    Duchi et al., `Adaptive Subgradient Methods for Online Learning and Stochastic
    Optimization <https://jmlr.org/papers/v12/duchi11a.html>`_
  """
  build_transform = staticmethod(adagrad_transform)
  param_state_cls = _AdagradParamState
  optax_state_fields = {'G': 'sum_of_squares'}
  plain_optax_forms = (
      PlainForm((PlainCall('adagrad', (('learning_rate', Hyper('learning_rate')),
                                       ('initial_accumulator_value', 0.0),
                                       ('eps', Hyper('eps')))),),
                exact='not exact',
                difference='optax.adagrad scales by rsqrt(G + eps), legacy divides by '
                           'sqrt(G) + eps'),
  )

  def __init__(self, learning_rate=None, eps=1e-8):
    super().__init__(_AdagradHyperParams(learning_rate, eps))
