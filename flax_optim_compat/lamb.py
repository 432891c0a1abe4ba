"""Legacy ``flax.optim.lamb``: LAMB with legacy's zero-norm trust-ratio rule."""
import jax
import jax.numpy as jnp
import optax
from flax import struct

from . import _hyper
from ._adapter import OptaxBackedDef
from ._plain_optax import Hyper, PlainCall, PlainForm

__all__ = ['LAMB']


@struct.dataclass
class _LAMBHyperParams:
  learning_rate: jax.Array | float | None
  beta1: jax.Array | float
  beta2: jax.Array | float
  weight_decay: jax.Array | float  # before eps, as in legacy
  eps: jax.Array | float


@struct.dataclass
class _LAMBParamState:
  grad_ema: jax.Array
  grad_sq_ema: jax.Array


def scale_by_lamb_trust_ratio() -> optax.GradientTransformation:
  """Scales each leaf's update ``u`` by ``||p|| / ||u||`` (Frobenius norms of the whole leaf).

  Differs from ``optax.scale_by_trust_ratio`` only where a norm is zero: optax uses ratio 1
  when ``||p|| == 0`` or ``||u|| == 0``; legacy uses 1 only when both are zero, so a
  zero-valued parameter with a non-zero update gets ratio ``0`` (a zero-initialised bias
  never moves) and a non-zero parameter with a zero update gets ``inf`` (``inf * 0`` makes
  the parameter NaN). Old trainings depend on the first rule, so we keep both, as legacy.

  Returns:
    A stateless ``optax.GradientTransformation``; ``update`` needs ``params``.

  Examples:
    >>> import jax.numpy as jnp
    >>> tx = scale_by_lamb_trust_ratio()
    >>> params = {'w': jnp.array([3.0, 4.0]), 'b': jnp.zeros(2)}
    >>> updates, _ = tx.update({'w': jnp.array([0.0, 1.0]), 'b': jnp.ones(2)}, tx.init(params),
    ...                        params)
    >>> updates['w'], updates['b']
    (Array([0., 5.], dtype=float32), Array([0., 0.], dtype=float32))
  """

  def init_fn(params):
    del params
    return optax.EmptyState()

  def update_fn(updates, state, params=None):
    if params is None:
      raise ValueError('scale_by_lamb_trust_ratio needs the params: '
                       'update(updates, state, params).')

    def scale(u, p):
      param_norm = jnp.linalg.norm(p)
      update_norm = jnp.linalg.norm(u)
      ratio = jnp.where(param_norm + update_norm > 0., param_norm / update_norm, 1.)
      return ratio * u

    return jax.tree_util.tree_map(scale, updates, params), state

  return optax.GradientTransformation(init_fn, update_fn)


def lamb_transform(hyper_params: _LAMBHyperParams) -> optax.GradientTransformation:
  """``scale_by_adam -> add_decayed_weights -> scale_by_lamb_trust_ratio -> -lr``.

  Legacy skipped the decay with a Python ``if weight_decay != 0``; we skip it only for a
  concrete zero, so a traced ``weight_decay`` override works under ``jit`` (legacy raised
  ``ConcretizationTypeError``). Legacy computes ``p - (r * lr) * u``, we ``p - lr * (r * u)``
  (float32 rounding only).
  """
  hp = hyper_params
  parts = [optax.scale_by_adam(b1=hp.beta1, b2=hp.beta2, eps=hp.eps)]
  parts += _hyper.decayed_weights(hp.weight_decay)
  parts.append(scale_by_lamb_trust_ratio())
  parts.append(_hyper.scale_by_required_learning_rate(hp.learning_rate))
  return optax.chain(*parts)


class LAMB(OptaxBackedDef):
  """LAMB (You et al., 2019): Adam's step (plus decay), rescaled per leaf by a trust ratio.

  ``u = m_hat / (sqrt(v_hat) + eps) + weight_decay * p`` (Adam's moments and bias
  corrections); ``p' = p - lr * (||p|| / ||u||) * u`` with norms over the whole leaf.

  Args:
    learning_rate: the step size (``None``: pass ``learning_rate=`` every step).
    beta1: decay of the first-moment estimate.
    beta2: decay of the second-moment estimate.
    weight_decay: ``weight_decay * p`` is added to ``u`` before the trust ratio.
    eps: added to ``sqrt(v_hat)`` (outside the square root).

  Examples:
    >>> import jax.numpy as jnp
    >>> import flax_optim_compat as optim
    >>> optimizer = optim.LAMB(learning_rate=0.1).create(
    ...     {'w': jnp.array([3.0, 4.0]), 'b': jnp.zeros(2)})
    >>> optimizer = optimizer.apply_gradient({'w': jnp.array([1.0, 1.0]), 'b': jnp.ones(2)})
    >>> optimizer.target['w'].round(4)  # moved by lr * ||w|| / sqrt(2) per element
    Array([2.6464, 3.6464], dtype=float32)
    >>> optimizer.target['b']  # zero params get trust ratio 0 and never move (legacy rule)
    Array([0., 0.], dtype=float32)

  Differences from optax:
    ``optax.lamb`` matches for non-zero params and updates. Where a norm is zero, legacy's
    trust ratio is kept (:func:`scale_by_lamb_trust_ratio`): ``||p|| = 0 < ||u||`` gives
    ratio 0 (optax: 1), ``||u|| = 0 < ||p||`` gives NaN params (optax: ratio 1). The first
    is what old trainings with zero-initialised biases rely on; for the second, legacy's NaN
    is reproduced rather than silently changing the trajectory.

  References:
    You et al., `Large Batch Optimization for Deep Learning: Training BERT in 76 minutes
    <https://arxiv.org/abs/1904.00962>`_
  """
  build_transform = staticmethod(lamb_transform)
  param_state_cls = _LAMBParamState
  optax_state_fields = {'grad_ema': 'mu', 'grad_sq_ema': 'nu'}
  # bfloat16: legacy computed the bias correction in the param dtype, where 0.999 is 1.0.
  half_precision_note = ('flax 0.5.3 made it NaN at its first update (1 - beta2**t rounds to 0 '
                         'in bfloat16); the continuation trains it')
  plain_optax_forms = (
      PlainForm((PlainCall('lamb', (('learning_rate', Hyper('learning_rate')),
                                    ('b1', Hyper('beta1')), ('b2', Hyper('beta2')),
                                    ('eps', Hyper('eps')),
                                    ('weight_decay', Hyper('weight_decay')))),),
                zero_params='optax.lamb moves an all-zero param (trust ratio 1), legacy kept it '
                            'at zero (ratio 0)'),
  )

  def __init__(self, learning_rate=None, beta1=0.9, beta2=0.999, weight_decay=0, eps=1e-6):
    super().__init__(_LAMBHyperParams(learning_rate, beta1, beta2, weight_decay, eps))
