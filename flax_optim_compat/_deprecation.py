"""The one warning class this package emits, and the helper that emits it.

Legacy ``flax.optim`` warned with plain ``DeprecationWarning`` and, on import, inserted an
``"always"`` filter for its own modules. We never touch the global warning filters; instead every
warning we emit is a :class:`FlaxOptimDeprecationWarning`, a ``DeprecationWarning`` subclass, so
code that filtered ``DeprecationWarning`` keeps working and new code can target exactly ours::

  import warnings
  import flax_optim_compat
  warnings.filterwarnings('ignore', category=flax_optim_compat.FlaxOptimDeprecationWarning)

The warnings are attributed to the user's line (the first frame outside this package), not to
our module as legacy did. With Python's default filters a ``DeprecationWarning`` is therefore
shown when that line is in ``__main__`` (the script being run) and in test runners, and hidden
when it is in an imported module; ``python -W always::DeprecationWarning`` (or the filter
above with ``'always'``) shows every one, as legacy's import-time filter did.

Where legacy warned (the texts below are legacy's, verbatim; ``USE_OPTAX`` then says how this
package moves code and checkpoints off it, after legacy's text, so a ``match=`` on legacy's text
still matches):

* constructing any ``OptimizerDef`` (every optimizer, ``MultiOptimizer``, ``WeightNorm``,
  ``ReplicatedOptimizer``, hence also ``Optimizer.replicate()`` and ``create(focus=...)``);
* ``Optimizer.compute_gradient`` / ``compute_gradients``;
* ``Optimizer.optimize`` (then ``compute_gradient`` warns as well).

``flax.traverse_util.Traversal`` subclasses (``ModelParamTraversal``) warn too, but that warning
comes from flax itself (plain ``DeprecationWarning``, flax's current text).
"""
import sys
import warnings

__all__ = ['FlaxOptimDeprecationWarning', 'warn_deprecated']

# Exact legacy texts (old code and old tests match on them, typos included).
USE_OPTAX = ('Use `optax` instead of `flax.optim`. Refer to the update guide '
             'https://flax.readthedocs.io/en/latest/howtos/optax_update_guide.html '
             'for detailed instructions. To move off it, `flax-optim-compat migrate PATH` '
             'rewrites the code and `flax-optim-compat convert` the checkpoints '
             '(flax-optim-compat --help).')
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


_PACKAGE = __name__.rpartition('.')[0]


def _is_ours(frame) -> bool:
  module = frame.f_globals.get('__name__', '')
  return module == _PACKAGE or module.startswith(_PACKAGE + '.')


def _user_stacklevel() -> int:
  """The ``stacklevel`` of the first frame, from ``warn_deprecated``'s caller up, outside us."""
  frame = sys._getframe(2)  # pylint: disable=protected-access  # warn_deprecated's caller
  level = 2
  while frame is not None and _is_ours(frame):
    frame = frame.f_back
    level += 1
  return level


def warn_deprecated(message: str, stacklevel: int | None = None) -> None:
  """Emits ``message`` as a :class:`FlaxOptimDeprecationWarning` attributed to user code.

  Args:
    message: the warning text.
    stacklevel: passed to ``warnings.warn`` as is (1 is this function's line); by default
      the first frame outside ``flax_optim_compat`` (the user's line), however deep the call.
  """
  if stacklevel is None:
    stacklevel = _user_stacklevel()
  warnings.warn(message, FlaxOptimDeprecationWarning, stacklevel=stacklevel)
