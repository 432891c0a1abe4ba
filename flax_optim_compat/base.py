"""The legacy ``flax.optim.base`` API: OptimizerState, OptimizerDef, Optimizer, ReplicatedOptimizer.

The user-visible objects are exactly the legacy ones (same dataclass fields, same state dicts);
built-in optimizers run their math through optax (see ``_adapter``), user subclasses that
implement the legacy per-leaf protocol (``init_param_state`` / ``apply_param_gradient``) run
as they always did.
"""
from typing import Any, Optional

import jax
import jax.numpy as jnp
import optax
from flax import jax_utils
from flax import serialization
from flax import struct
from flax import traverse_util

from . import _adapter
from . import _deprecation
from . import _restore

__all__ = ['OptimizerState', 'OptimizerDef', 'Optimizer', 'ReplicatedOptimizer',
           'ModelParamTraversal']

# Same object as legacy: old code passes `optim.ModelParamTraversal(...)` as `focus=`.
ModelParamTraversal = traverse_util.ModelParamTraversal


@struct.dataclass
class OptimizerState:
  """The legacy optimizer state: a step counter and one state object per target leaf.

  Attributes:
    step: ``int32`` scalar array, the number of updates applied so far.
    param_states: a tree mirroring the target whose leaves are the per-parameter states
      (e.g. ``_AdamParamState``), ``()`` or ``None``.

  Examples:
    >>> import jax.numpy as jnp
    >>> import flax_optim_compat as optim
    >>> state = optim.OptimizerState(jnp.asarray(0, jnp.int32), {'w': ()})
    >>> int(state.step), state.param_states
    (0, {'w': ()})
  """
  step: jax.Array
  param_states: Any


