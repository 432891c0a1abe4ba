"""The one warning class this package emits, and the helper that emits it.

Legacy ``flax.optim`` warned with plain ``DeprecationWarning`` and, on import, inserted an
``"always"`` filter for its own modules. We never touch the global warning filters; instead every
warning we emit is a :class:`FlaxOptimDeprecationWarning`, a ``DeprecationWarning`` subclass, so
code that filtered ``DeprecationWarning`` keeps working and new code can target exactly ours::

  import warnings
  import flax_optim_compat
  warnings.filterwarnings('ignore', category=flax_optim_compat.FlaxOptimDeprecationWarning)
"""
import warnings

__all__ = ['FlaxOptimDeprecationWarning', 'warn_deprecated']

# Exact legacy texts (old code and old tests match on them, typos included).
USE_OPTAX = ('Use `optax` instead of `flax.optim`. Refer to the update guide '
             'https://flax.readthedocs.io/en/latest/howtos/optax_update_guide.html '
             'for detailed instructions.')
COMPUTE_GRADIENT = ('compute_gradient() will be removed soon. '
                    'Use jax.grad() or jax.value_and_grad()instead.')
OPTIMIZE = ('optimize() will be removed soon. '
            'Use jax.grad() or jax.value_and_grad()and apply_gradient() instead.')


class FlaxOptimDeprecationWarning(DeprecationWarning):
  """Warned where legacy ``flax.optim`` warned: the legacy API is deprecated in favour of optax.

  Examples:
    >>> import warnings
    >>> import flax_optim_compat as optim
    >>> with warnings.catch_warnings(record=True) as caught:
    ...   warnings.simplefilter('always')
    ...   _ = optim.GradientDescent(learning_rate=0.1)
    >>> caught[0].category.__name__
    'FlaxOptimDeprecationWarning'
  """


def warn_deprecated(message: str, stacklevel: int = 3) -> None:
  """Emits ``message`` as a :class:`FlaxOptimDeprecationWarning` attributed to user code."""
  warnings.warn(message, FlaxOptimDeprecationWarning, stacklevel=stacklevel)
