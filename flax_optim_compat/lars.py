"""Legacy ``flax.optim.lars``: LARS with legacy's trust ratio and an η-scaled momentum buffer."""
import jax
import jax.numpy as jnp
import optax
from flax import struct

from . import _hyper
from ._adapter import OptaxBackedDef
from ._plain_optax import Hyper, PlainCall, PlainForm

__all__ = ['LARS']


@struct.dataclass
class _LARSHyperParams:
  learning_rate: jax.Array | float | None
  beta: jax.Array | float
  weight_decay: jax.Array | float
  trust_coefficient: jax.Array | float
  eps: jax.Array | float
  nesterov: bool


@struct.dataclass
class _LARSParamState:
  momentum: jax.Array


def scale_by_lars_trust_ratio(learning_rate, weight_decay=0., trust_coefficient=0.001,
                              eps=0.) -> optax.GradientTransformation:
  """``(lr * r) * (g + wd * p)`` with ``r = tc * ||p|| / (||g|| + wd * ||p|| + eps)``.

  ``r`` is replaced by 1 where ``||g|| == 0`` or ``||p|| == 0`` (norms over the whole leaf).
  Differs from ``optax.lars``'s trust ratio in the denominator: optax uses the norm of the
  decayed gradient, ``||g + wd * p|| + eps``, and tests that norm for zero; legacy adds the
  two norms and tests the raw ``||g||``. They agree only when ``weight_decay == 0`` and differ
  by ~1% of the parameters otherwise (measured over 50 steps), so we keep legacy's form. The
  learning rate is applied here, before the momentum (``optax.trace`` chained after this),
  because legacy's momentum buffer accumulates ``lr``-scaled steps: with a per-step
  ``learning_rate`` override that is a different trajectory from scaling the momentum
  afterwards, and it keeps the stored ``momentum`` equal to legacy's, sign included.

  Args:
    learning_rate: the step size; ``None`` fails at the first update (legacy behaviour).
    weight_decay: coupled decay ``wd * p`` added to the gradient, and part of the ratio.
    trust_coefficient: ``tc`` above.
    eps: added to the denominator of the ratio.

  Returns:
    A stateless ``optax.GradientTransformation``; ``update`` needs ``params``. Its output is
    the positive step (subtract it, or chain ``optax.scale(-1.0)``).

  Examples:
    >>> import jax.numpy as jnp
    >>> tx = scale_by_lars_trust_ratio(learning_rate=0.5, trust_coefficient=0.1)
    >>> params = {'w': jnp.array([3.0, 4.0])}
    >>> updates, _ = tx.update({'w': jnp.array([0.0, 2.0])}, tx.init(params), params)
    >>> updates['w']  # r = 0.1 * 5 / 2 = 0.25
    Array([0.  , 0.25], dtype=float32)
  """

  def init_fn(params):
    del params
    return optax.EmptyState()

  def update_fn(updates, state, params=None):
    if params is None:
      raise ValueError('scale_by_lars_trust_ratio needs the params: '
                       'update(updates, state, params).')
    _hyper.require_learning_rate(learning_rate)
    decay = not _hyper.is_concrete_zero(weight_decay)

    def scale(g, p):
      param_norm = jnp.linalg.norm(p)
      grad_norm = jnp.linalg.norm(g)
      ratio = trust_coefficient * param_norm / (grad_norm + weight_decay * param_norm + eps)
      ratio = jnp.where(jnp.logical_or(grad_norm == 0., param_norm == 0.), 1., ratio)
      if decay:
        g = g + weight_decay * p
      return (learning_rate * ratio) * g

    return jax.tree_util.tree_map(scale, updates, params), state

  return optax.GradientTransformation(init_fn, update_fn)


def lars_transform(hyper_params: _LARSHyperParams) -> optax.GradientTransformation:
  """``scale_by_lars_trust_ratio (includes lr) -> trace -> scale(-1)``.

  ``optax.trace`` then holds exactly legacy's ``momentum`` (same sign, same values), and the
  whole update is legacy's op order (bit-faithful up to XLA's own rewrites).
  """
  hp = hyper_params
  return optax.chain(
      scale_by_lars_trust_ratio(hp.learning_rate, hp.weight_decay, hp.trust_coefficient, hp.eps),
      optax.trace(decay=hp.beta, nesterov=hp.nesterov),
      optax.scale(-1.0))


_LARS = PlainCall('lars', (('learning_rate', Hyper('learning_rate')),
                           ('weight_decay', Hyper('weight_decay')),
                           ('trust_coefficient', Hyper('trust_coefficient')), ('eps', Hyper('eps')),
                           ('momentum', Hyper('beta')), ('nesterov', Hyper('nesterov'))))


class LARS(OptaxBackedDef):
  """LARS (You et al., 2017): momentum SGD with a per-leaf trust ratio on the learning rate.

  ``r = tc * ||p|| / (||g|| + wd * ||p|| + eps)`` (1 if ``||g||`` or ``||p||`` is 0);
  ``s = (lr * r) * (g + wd * p)``; ``m' = beta * m + s``; ``p' = p - m'`` (Nesterov:
  ``p' = p - (s + beta * m')``).

  Args:
    learning_rate: the step size (``None``: pass ``learning_rate=`` every step).
    beta: the momentum coefficient.
    weight_decay: coupled decay ``wd * p`` added to the gradient, and part of the ratio.
    trust_coefficient: ``tc`` above.
    eps: added to the denominator of the trust ratio.
    nesterov: use Nesterov's update.

  Examples:
    >>> import jax.numpy as jnp
    >>> import flax_optim_compat as optim
    >>> optimizer = optim.LARS(learning_rate=0.5, trust_coefficient=0.1).create(
    ...     {'w': jnp.array([3.0, 4.0])})
    >>> optimizer = optimizer.apply_gradient({'w': jnp.array([0.0, 2.0])})
    >>> optimizer.target['w'], optimizer.state.param_states['w'].momentum
    (Array([3.  , 3.75], dtype=float32), Array([0.  , 0.25], dtype=float32))

  Differences from optax:
    ``optax.lars`` matches only for ``weight_decay == 0``: its trust-ratio denominator is
    ``||g + wd * p|| + eps``, legacy's ``||g|| + wd * ||p|| + eps``
    (:func:`scale_by_lars_trust_ratio` keeps legacy's). Legacy's momentum holds
    ``lr``-scaled steps; ``optax.lars``'s trace holds the negated ones, ours the legacy ones.

  References:
    You et al., `Large Batch Training of Convolutional Networks
    <https://arxiv.org/abs/1708.03888>`_
  """
  build_transform = staticmethod(lars_transform)
  param_state_cls = _LARSParamState
  optax_state_fields = {'momentum': 'trace'}
  step_scaled_fields = frozenset({'momentum'})  # optax.lars's trace holds -momentum
  plain_optax_forms = (
      PlainForm((_LARS,), exact='1e-6', when=(('weight_decay', 0),)),
      PlainForm((_LARS,), exact='not exact',
                difference='optax.lars divides by norm(g + wd * p) + eps, legacy by '
                           'norm(g) + wd * norm(p) + eps'),
  )

  def __init__(self, learning_rate=None, beta=0.9, weight_decay=0, trust_coefficient=0.001,
               eps=0, nesterov=False):
    super().__init__(
        _LARSHyperParams(learning_rate, beta, weight_decay, trust_coefficient, eps, nesterov))
