"""Legacy ``flax.optim.rmsprop``: RMSProp (plain or centered) with ``eps`` outside the root."""
import jax
import optax
from flax import struct

from . import _hyper
from ._adapter import OptaxBackedDef
from ._plain_optax import Hyper, PlainCall, PlainForm

__all__ = ['RMSProp']


@struct.dataclass
class _RMSPropHyperParams:
  learning_rate: jax.Array | float | None
  beta2: jax.Array | float
  eps: jax.Array | float
  centered: bool


@struct.dataclass
class _RMSPropParamState:
  v: jax.Array
  mg: jax.Array | None  # None unless centered


def rmsprop_transform(hyper_params: _RMSPropHyperParams) -> optax.GradientTransformation:
  """``scale_by_rms`` (or ``scale_by_stddev`` when centered) ``-> -lr``, ``eps_in_sqrt=False``.

  ``centered`` picks the state layout (``mg`` exists only when centered), so, as in legacy, it
  must be a concrete Python value: a traced one cannot choose between two state structures.
  Legacy computes ``(lr * g) / (sqrt(v~) + eps)``, optax ``-lr * (g * (1 / (sqrt(v~) + eps)))``
  (float32 rounding only).
  """
  hp = hyper_params
  if isinstance(hp.centered, jax.core.Tracer):
    raise TypeError('RMSProp: centered= decides whether the state holds `mg`; it cannot be a '
                    'traced value (pass a Python bool, not a jit argument).')
  scale_by = optax.scale_by_stddev if hp.centered else optax.scale_by_rms
  return optax.chain(scale_by(decay=hp.beta2, eps=hp.eps, eps_in_sqrt=False),
                     _hyper.scale_by_required_learning_rate(hp.learning_rate))


class RMSProp(OptaxBackedDef):
  """RMSProp: ``v' = b2 * v + (1 - b2) * g**2``; ``p' = p - lr * g / (sqrt(v') + eps)``.

  Centered: also ``mg' = b2 * mg + (1 - b2) * g`` and ``v'`` above is replaced by
  ``v' - mg'**2`` (the variance estimate). No bias correction.

  Args:
    learning_rate: the step size (``None``: pass ``learning_rate=`` every step).
    beta2: decay of the moving averages.
    eps: added to the square root (outside it).
    centered: normalise by the variance instead of the uncentered second moment; fixed at
      construction (it decides whether the state holds ``mg``; otherwise ``mg`` is ``None``).

  Examples:
    >>> import jax.numpy as jnp
    >>> import flax_optim_compat as optim
    >>> optimizer = optim.RMSProp(learning_rate=0.1, beta2=0.75).create({'w': jnp.array([1.0])})
    >>> optimizer = optimizer.apply_gradient({'w': jnp.array([4.0])})
    >>> optimizer.target['w'], optimizer.state.param_states['w']
    (Array([0.8], dtype=float32), _RMSPropParamState(v=Array([4.], dtype=float32), mg=None))

  Differences from optax:
    none with ``eps_in_sqrt=False``: ``optax.rmsprop`` defaults to ``eps`` inside the square
    root (``rsqrt(v' + eps)``), which we measured to differ by up to ~2% of the parameters
    over 50 steps. ``v`` maps to ``nu`` and ``mg`` to ``ScaleByRStdDevState.mu``.
  """
  build_transform = staticmethod(rmsprop_transform)
  param_state_cls = _RMSPropParamState
  optax_state_fields = {'v': 'nu', 'mg': 'mu'}
  plain_optax_forms = (
      PlainForm((PlainCall('rmsprop', (('learning_rate', Hyper('learning_rate')),
                                       ('decay', Hyper('beta2')), ('eps', Hyper('eps')),
                                       ('centered', Hyper('centered')),
                                       ('eps_in_sqrt', False))),)),
  )

  def __init__(self, learning_rate=None, beta2=0.9, eps=1e-8, centered=False):
    super().__init__(_RMSPropHyperParams(learning_rate, beta2, eps, centered))
