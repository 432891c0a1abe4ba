"""Legacy ``flax.optim.adam``: Adam with learning-rate-scaled decoupled weight decay."""
import jax
import optax
from flax import struct

from . import _hyper
from ._adapter import OptaxBackedDef
from ._plain_optax import Hyper, PlainCall, PlainForm

__all__ = ['Adam']


@struct.dataclass
class _AdamHyperParams:
  learning_rate: jax.Array | float | None
  beta1: jax.Array | float
  beta2: jax.Array | float
  eps: jax.Array | float
  weight_decay: jax.Array | float


@struct.dataclass
class _AdamParamState:
  grad_ema: jax.Array
  grad_sq_ema: jax.Array


def adam_transform(hyper_params: _AdamHyperParams) -> optax.GradientTransformation:
  """``scale_by_adam -> add_decayed_weights -> -lr`` (= ``optax.adamw``).

  Legacy computes ``(p - (lr * m_hat) / (sqrt(v_hat) + eps)) - (lr * wd) * p``; optax computes
  ``p - lr * (m_hat / (sqrt(v_hat) + eps) + wd * p)``: the same terms, associated differently
  (float32 rounding only: below 2e-6 max abs over 50 steps, measured).
  """
  hp = hyper_params
  parts = [optax.scale_by_adam(b1=hp.beta1, b2=hp.beta2, eps=hp.eps)]
  parts += _hyper.decayed_weights(hp.weight_decay)
  parts.append(_hyper.scale_by_required_learning_rate(hp.learning_rate))
  return optax.chain(*parts)


_ADAM_KEYWORDS = (('learning_rate', Hyper('learning_rate')), ('b1', Hyper('beta1')),
                  ('b2', Hyper('beta2')), ('eps', Hyper('eps')))


class Adam(OptaxBackedDef):
  """Adam (Kingma & Ba, 2014) with decoupled weight decay scaled by the learning rate.

  Args:
    learning_rate: the step size (``None``: pass ``learning_rate=`` every step).
    beta1: decay of the first-moment estimate.
    beta2: decay of the second-moment estimate.
    eps: added to ``sqrt(v_hat)`` (outside the square root).
    weight_decay: ``p' -= learning_rate * weight_decay * p`` (not part of the moments).

  Examples:
    >>> import jax.numpy as jnp
    >>> import flax_optim_compat as optim
    >>> optimizer = optim.Adam(learning_rate=0.1).create({'w': jnp.array([1.0])})
    >>> optimizer = optimizer.apply_gradient({'w': jnp.array([4.0])})
    >>> optimizer.target['w'].round(5)  # the first Adam step moves by ~learning_rate
    Array([0.9], dtype=float32)
    >>> sorted(vars(optimizer.state.param_states['w']))
    ['grad_ema', 'grad_sq_ema']

  Differences from flax.optim:
    bfloat16/float16 params are updated in float32 and stored back in their dtype. Legacy
    computed the bias correction in the param dtype, where ``0.999`` rounds to ``1.0`` in
    bfloat16, so bfloat16 params never moved.

  References:
    Kingma & Ba, `Adam: A Method for Stochastic Optimization <https://arxiv.org/abs/1412.6980>`_
  """
  build_transform = staticmethod(adam_transform)
  param_state_cls = _AdamParamState
  optax_state_fields = {'grad_ema': 'mu', 'grad_sq_ema': 'nu'}
  # bfloat16: legacy computed the bias correction in the param dtype, where 0.999 is 1.0.
  half_precision_note = ('flax 0.5.3 never moved it (1 - beta2**t rounds to 0 in bfloat16); the '
                         'continuation trains it from this step on')
  plain_optax_forms = (
      PlainForm((PlainCall('adam', _ADAM_KEYWORDS),), when=(('weight_decay', 0),)),
      PlainForm((PlainCall('adamw', _ADAM_KEYWORDS + (
          ('weight_decay', Hyper('weight_decay')),)),)),
  )

  def __init__(self, learning_rate=None, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0):
    super().__init__(_AdamHyperParams(learning_rate, beta1, beta2, eps, weight_decay))