class OptimizerDef:
  """Defines how an optimizer initialises its state and applies gradients (legacy API).

  Two ways to implement one:

  * built-ins declare ``param_state_cls``, ``optax_state_fields`` and ``optax_transform``;
    the shared adapter runs the optax transform on the whole tree at once;
  * user code written for legacy ``flax.optim`` implements ``init_param_state`` and
    ``apply_param_gradient`` per leaf, and keeps working unchanged.

  Args:
    hyper_params: a ``flax.struct.dataclass`` of hyper-parameters.

  Examples:
    A legacy-style custom optimizer (the per-leaf protocol):

    >>> import jax.numpy as jnp
    >>> from flax import struct
    >>> import flax_optim_compat as optim
    >>> @struct.dataclass
    ... class _HP:
    ...   learning_rate: float
    >>> class SignSGD(optim.OptimizerDef):
    ...   def init_param_state(self, param):
    ...     return ()
    ...   def apply_param_gradient(self, step, hyper_params, param, state, grad):
    ...     return param - hyper_params.learning_rate * jnp.sign(grad), state
    >>> opt = SignSGD(_HP(0.5)).create({'w': jnp.array([1.0, 1.0])})
    >>> opt.apply_gradient({'w': jnp.array([3.0, -2.0])}).target['w']
    Array([0.5, 1.5], dtype=float32)
  """

  # Built-ins set these (data only; the translation lives in _adapter):
  #   transform_fn        staticmethod: hyper_params -> optax.GradientTransformation
  #   param_state_cls     the legacy per-leaf dataclass, or None for a `()` state
  #   optax_state_fields  {legacy field: optax state field}
  transform_fn = None
  param_state_cls: Optional[type] = None
  optax_state_fields: dict = {}

  def __init__(self, hyper_params):
    self.hyper_params = hyper_params
    _deprecation.warn_deprecated(_deprecation.USE_OPTAX)

  # -- optax backing -------------------------------------------------------------------

  def optax_transform(self, hyper_params=None) -> optax.GradientTransformation:
    """The optax ``GradientTransformation`` computing this optimizer's update.

    Args:
      hyper_params: the hyper-params to build it for; defaults to ``self.hyper_params``.

    Returns:
      An ``optax.GradientTransformation`` (the update includes ``-learning_rate``).
    """
    if self.transform_fn is None:
      raise NotImplementedError(
          f'{type(self).__name__} is a per-leaf (legacy protocol) optimizer and has no optax '
          'transform.')
    return self.transform_fn(self.hyper_params if hyper_params is None else hyper_params)

  def _has_optax_transform(self) -> bool:
    return (self.transform_fn is not None
            or type(self).optax_transform is not OptimizerDef.optax_transform)

  def _is_per_leaf(self) -> bool:
    # A subclass that implements the legacy per-leaf protocol itself keeps it, even when it
    # derives from a built-in optax-backed optimizer.
    return type(self).apply_param_gradient is not OptimizerDef.apply_param_gradient

  # -- the legacy per-leaf protocol ----------------------------------------------------

  def apply_param_gradient(self, step, hyper_params, param, state, grad):
    """Applies ``grad`` to one parameter; returns ``(new_param, new_state)``.

    Built-ins answer through their optax transform on a one-leaf tree; legacy custom
    optimizers override this.
    """
    if not self._has_optax_transform():
      raise NotImplementedError()
    new_param, new_state = _adapter.apply_gradient(
        self, hyper_params, param, OptimizerState(step, state), grad)
    return new_param, new_state

  def init_param_state(self, param):
    """The initial state of one parameter."""
    if not self._has_optax_transform():
      raise NotImplementedError()
    return _adapter.init_param_states(self, param)

  # -- whole-tree API --------------------------------------------------------------------

  def init_state(self, params) -> OptimizerState:
    if self._is_per_leaf():
      param_states = jax.tree_util.tree_map(self.init_param_state, params)
    else:
      param_states = _adapter.init_param_states(self, params)
    return OptimizerState(jnp.asarray(0, dtype=jnp.int32), param_states)

  def apply_gradient(self, hyper_params, params, state, grads):
    """Applies ``grads`` to ``params``; returns ``(new_params, new_state)``.

    Raises:
      ValueError: ``grads`` differs from ``params`` in tree structure or in a leaf's shape.
    """
    _adapter.check_grads(params, grads)
    if self._is_per_leaf():
      treedef = jax.tree_util.tree_structure(params)
      out = [self.apply_param_gradient(state.step, hyper_params, p, s, g)
             for p, s, g in zip(treedef.flatten_up_to(params),
                                treedef.flatten_up_to(state.param_states),
                                treedef.flatten_up_to(grads))]
      new_params = treedef.unflatten([p for p, _ in out])
      new_param_states = treedef.unflatten([s for _, s in out])
    else:
      new_params, new_param_states = _adapter.apply_gradient(
          self, hyper_params, params, state, grads)
    return new_params, OptimizerState(state.step + 1, new_param_states)

  def update_hyper_params(self, **hyper_param_overrides):
    """The hyper-params for one step: ``self.hyper_params`` with the overrides applied.

    ``hyper_params=`` replaces the whole object; other keywords replace single fields (an
    unknown name raises ``TypeError``, as legacy).
    """
    hp = hyper_param_overrides.pop('hyper_params', self.hyper_params)
    if hyper_param_overrides:
      hp = hp.replace(**hyper_param_overrides)
    return hp

  def create(self, target, focus=None) -> 'Optimizer':
    """Creates an :class:`Optimizer` for ``target``; ``focus`` (a traversal) limits the update."""
    opt_def = self
    if focus:
      opt_def = MultiOptimizer((focus, self))  # defined below in this module
    return Optimizer(opt_def, opt_def.init_state(target), target)

  def state_dict(self, target, state):
    return serialization.to_state_dict({
        'target': serialization.to_state_dict(target),
        'state': serialization.to_state_dict(state),
    })

  def restore_state(self, opt_target, opt_state, state_dict):
    """``(target, state)`` restored from ``state_dict``; only the structure of the inputs is used."""
    return _restore.restore_target_and_state(self, opt_target, opt_state, state_dict)


class _NoAux:
  """Marks a loss function without auxiliary output (see ``Optimizer.compute_gradient``)."""


