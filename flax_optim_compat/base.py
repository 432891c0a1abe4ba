"""The legacy ``flax.optim.base`` API: OptimizerState, OptimizerDef, Optimizer, ReplicatedOptimizer.

The user-visible objects are exactly the legacy ones (same dataclass fields, same state dicts);
built-in optimizers run their math through optax (see ``_adapter``), user subclasses that
implement the legacy per-leaf protocol (``init_param_state`` / ``apply_param_gradient``) run
as they always did.
"""
import dataclasses
import inspect
from typing import Any, Optional

import jax
import jax.numpy as jnp
import optax
from flax import jax_utils
from flax import serialization
from flax import struct
from flax import traverse_util

from . import _adapter
from . import _tree
from . import _deprecation
from . import _multi
from . import _restore

__all__ = ['OptimizerState', 'OptimizerDef', 'Optimizer', 'ReplicatedOptimizer',
           'MultiOptimizer', 'ModelParamTraversal']

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

  def optax_state(self, params, state) -> optax.OptState:
    """The state of :meth:`optax_transform` equivalent to the legacy ``state`` for ``params``.

    With ``tx = opt_def.optax_transform()``, ``tx.update(grads, opt_def.optax_state(params,
    state), params)`` continues exactly where the legacy optimizer stopped: the one-call way
    to move a restored legacy checkpoint to plain optax.

    Examples:
      >>> import jax.numpy as jnp
      >>> import optax
      >>> import flax_optim_compat as optim
      >>> optimizer = optim.Adam(0.1).create({'w': jnp.array([1.0])})
      >>> optimizer = optimizer.apply_gradient({'w': jnp.array([4.0])})
      >>> tx = optimizer.optimizer_def.optax_transform()
      >>> opt_state = optimizer.optax_state()
      >>> updates, opt_state = tx.update({'w': jnp.array([2.0])}, opt_state, optimizer.target)
      >>> legacy = optimizer.apply_gradient({'w': jnp.array([2.0])})
      >>> bool(jnp.allclose(optax.apply_updates(optimizer.target, updates)['w'],
      ...                   legacy.target['w']))
      True
    """
    if self._is_per_leaf():
      raise NotImplementedError(
          f'{type(self).__name__} implements the legacy per-leaf protocol and has no optax '
          'state; port its apply_param_gradient to an optax transform first.')
    return _adapter.to_optax_state(self, params, state)

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
    _tree.check_grads(params, grads)
    if self._is_per_leaf():
      treedef = jax.tree_util.tree_structure(params)
      out = [self.apply_param_gradient(state.step, hyper_params, p, s, g)
             for p, s, g in zip(treedef.flatten_up_to(params),
                                _tree.per_leaf_states(self, treedef, state.param_states),
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


@dataclasses.dataclass
class _ShapeDtype:
  """Legacy internal name (``flax.optim.base._ShapeDtype``), kept importable for old code.

  Legacy MultiOptimizer wrapped each leaf in one to record which traversals matched it; ours
  labels leaves in ``_multi`` instead and does not use this class.
  """
  shape: Any
  dtype: Any
  _value: Any
  _indices: list

  @classmethod
  def create(cls, value):
    value = jnp.asarray(value)
    return cls(shape=value.shape, dtype=value.dtype, _value=value, _indices=[])


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
    replicated = _replicate(self, devices, axis_name)
    return replicated.replace(optimizer_def=optimizer_def)

  def unreplicate(self) -> 'Optimizer':
    """The first device's copy of a :meth:`replicate` d optimizer, with the plain def."""
    if not isinstance(self.optimizer_def, ReplicatedOptimizer):
      raise ValueError('Cannot unreplicate an optimizer that is not replicated.')
    optimizer_def = self.optimizer_def.optimizer_def
    return jax_utils.unreplicate(self).replace(optimizer_def=optimizer_def)

  def optax_state(self) -> optax.OptState:
    """This optimizer's state as the state of ``optimizer_def.optax_transform()``.

    See :meth:`OptimizerDef.optax_state`; ``(optimizer.target, optimizer.optax_state())`` are
    the params and state to carry on with plain optax.
    """
    return self.optimizer_def.optax_state(self.target, self.state)

  def state_dict(self):
    return self.optimizer_def.state_dict(self.target, self.state)

  def restore_state(self, state):
    target, opt_state = self.optimizer_def.restore_state(self.target, self.state, state)
    return self.replace(target=target, state=opt_state)


# Legacy registered Optimizer with its own handlers (overriding PyTreeNode's field-wise one),
# so the OptimizerDef decides the layout: {'target': ..., 'state': ...}.
serialization.register_serialization_state(
    Optimizer, Optimizer.state_dict, Optimizer.restore_state, override=True)


def _replicate(tree, devices, axis_name):
  """``flax.jax_utils.replicate`` onto ``devices``, naming the device axis like the pmap axis.

  Today's ``jax.pmap`` compiles its function again when an input's mesh axis name differs from
  its own ``axis_name`` (flax names it ``'_device_put_sharded'``), so naming it ``axis_name``
  saves one compilation of the train step, after ``replicate()`` and after a restore.
  """
  if 'axis_name' in inspect.signature(jax_utils.replicate).parameters:
    return jax_utils.replicate(tree, devices=devices, axis_name=axis_name)
  return jax_utils.replicate(tree, devices=devices)  # older flax: no mesh axis to name


class ReplicatedOptimizer(OptimizerDef):
  """Deprecated data-parallel wrapper: averages grads over ``axis_name`` inside ``pmap``.

  Its state dict stores one copy (the first device's) and ``restore_state`` replicates it
  again, so checkpoints of replicated and plain optimizers are interchangeable.

  Args:
    optimizer_def: the wrapped :class:`OptimizerDef`.
    devices: the devices to restore onto (default ``jax.local_devices()``).
    axis_name: the ``pmap`` axis to average the gradients over.

  Examples:
    >>> import jax, jax.numpy as jnp
    >>> import flax_optim_compat as optim
    >>> devices = jax.local_devices()[:2]
    >>> optimizer = optim.GradientDescent(0.1).create({'w': jnp.ones(2)}).replicate(devices)
    >>> type(optimizer.optimizer_def).__name__, optimizer.target['w'].shape
    ('ReplicatedOptimizer', (2, 2))
    >>> step = jax.pmap(lambda opt, g: opt.apply_gradient(g), axis_name='batch',
    ...                 devices=devices)
    >>> per_device_grads = {'w': jnp.arange(2 * len(devices) * 1.0).reshape(len(devices), 2)}
    >>> optimizer = step(optimizer, per_device_grads)  # grads averaged over the devices
    >>> optimizer.unreplicate().target['w'] - (1 - 0.1 * per_device_grads['w'].mean(0))
    Array([0., 0.], dtype=float32)
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
    _restore.check_single_copy(self, opt_target, opt_state, state_dict)  # before replicating
    state_dict = _replicate(state_dict, self.devices, self.axis_name)
    return self.optimizer_def.restore_state(opt_target, opt_state, state_dict)


class MultiOptimizer(OptimizerDef):
  """Applies a different optimizer to each subset of the params selected by a traversal.

  One shared step counter (every sub-optimizer sees the global step); params selected by no
  traversal are not updated and their state is ``None``; the state mirrors the target (a
  ``FrozenDict`` for a ``FrozenDict`` target) with each sub-optimizer's legacy per-parameter
  state at its leaves, so checkpoints have the legacy layout. ``hyper_params`` is the list of
  the sub-optimizers' hyper-params: ``apply_gradient(grads, hyper_params=[...])`` sets them
  per group for one step, a plain override (``learning_rate=0.1``) applies to every group.

  The update is one ``optax.multi_transform`` over labels derived from the traversals, with
  ``optax.set_to_zero()`` for unmatched params; :meth:`optax_transform` returns it for use
  with plain optax.

  Args:
    *traversals_and_optimizers: ``(traversal, optimizer_def)`` pairs. A traversal is a
      ``flax.traverse_util`` traversal (``ModelParamTraversal``, ``t_identity['a']``, ...);
      it may select leaves or whole sub-trees, and no leaf may be selected by two pairs. Any
      :class:`OptimizerDef` can be a sub-optimizer (WeightNorm and user subclasses too).

  Examples:
    >>> import warnings
    >>> import jax.numpy as jnp
    >>> import flax_optim_compat as optim
    >>> with warnings.catch_warnings():  # flax deprecates its traversals
    ...   warnings.simplefilter('ignore', DeprecationWarning)
    ...   kernels = optim.ModelParamTraversal(lambda path, _: 'kernel' in path)
    ...   biases = optim.ModelParamTraversal(lambda path, _: 'bias' in path)
    >>> opt_def = optim.MultiOptimizer((kernels, optim.GradientDescent(learning_rate=0.1)),
    ...                                (biases, optim.Momentum(learning_rate=0.5, beta=0.9)))
    >>> params = {'dense': {'kernel': jnp.ones(2), 'bias': jnp.ones(2)}, 'frozen': jnp.ones(2)}
    >>> optimizer = opt_def.create(params)
    >>> optimizer.state.param_states['frozen'] is None
    True
    >>> grads = {'dense': {'kernel': jnp.ones(2), 'bias': jnp.ones(2)}, 'frozen': jnp.ones(2)}
    >>> hps = optimizer.optimizer_def.hyper_params
    >>> optimizer = optimizer.apply_gradient(
    ...     grads, hyper_params=[hps[0], hps[1].replace(learning_rate=0.1)])
    >>> optimizer.target['dense']['kernel'], optimizer.target['dense']['bias']
    (Array([0.9, 0.9], dtype=float32), Array([0.9, 0.9], dtype=float32))
    >>> optimizer.target['frozen']
    Array([1., 1.], dtype=float32)

  Differences from flax.optim:
    a traversal's ``filter_fn`` sees a shape/dtype stand-in (``.shape``, ``.ndim``,
    ``.size``, ``.dtype``), once per target structure, instead of values, grads and states
    in turn; ``hyper_params=`` lists of the wrong length or type raise instead of silently
    dropping the trailing groups' state; overlapping traversals are reported by leaf path;
    sub-optimizers need not implement ``init_param_state`` (WeightNorm can be a group);
    empty targets and sub-tree selections work.
  """

  def __init__(self, *traversals_and_optimizers):
    if not traversals_and_optimizers:
      raise ValueError('MultiOptimizer needs at least one (traversal, optimizer_def) pair.')
    for i, pair in enumerate(traversals_and_optimizers):
      if not isinstance(pair, (tuple, list)) or len(pair) != 2:
        raise TypeError(f'MultiOptimizer argument {i} must be a (traversal, optimizer_def) '
                        f'pair, got {type(pair).__name__}.')
      traversal, opt_def = pair
      if not callable(getattr(traversal, 'iterate', None)):
        raise TypeError(f'MultiOptimizer argument {i}: {type(traversal).__name__} is not a '
                        'traversal (flax.traverse_util.Traversal, e.g. ModelParamTraversal).')
      if not isinstance(opt_def, OptimizerDef):
        raise TypeError(f'MultiOptimizer argument {i}: {type(opt_def).__name__} is not an '
                        'OptimizerDef.')
    traversals, sub_optimizers = zip(*traversals_and_optimizers)
    super().__init__([opt.hyper_params for opt in sub_optimizers])
    self.traversals = tuple(traversals)
    self.sub_optimizers = tuple(sub_optimizers)
    self._labels_cache = {}

  def _labels(self, params):
    """Per-leaf labels of ``params``; cached per tree structure, shapes and dtypes."""
    key = _multi.structure_key(params)
    labels = self._labels_cache.get(key)
    if labels is None:
      labels = _multi.param_labels(self.traversals, params)
      if len(self._labels_cache) >= 64:
        self._labels_cache.clear()
      self._labels_cache[key] = labels
    return labels

  def _label_tree(self, params):
    return jax.tree_util.tree_structure(params).unflatten(self._labels(params))

  def optax_transform(self, hyper_params=None) -> optax.GradientTransformation:
    """The optax transform of this MultiOptimizer: ``optax.multi_transform`` of the groups.

    Labels are derived from the traversals for the tree ``init`` (params) and ``update``
    (updates; so a dtype-dependent filter sees the gradients' dtypes there) receive;
    unmatched leaves get ``optax.set_to_zero()``; each group's optax state is its
    sub-optimizer's legacy ``OptimizerState`` over the masked params, and ``update`` needs
    ``params``.

    Args:
      hyper_params: the list of per-group hyper-params (default ``self.hyper_params``).

    Returns:
      An ``optax.GradientTransformation``.
    """
    hps = self.hyper_params if hyper_params is None else hyper_params
    hps = _multi.check_hyper_params(self.sub_optimizers, hps)
    return _multi.multi_transform(self.sub_optimizers, hps, self._label_tree)

  def optax_state(self, params, state):
    raise NotImplementedError(
        'MultiOptimizer has no single optax state to convert to; convert each group with '
        'sub_optimizers[i].optax_state(...) over its params, and combine the groups with '
        'optax.multi_transform (see migration_guide.md).')

  def init_param_state(self, param):
    raise NotImplementedError('MultiOptimizer has no per-parameter state; use init_state.')

  def apply_param_gradient(self, step, hyper_params, param, state, grad):
    raise NotImplementedError('MultiOptimizer has no per-parameter update; use apply_gradient.')

  def init_state(self, params) -> OptimizerState:
    labels = self._labels(params)
    treedef = jax.tree_util.tree_structure(params)
    tx = _multi.multi_transform(self.sub_optimizers, self.hyper_params, treedef.unflatten(labels))
    param_states = _multi.merge_states(treedef, labels, tx.init(params), self.sub_optimizers)
    return OptimizerState(jnp.asarray(0, dtype=jnp.int32), param_states)

  def apply_gradient(self, hyper_params, params, state, grads):
    """Applies ``grads``: each group through its sub-optimizer, unmatched params unchanged.

    Raises:
      ValueError: ``grads`` differs from ``params`` in structure or shapes; ``hyper_params``
        has the wrong length; traversals overlap.
      TypeError: ``hyper_params`` is not a list of the sub-optimizers' hyper-param objects.
    """
    hyper_params = _multi.check_hyper_params(self.sub_optimizers, hyper_params)
    _tree.check_grads(params, grads)
    labels = self._labels(params)
    treedef = jax.tree_util.tree_structure(params)
    leaf_states = _tree.per_leaf_states(self, treedef, state.param_states)

    def restore(label):  # the groups' optax states are their existing legacy states
      return lambda masked_params: OptimizerState(
          state.step, _multi.split_states(treedef, labels, leaf_states, label))

    group_labels = [_multi.group_label(i) for i in range(len(self.sub_optimizers))]
    exact = {label: {} for label in group_labels}
    tx = _multi.multi_transform(self.sub_optimizers, hyper_params, treedef.unflatten(labels),
                                {label: restore(label) for label in group_labels}, exact)
    updates, new_multi_state = tx.update(grads, tx.init(params), params)
    new_leaves = treedef.flatten_up_to(optax.apply_updates(params, updates))
    # Groups without a native optax update (WeightNorm, per-leaf user defs) computed their
    # new params themselves: take them as they are rather than params + (new - params).
    for label, out in exact.items():
      if 'params' in out:
        for j, new in _multi.group_leaves(treedef, labels, label, out['params'],
                                          'params').items():
          new_leaves[j] = new
    # Unmatched params are returned as they came (bit for bit, also -0.0 and NaN).
    new_params = treedef.unflatten([
        old if label == _multi.UNMATCHED else new
        for old, new, label in zip(treedef.flatten_up_to(params), new_leaves, labels)])
    new_param_states = _multi.merge_states(treedef, labels, new_multi_state, self.sub_optimizers)
    return new_params, OptimizerState(state.step + 1, new_param_states)

  def update_hyper_params(self, **hyper_param_overrides):
    """The list of per-group hyper-params for one step.

    ``hyper_params=`` replaces the whole list (checked: one object per pair, of that
    sub-optimizer's hyper-param class); every other keyword is applied to every group (an
    unknown name raises ``TypeError``, as legacy).
    """
    if 'hyper_params' in hyper_param_overrides:
      hps = hyper_param_overrides.pop('hyper_params')
    else:
      hps = self.hyper_params
    hps = _multi.check_hyper_params(self.sub_optimizers, hps)
    if not hyper_param_overrides:
      return hps
    out = []
    for i, (opt, hp) in enumerate(zip(self.sub_optimizers, hps)):
      try:
        if hp is opt.hyper_params:  # the sub-optimizer's own rules (WeightNorm: wn_decay, ...)
          out.append(opt.update_hyper_params(**hyper_param_overrides))
        elif isinstance(opt, MultiOptimizer):
          out.append(opt.update_hyper_params(hyper_params=hp, **hyper_param_overrides))
        else:
          out.append(hp.replace(**hyper_param_overrides))
      except TypeError as e:
        raise TypeError(f'{e} (override for sub-optimizer {i}, {type(opt).__name__}; a '
                        'keyword override applies to every sub-optimizer)') from e
    return out
