"""Legacy ``flax.optim.sgd``: plain gradient descent."""
import jax
import optax
from flax import struct

from . import _hyper
from ._adapter import OptaxBackedDef
from ._plain_optax import Hyper, PlainCall, PlainForm

__all__ = ['GradientDescent']


@struct.dataclass
class _GradientDescentHyperParams:
  learning_rate: jax.Array | float | None


# GradientDescent keeps no per-parameter state: every leaf's state is `()`.


def gradient_descent_transform(hyper_params: _GradientDescentHyperParams
                               ) -> optax.GradientTransformation:
  """``p - lr * g``: exactly ``optax.sgd(lr)``."""
  return _hyper.scale_by_required_learning_rate(hyper_params.learning_rate)


class GradientDescent(OptaxBackedDef):
  """Gradient descent: ``p' = p - learning_rate * g``.

  Args:
    learning_rate: the step size; may be ``None`` if every step passes ``learning_rate=``.

  Examples:
    >>> import jax.numpy as jnp
    >>> import flax_optim_compat as optim
    >>> optimizer = optim.GradientDescent(learning_rate=0.1).create({'w': jnp.array([1.0])})
    >>> optimizer = optimizer.apply_gradient({'w': jnp.array([3.0])})
    >>> optimizer.target['w'], optimizer.state.param_states
    (Array([0.7], dtype=float32), {'w': ()})

  Differences from optax:
    none; ``optax.sgd(learning_rate)`` gives bit-identical updates.
  """

  build_transform = staticmethod(gradient_descent_transform)
  plain_optax_forms = (
      PlainForm((PlainCall('sgd', (('learning_rate', Hyper('learning_rate')),)),)),)

  def __init__(self, learning_rate=None):
    super().__init__(_GradientDescentHyperParams(learning_rate))