class Optimizer(struct.PyTreeNode):
  """A target (the params) and its optimizer state, updated functionally.

  Attributes:
    optimizer_def: the :class:`OptimizerDef` (static; compared and hashed by identity).
    state: the :class:`OptimizerState`.
    target: the params being optimised.

  Examples:
    >>> import jax, jax.numpy as jnp
    >>> import flax_optim_compat as optim
    >>> optimizer = optim.Momentum(learning_rate=0.1, beta=0.9).create({'w': jnp.ones(2)})
    >>> @jax.jit
    ... def step(optimizer, lr):
    ...   grads = jax.grad(lambda p: jnp.sum(p['w'] ** 2))(optimizer.target)
    ...   return optimizer.apply_gradient(grads, learning_rate=lr)
    >>> optimizer = step(optimizer, 0.1)
    >>> optimizer.target['w'], int(optimizer.state.step)
    (Array([0.8, 0.8], dtype=float32), 1)
  """
  optimizer_def: OptimizerDef = struct.field(pytree_node=False)
  state: Any = struct.field(pytree_node=True)
  target: Any = struct.field(pytree_node=True)

  def apply_gradient(self, grads, **hyper_param_overrides) -> 'Optimizer':
    """A new optimizer with ``grads`` applied; overrides hold for this call only."""
    hyper_params = self.optimizer_def.update_hyper_params(**hyper_param_overrides)
    new_target, new_state = self.optimizer_def.apply_gradient(
        hyper_params, self.target, self.state, grads)
    return self.replace(target=new_target, state=new_state)

  def compute_gradient(self, loss_fn):
    """Deprecated: ``(loss, grad)`` or ``(loss, aux, grad)`` of ``loss_fn`` at the target."""
    _deprecation.warn_deprecated(_deprecation.COMPUTE_GRADIENT)

    def loss_wrapper(target):
      loss_and_aux = loss_fn(target)
      if isinstance(loss_and_aux, jax.Array):
        return loss_and_aux, _NoAux
      return loss_and_aux

    (loss, aux), grad = jax.value_and_grad(loss_wrapper, has_aux=True)(self.target)
    return (loss, grad) if aux is _NoAux else (loss, aux, grad)

  compute_gradients = compute_gradient

  def optimize(self, loss_fn, **hyper_param_overrides):
    """Deprecated: one gradient step on ``loss_fn``; ``(new_optimizer, loss[, aux])``."""
    _deprecation.warn_deprecated(_deprecation.OPTIMIZE)
    out = self.compute_gradient(loss_fn)
    new_optimizer = self.apply_gradient(out[-1], **hyper_param_overrides)
    return (new_optimizer,) + tuple(out[:-1])

  def replicate(self, devices=None, axis_name='batch') -> 'Optimizer':
    """Deprecated: copies onto ``devices`` and averages grads over ``axis_name`` in ``pmap``."""
    if devices is None:
      devices = jax.local_devices()
    optimizer_def = ReplicatedOptimizer(self.optimizer_def, devices, axis_name)
    replicated = jax_utils.replicate(self, devices=devices)
    return replicated.replace(optimizer_def=optimizer_def)

  def unreplicate(self) -> 'Optimizer':
    """The first device's copy of a :meth:`replicate` d optimizer, with the plain def."""
    if not isinstance(self.optimizer_def, ReplicatedOptimizer):
      raise ValueError('Cannot unreplicate an optimizer that is not replicated.')
    optimizer_def = self.optimizer_def.optimizer_def
    return jax_utils.unreplicate(self).replace(optimizer_def=optimizer_def)

  def state_dict(self):
    return self.optimizer_def.state_dict(self.target, self.state)

  def restore_state(self, state):
    target, opt_state = self.optimizer_def.restore_state(self.target, self.state, state)
    return self.replace(target=target, state=opt_state)


# Legacy registered Optimizer with its own handlers (overriding PyTreeNode's field-wise one),
# so the OptimizerDef decides the layout: {'target': ..., 'state': ...}.
serialization.register_serialization_state(
    Optimizer, Optimizer.state_dict, Optimizer.restore_state, override=True)


class ReplicatedOptimizer(OptimizerDef):
  """Deprecated data-parallel wrapper: averages grads over ``axis_name`` inside ``pmap``.

  Its state dict stores one copy (the first device's) and ``restore_state`` replicates it
  again, so checkpoints of replicated and plain optimizers are interchangeable.

  Args:
    optimizer_def: the wrapped :class:`OptimizerDef`.
    devices: the devices to restore onto (default ``jax.local_devices()``).
    axis_name: the ``pmap`` axis to average the gradients over.
  """

  def __init__(self, optimizer_def, devices=None, axis_name='batch'):
    super().__init__(optimizer_def.hyper_params)
    self.optimizer_def = optimizer_def
    self.devices = jax.local_devices() if devices is None else devices
    self.axis_name = axis_name

  def init_state(self, params):
    return self.optimizer_def.init_state(params)

  def apply_gradient(self, hyper_params, params, state, grads):
    size = jax.lax.psum(1, self.axis_name)
    grads = jax.tree_util.tree_map(lambda g: jax.lax.psum(g, self.axis_name) / size, grads)
    return self.optimizer_def.apply_gradient(hyper_params, params, state, grads)

  def update_hyper_params(self, **hyper_param_overrides):
    return self.optimizer_def.update_hyper_params(**hyper_param_overrides)

  def state_dict(self, target, state):
    state_dict = self.optimizer_def.state_dict(target, state)
    return jax.tree_util.tree_map(lambda x: x[0], state_dict)

  def restore_state(self, opt_target, opt_state, state_dict):
    state_dict = jax_utils.replicate(state_dict, devices=self.devices)
    return self.optimizer_def.restore_state(opt_target, opt_state, state_dict)


class MultiOptimizer(OptimizerDef):
  """Not written yet (issue 4)."""

  def __init__(self, *traversals_and_optimizers):
    raise NotImplementedError('MultiOptimizer is not implemented yet')
