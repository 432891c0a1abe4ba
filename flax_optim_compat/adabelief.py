"""Legacy ``flax.optim.adabelief``: AdaBelief with learning-rate-scaled decoupled weight decay."""
import jax
import optax
from flax import struct

from . import _hyper
from ._adapter import OptaxBackedDef
from ._plain_optax import Hyper, PlainCall, PlainForm

__all__ = ['AdaBelief']


@struct.dataclass
class _AdaBeliefHyperParams:
  learning_rate: jax.Array | float | None
  beta1: jax.Array | float
  beta2: jax.Array | float
  eps: jax.Array | float
  weight_decay: jax.Array | float


@struct.dataclass
class _AdaBeliefParamState:
  grad_ema: jax.Array
  grad_sq_ema: jax.Array


def adabelief_transform(hyper_params: _AdaBeliefHyperParams) -> optax.GradientTransformation:
  """``scale_by_belief(eps_root=eps) -> add_decayed_weights -> -lr``.

  Legacy adds ``eps`` twice: into the stored second moment every step (optax's ``eps_root``)
  and to ``sqrt(s_hat)`` (optax's ``eps``), so both get the one legacy value. The prediction
  error uses the updated first moment in both (optax >= 0.2; 0.1.x used the previous one).
  Legacy computes ``(p - (lr * m_hat) / (sqrt(s_hat) + eps)) - (lr * wd) * p``; optax
  associates the same terms as ``p - lr * (m_hat / (sqrt(s_hat) + eps) + wd * p)`` (float32
  rounding only).
  """
  hp = hyper_params
  parts = [optax.scale_by_belief(b1=hp.beta1, b2=hp.beta2, eps=hp.eps, eps_root=hp.eps)]
  parts += _hyper.decayed_weights(hp.weight_decay)
  parts.append(_hyper.scale_by_required_learning_rate(hp.learning_rate))
  return optax.chain(*parts)


# Legacy adds its one `eps` inside the stored second moment and outside the square root.
_BELIEF_KEYWORDS = (('b1', Hyper('beta1')), ('b2', Hyper('beta2')), ('eps', Hyper('eps')),
                    ('eps_root', Hyper('eps')))


class AdaBelief(OptaxBackedDef):
  """AdaBelief (Zhuang et al., 2020): Adam whose second moment tracks ``(g - m')**2``.

  ``m' = b1 * m + (1 - b1) * g``; ``s' = b2 * s + (1 - b2) * (g - m')**2 + eps``;
  ``p' = p - lr * m_hat / (sqrt(s_hat) + eps) - lr * weight_decay * p`` with Adam's bias
  corrections ``m_hat``, ``s_hat``.

  Args:
    learning_rate: the step size (``None``: pass ``learning_rate=`` every step).
    beta1: decay of the gradient average.
    beta2: decay of the average of the squared prediction error ``(g - m')**2``.
    eps: added to the stored second moment every step and to ``sqrt(s_hat)``.
    weight_decay: ``p' -= learning_rate * weight_decay * p`` (not part of the moments).

  Examples:
    >>> import jax.numpy as jnp
    >>> import flax_optim_compat as optim
    >>> optimizer = optim.AdaBelief(learning_rate=0.1).create({'w': jnp.array([1.0])})
    >>> optimizer = optimizer.apply_gradient({'w': jnp.array([4.0])})
    >>> optimizer.target['w'].round(4)  # 1 - 0.1 * m_hat / sqrt(s_hat) = 1 - 0.1 * 4 / 3.6
    Array([0.8889], dtype=float32)
    >>> optimizer.state.param_states['w'].grad_ema
    Array([0.4], dtype=float32)

  Differences from optax:
    none in the formula: ``optax.scale_by_belief(b1, b2, eps=eps, eps_root=eps)`` chained with
    ``optax.add_decayed_weights(weight_decay)`` and ``-learning_rate`` (note ``eps_root``
    must equal ``eps``; ``optax.adabelief`` defaults differ). bfloat16/float16 params are
    updated in float32 (legacy's bias correction in bfloat16 never moved them).

  References:
    Zhuang et al., `AdaBelief Optimizer: Adapting Stepsizes by the Belief in Observed
    Gradients <https://arxiv.org/abs/2010.07468>`_
  """
  build_transform = staticmethod(adabelief_transform)
  param_state_cls = _AdaBeliefParamState
  optax_state_fields = {'grad_ema': 'mu', 'grad_sq_ema': 'nu'}
  # bfloat16: legacy computed the bias correction in the param dtype, where 0.999 is 1.0.
  half_precision_note = ('flax 0.5.3 never moved it (1 - beta2**t rounds to 0 in bfloat16); the '
                         'continuation trains it from this step on')
  plain_optax_forms = (
      PlainForm((PlainCall('adabelief', (('learning_rate', Hyper('learning_rate')),)
                           + _BELIEF_KEYWORDS),), when=(('weight_decay', 0),)),
      PlainForm((PlainCall('scale_by_belief', _BELIEF_KEYWORDS),
                 PlainCall('add_decayed_weights', (('weight_decay', Hyper('weight_decay')),)),
                 PlainCall('scale_by_learning_rate',
                           (('learning_rate', Hyper('learning_rate')),)))),
  )

  def __init__(self, learning_rate=None, beta1=0.9, beta2=0.999, eps=1e-16, weight_decay=0.0):
    super().__init__(_AdaBeliefHyperParams(learning_rate, beta1, beta2, eps, weight_decay))
