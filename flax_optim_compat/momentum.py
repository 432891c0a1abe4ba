"""Legacy ``flax.optim.momentum``: heavy-ball / Nesterov momentum with coupled L2 decay."""
import jax
import optax
from flax import struct

from . import _hyper
from ._adapter import OptaxBackedDef
from ._plain_optax import Hyper, PlainCall, PlainForm

__all__ = ['Momentum']


@struct.dataclass
class _MomentumHyperParams:
  learning_rate: jax.Array | float | None
  beta: jax.Array | float
  weight_decay: jax.Array | float
  nesterov: bool


@struct.dataclass
class _MomentumParamState:
  momentum: jax.Array


def momentum_transform(hyper_params: _MomentumHyperParams) -> optax.GradientTransformation:
  """``add_decayed_weights -> trace -> -lr``: the legacy formula op for op.

  The decay is coupled (``g + wd * p`` enters the momentum), as legacy. Legacy skipped it
  with a Python ``if weight_decay != 0``; we skip it only for a concrete zero, so a traced
  ``weight_decay`` override works under ``jit`` (legacy raised ``ConcretizationTypeError``).
  """
  hp = hyper_params
  parts = _hyper.decayed_weights(hp.weight_decay)
  parts.append(optax.trace(decay=hp.beta, nesterov=hp.nesterov))
  parts.append(_hyper.scale_by_required_learning_rate(hp.learning_rate))
  return optax.chain(*parts)


_SGD = PlainCall('sgd', (('learning_rate', Hyper('learning_rate')), ('momentum', Hyper('beta')),
                         ('nesterov', Hyper('nesterov'))))


class Momentum(OptaxBackedDef):
  """Momentum SGD: ``m' = beta * m + g``; ``p' = p - lr * m'`` (or the Nesterov step).

  Args:
    learning_rate: the step size (``None``: pass ``learning_rate=`` every step).
    beta: the momentum coefficient.
    weight_decay: coupled L2 decay: ``g + weight_decay * p`` enters the momentum.
    nesterov: use Nesterov's update ``g + beta * m'``.

  Examples:
    >>> import jax.numpy as jnp
    >>> import flax_optim_compat as optim
    >>> optimizer = optim.Momentum(learning_rate=0.1, beta=0.2).create({'w': jnp.array([1.0])})
    >>> optimizer = optimizer.apply_gradient({'w': jnp.array([3.0])})
    >>> optimizer.target['w'], optimizer.state.param_states['w'].momentum
    (Array([0.7], dtype=float32), Array([3.], dtype=float32))

  Differences from optax:
    none; ``optax.sgd(lr, momentum=beta, nesterov=nesterov)`` (with
    ``optax.add_decayed_weights(weight_decay)`` chained first) is bit-identical.
  """
  build_transform = staticmethod(momentum_transform)
  param_state_cls = _MomentumParamState
  optax_state_fields = {'momentum': 'trace'}
  plain_optax_forms = (
      PlainForm((_SGD,), when=(('weight_decay', 0),)),
      # Coupled decay: `g + wd * p` enters the momentum, so the decay goes first.
      PlainForm((PlainCall('add_decayed_weights', (('weight_decay', Hyper('weight_decay')),)),
                 _SGD)),
  )

  def __init__(self, learning_rate=None, beta=0.9, weight_decay=0, nesterov=False):
    super().__init__(_MomentumHyperParams(learning_rate, beta, weight_decay, nesterov))
