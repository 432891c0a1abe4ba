"""Legacy ``flax.optim.adadelta``: Adadelta with learning-rate-scaled decoupled weight decay."""
import jax
import optax
from flax import struct

from . import _hyper
from ._adapter import OptaxBackedDef
from ._plain_optax import Hyper, PlainCall, PlainForm

__all__ = ['Adadelta']


@struct.dataclass
class _AdadeltaHyperParams:
  learning_rate: jax.Array | float | None
  rho: jax.Array | float
  eps: jax.Array | float
  weight_decay: jax.Array | float


@struct.dataclass
class _AdadeltaParamState:
  sq_avg: jax.Array
  acc_delta: jax.Array


def adadelta_transform(hyper_params: _AdadeltaHyperParams) -> optax.GradientTransformation:
  """``scale_by_adadelta -> add_decayed_weights -> -lr``.

  ``optax.scale_by_adadelta`` is legacy's recurrence op for op. The decay goes AFTER it:
  ``optax.adadelta(weight_decay=wd)`` adds ``wd * p`` to the gradient before the adaptive
  scaling (coupled), legacy subtracts ``lr * wd * p`` from the result (decoupled). Legacy
  computes ``(p - lr * delta) - (lr * wd) * p``, we ``p - lr * (delta + wd * p)`` (float32
  rounding only).
  """
  hp = hyper_params
  parts = [optax.scale_by_adadelta(rho=hp.rho, eps=hp.eps)]
  parts += _hyper.decayed_weights(hp.weight_decay)
  parts.append(_hyper.scale_by_required_learning_rate(hp.learning_rate))
  return optax.chain(*parts)


class Adadelta(OptaxBackedDef):
  """Adadelta (Zeiler, 2012) with decoupled weight decay scaled by the learning rate.

  ``a' = rho * a + (1 - rho) * g**2``; ``delta = sqrt(d + eps) / sqrt(a' + eps) * g``;
  ``d' = rho * d + (1 - rho) * delta**2``; ``p' = p - lr * delta - lr * weight_decay * p``.

  Args:
    learning_rate: the step size (``None``: pass ``learning_rate=`` every step).
    rho: decay of the running averages of ``g**2`` (``sq_avg``) and ``delta**2``
      (``acc_delta``).
    eps: added inside both square roots.
    weight_decay: ``p' -= learning_rate * weight_decay * p`` (not part of the averages).

  Examples:
    >>> import jax.numpy as jnp
    >>> import flax_optim_compat as optim
    >>> optimizer = optim.Adadelta(learning_rate=1.0, rho=0.5, eps=1.0).create(
    ...     {'w': jnp.array([1.0])})
    >>> optimizer = optimizer.apply_gradient({'w': jnp.array([4.0])})
    >>> optimizer.target['w'].round(5)  # 1 - sqrt(0 + 1) / sqrt(8 + 1) * 4
    Array([-0.33333], dtype=float32)
    >>> optimizer.state.param_states['w'].sq_avg
    Array([8.], dtype=float32)

  Differences from optax:
    none in the formula, but ``optax.adadelta(weight_decay=...)`` couples the decay (adds it
    to the gradient before the scaling); the legacy decay is decoupled:
    ``chain(scale_by_adadelta(rho, eps), add_decayed_weights(weight_decay), -learning_rate)``.

  References:
    Zeiler, `ADADELTA: An Adaptive Learning Rate Method <https://arxiv.org/abs/1212.5701>`_
  """
  build_transform = staticmethod(adadelta_transform)
  param_state_cls = _AdadeltaParamState
  optax_state_fields = {'sq_avg': 'e_g', 'acc_delta': 'e_x'}
  plain_optax_forms = (
      PlainForm((PlainCall('adadelta', (('learning_rate', Hyper('learning_rate')),
                                        ('rho', Hyper('rho')), ('eps', Hyper('eps')),
                                        ('weight_decay', 0.0))),),
                when=(('weight_decay', 0),)),
      # Decoupled decay: after the adaptive scaling (`optax.adadelta` adds it before).
      PlainForm((PlainCall('scale_by_adadelta', (('rho', Hyper('rho')), ('eps', Hyper('eps')))),
                 PlainCall('add_decayed_weights', (('weight_decay', Hyper('weight_decay')),)),
                 PlainCall('scale_by_learning_rate',
                           (('learning_rate', Hyper('learning_rate')),)))),
  )

  def __init__(self, learning_rate=None, rho=0.9, eps=1e-6, weight_decay=0.0):
    super().__init__(_AdadeltaHyperParams(learning_rate, rho, eps, weight_decay))
