"""The legacy ``flax.optim.base``: OptimizerState, OptimizerDef, Optimizer, MultiOptimizer,
ModelParamTraversal (flax's own, re-bound) and ReplicatedOptimizer.

The user-visible objects are exactly the legacy ones (same dataclass fields, same state dicts).
This module is the legacy template: ``OptimizerDef`` maps a per-leaf protocol
(``init_param_state`` / ``apply_param_gradient``) over the target, as user subclasses written for
flax.optim expect; the built-ins override it with an optax transform in ``_adapter``;
``MultiOptimizer`` and ``ReplicatedOptimizer`` delegate to their parts.
"""
import dataclasses
import inspect
from typing import Any, List

import jax
import jax.numpy as jnp
import optax
from flax import jax_utils
from flax import serialization
from flax import struct
from flax import traverse_util

from . import _deprecation
from . import _compiled_step
from . import _groups
from . import _hyper
from . import _tree
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

  This is the legacy template: a subclass implements ``init_param_state`` and
  ``apply_param_gradient`` for one parameter, and ``init_state``/``apply_gradient`` map them
  over the target. The built-in optimizers derive from ``_adapter.OptaxBackedDef`` instead,
  which runs an optax transform over the whole tree at once with the same state layout;
  composites (``MultiOptimizer``, ``WeightNorm``, ``ReplicatedOptimizer``) override the
  whole-tree methods and call their parts' public methods.

  Args:
    hyper_params: a ``flax.struct`` dataclass of hyper-parameters.

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
    >>> opt.optimizer_def
    SignSGD(learning_rate=0.5)
  """

  # Whether ``state.param_states`` mirrors the target with one state per parameter (the legacy
  # layout); a def keeping one state for its whole target (``from_optax``) sets False, and a
  # ``MultiOptimizer`` with such a group keeps one state per group instead of per leaf.
  param_states_mirror_target: bool = True

  # Whether ``init_state``/``apply_gradient`` are pure jax functions of their inputs (no Python
  # branching on values, no side effects), so that an un-traced ``Optimizer.apply_gradient``
  # may run the step compiled and cached (``_compiled_step``). Inherited only inside this package: a
  # user's subclass may change a method in a way that is not pure, so it declares it itself.
  pure_jax_step: bool = False

  def __init_subclass__(cls, **kwargs):
    super().__init_subclass__(**kwargs)
    if 'pure_jax_step' not in vars(cls) and not cls.__module__.startswith(f'{__package__}.'):
      cls.pure_jax_step = False

  def __init__(self, hyper_params):
    self.hyper_params = hyper_params
    _deprecation.warn_deprecated(_deprecation.USE_OPTAX)

  def __repr__(self):
    return f'{type(self).__name__}({_hyper.fields_repr(self.hyper_params)})'

  # -- the legacy per-leaf protocol ----------------------------------------------------

  def apply_param_gradient(self, step, hyper_params, param, state, grad):
    """Applies ``grad`` to one parameter; returns ``(new_param, new_state)``."""
    raise NotImplementedError()

  def init_param_state(self, param):
    """The initial state of one parameter."""
    raise NotImplementedError()

  # -- whole-tree API --------------------------------------------------------------------

  def init_state(self, params) -> OptimizerState:
    param_states = jax.tree_util.tree_map(self.init_param_state, params)
    return OptimizerState(jnp.asarray(0, dtype=jnp.int32), param_states)

  def apply_gradient(self, hyper_params, params, state, grads):
    """Applies ``grads`` to ``params``; returns ``(new_params, new_state)``.

    Raises:
      ValueError: ``grads`` differs from ``params`` in tree structure or in a leaf's shape.
    """
    _tree.check_grads(params, grads)
    treedef = jax.tree_util.tree_structure(params)
    out = [self.apply_param_gradient(state.step, hyper_params, p, s, g)
           for p, s, g in zip(treedef.flatten_up_to(params),
                              _tree.per_leaf_states(self, treedef, state.param_states),
                              treedef.flatten_up_to(grads))]
    new_params = treedef.unflatten([p for p, _ in out])
    new_param_states = treedef.unflatten([s for _, s in out])
    return new_params, OptimizerState(_tree.next_step(state.step), new_param_states)

  def update_hyper_params(self, **hyper_param_overrides):
    """The hyper-params for one step: ``self.hyper_params`` with the overrides applied.

    ``hyper_params=`` replaces the base object; other keywords replace single fields (an
    unknown name raises ``TypeError``, as legacy).
    """
    hp = hyper_param_overrides.pop('hyper_params', self.hyper_params)
    if hyper_param_overrides:
      hp = hp.replace(**hyper_param_overrides)
    return hp

  def current_hyper_params(self, target, state) -> dict:
    """``{name: value}`` of the hyper-params a step uses (this def's own, for the template)."""
    del target, state
    return _hyper.as_dict(self.hyper_params)

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

  # -- optax (implemented by the optax-backed defs) --------------------------------------

  def optax_transform(self, hyper_params=None) -> optax.GradientTransformation:
    """The optax ``GradientTransformation`` computing this optimizer's update."""
    del hyper_params
    raise NotImplementedError(
        f'{type(self).__name__} implements the legacy per-leaf protocol and has no optax '
        'transform; port its apply_param_gradient to an optax transform first.')

  def to_optax(self, target, state):
    """``(def, state)`` of the same optimizer as a ``from_optax`` def (see ``Optimizer.to_optax``)."""
    del target, state
    raise NotImplementedError(
        f'{self!r} has no optax form to convert to (only optimizers with an optax transform '
        'do: the built-ins).')

  def legacy_state(self, params, opt_state, step=None, tx=None) -> OptimizerState:
    """The legacy state held by an optax state (the built-ins; see ``Adam.legacy_state``)."""
    del params, opt_state, step, tx
    raise NotImplementedError(
        f'{type(self).__name__} has no optax state to read a legacy state from (only the '
        'built-in optimizers and MultiOptimizers of them do).')

  def plain_optax(self, arg_sources=None):
    """The plain optax expression of this optimizer (the built-ins; see ``Adam.plain_optax``)."""
    del arg_sources
    raise NotImplementedError(
        f'{type(self).__name__} has no plain optax expression (only the built-in optimizers '
        'have one).')

  def plain_optax_notes(self, params) -> list:
    """Lines naming the params whose plain-optax continuation differs (the built-ins' LAMB)."""
    del params
    return []

  def zero_params_note(self):
    """What the plain optax continuation does differently for an all-zero param, or None."""

  def legacy_notes(self, params) -> list:
    """Lines naming params legacy treated unlike any continuation (see ``Adam.legacy_notes``)."""
    del params
    return []

  def optax_state(self, params, state, hyper_params=None, tx=None) -> optax.OptState:
    """The state of :meth:`optax_transform` holding the legacy ``state`` for ``params``."""
    del params, state, hyper_params, tx
    raise NotImplementedError(
        f'{type(self).__name__} implements the legacy per-leaf protocol and has no optax '
        'state; port its apply_param_gradient to an optax transform first.')


@dataclasses.dataclass
class _ShapeDtype:
  """Legacy internal name (``flax.optim.base._ShapeDtype``), kept importable for old code.

  Legacy MultiOptimizer wrapped each leaf in one to record which traversals matched it; ours
  labels leaves in ``_groups`` instead and does not use this class.
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
    # Un-traced (eager) calls of a pure-jax step run it compiled, cached per structure.
    new_target, new_state = _compiled_step.apply_gradient(
        self.optimizer_def, hyper_params, self.target, self.state, grads)
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

    See ``OptaxBackedDef.optax_state``; ``(optimizer.target, optimizer.optax_state())`` are
    the params and state to carry on with plain optax.
    """
    return self.optimizer_def.optax_state(self.target, self.state)

  def to_optax(self) -> 'Optimizer':
    """This optimizer in its optax form, continuing with the same numbers.

    A built-in becomes a ``from_optax`` optimizer over its own ``optax_transform()``, with
    its learning rate injected (``apply_gradient(grads, learning_rate=lr)`` keeps working)
    and its state moved with ``optax_state()``: switch one training loop at a time. The
    continuation is bit-exact.

    Examples:
      >>> import jax.numpy as jnp
      >>> import flax_optim_compat as optim
      >>> optimizer = optim.Adam(0.1).create({'w': jnp.array([1.0])})
      >>> optimizer = optimizer.apply_gradient({'w': jnp.array([4.0])})
      >>> converted = optimizer.to_optax()
      >>> type(converted.optimizer_def).__name__, int(converted.state.step)
      ('FromOptax', 1)
      >>> a = optimizer.apply_gradient({'w': jnp.array([2.0])}, learning_rate=0.05)
      >>> b = converted.apply_gradient({'w': jnp.array([2.0])}, learning_rate=0.05)
      >>> bool(jnp.allclose(a.target['w'], b.target['w'], rtol=1e-6))
      True
    """
    optimizer_def, state = self.optimizer_def.to_optax(self.target, self.state)
    return self.replace(optimizer_def=optimizer_def, state=state)

  def current_hyper_params(self) -> dict:
    """``{name: value}`` of the hyper-params the last step used (schedules evaluated).

    Built-in optimizers report their def's hyper-params; a ``from_optax`` optimizer reports
    what its optax state recorded.
    """
    return self.optimizer_def.current_hyper_params(self.target, self.state)

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


def _first_replica(x):
  """``x[0]`` read on local shard 0's device (as flax 0.5.3's jax did): on today's jax ``x[0]`` of
  a pmap output is a program over all devices, whose rendezvous can abort on a busy CPU host."""
  shards = getattr(x, 'addressable_shards', None) or ()
  first = [s for s in shards if len(shards) > 1 and s.index and s.index[0] == slice(0, 1)
           and all(i == slice(None) for i in s.index[1:])]
  return first[0].data[0] if first else x[0]


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

  def __repr__(self):
    return f'{type(self).__name__}({self.optimizer_def!r}, axis_name={self.axis_name!r})'

  def init_state(self, params):
    return self.optimizer_def.init_state(params)

  def current_hyper_params(self, target, state) -> dict:
    return self.optimizer_def.current_hyper_params(target, state)

  def apply_gradient(self, hyper_params, params, state, grads):
    size = jax.lax.psum(1, self.axis_name)
    grads = jax.tree_util.tree_map(lambda g: jax.lax.psum(g, self.axis_name) / size, grads)
    return self.optimizer_def.apply_gradient(hyper_params, params, state, grads)

  def update_hyper_params(self, **hyper_param_overrides):
    return self.optimizer_def.update_hyper_params(**hyper_param_overrides)

  def state_dict(self, target, state):
    state_dict = self.optimizer_def.state_dict(target, state)
    return jax.tree_util.tree_map(_first_replica, state_dict)

  def restore_state(self, opt_target, opt_state, state_dict):
    _restore.check_single_copy(self, opt_target, opt_state, state_dict)  # before replicating
    state_dict = _restore.local_copies(self, state_dict)  # cross-process arrays
    state_dict = _replicate(state_dict, self.devices, self.axis_name)
    return self.optimizer_def.restore_state(opt_target, opt_state, state_dict)


# ----------------------------------------------------------------------------- MultiOptimizer


class MultiOptimizer(OptimizerDef):
  """Applies a different optimizer to each subset of the params selected by a traversal.

  Each leaf belongs to the one traversal that selects it (a traversal may select whole
  sub-trees; a leaf selected twice raises) and is updated by that pair's def, which sees the
  shared global step; leaves no traversal selects keep their value and a ``None`` state. The
  state mirrors the target with each group's legacy per-parameter states at its leaves (the
  legacy checkpoint layout), or is one state per group when a group keeps one state for its
  whole target (``from_optax``). ``hyper_params`` is the list of the groups' hyper-params;
  docs/idioms.md ("focus and MultiOptimizer") has the optax equivalent, docs/differences.md
  the differences from flax.optim.

  Args:
    *traversals_and_optimizers: ``(traversal, optimizer_def)`` pairs: a ``flax.traverse_util``
      traversal (``ModelParamTraversal``, ``t_identity['a']``, ...) and any
      :class:`OptimizerDef`.

  Examples:
    >>> import warnings
    >>> import jax, jax.numpy as jnp
    >>> import flax_optim_compat as optim
    >>> with warnings.catch_warnings():  # flax deprecates its traversals
    ...   warnings.simplefilter('ignore', DeprecationWarning)
    ...   kernels = optim.ModelParamTraversal(lambda path, _: 'kernel' in path)
    ...   biases = optim.ModelParamTraversal(lambda path, _: 'bias' in path)
    >>> opt_def = optim.MultiOptimizer((kernels, optim.GradientDescent(learning_rate=0.1)),
    ...                                (biases, optim.Momentum(learning_rate=0.5, beta=0.9)))
    >>> params = {'dense': {'kernel': jnp.ones(2), 'bias': jnp.ones(2)}, 'frozen': jnp.ones(2)}
    >>> optimizer = opt_def.create(params)
    >>> hps = optimizer.optimizer_def.hyper_params  # per group, for one step:
    >>> optimizer = optimizer.apply_gradient(
    ...     jax.tree_util.tree_map(jnp.ones_like, params),
    ...     hyper_params=[hps[0], hps[1].replace(learning_rate=0.1)])
    >>> optimizer.target['dense']['kernel'], optimizer.target['dense']['bias']
    (Array([0.9, 0.9], dtype=float32), Array([0.9, 0.9], dtype=float32))
    >>> optimizer.target['frozen'], optimizer.state.param_states['frozen']
    (Array([1., 1.], dtype=float32), None)
  """

  def __init__(self, *traversals_and_optimizers):
    _groups.check_pairs(traversals_and_optimizers, OptimizerDef)
    traversals, sub_optimizers = zip(*traversals_and_optimizers)
    super().__init__([opt.hyper_params for opt in sub_optimizers])
    self.traversals, self.sub_optimizers = tuple(traversals), tuple(sub_optimizers)
    self.pure_jax_step = all(opt.pure_jax_step for opt in sub_optimizers)
    self.param_states_mirror_target = all(opt.param_states_mirror_target
                                          for opt in sub_optimizers)
    self._labels_cache = {}

  def __repr__(self):
    return f'{type(self).__name__}({", ".join(repr(opt) for opt in self.sub_optimizers)})'

  def _labels(self, params) -> List[str]:
    """:func:`_groups.param_labels`, cached per tree structure, leaf shapes and dtypes."""
    leaves, treedef = jax.tree_util.tree_flatten(params)
    key = treedef, tuple((s.shape, str(s.dtype)) for s in map(_groups.stand_in, leaves))
    if key not in self._labels_cache:
      if len(self._labels_cache) >= 64:
        self._labels_cache.clear()
      self._labels_cache[key] = _groups.param_labels(self.traversals, params)
    return self._labels_cache[key]

  def _active_groups(self, params):
    """``(treedef, labels, [(index, label, sub-optimizer) of every group with a leaf])``."""
    labels = self._labels(params)
    present = set(labels)
    return jax.tree_util.tree_structure(params), labels, [
        (i, str(i), opt) for i, opt in enumerate(self.sub_optimizers) if str(i) in present]

  def _checked(self, hyper_params) -> list:
    """``hyper_params`` as a list, checked against the pairs (:func:`_groups.check_hyper_params`)."""
    return _groups.check_hyper_params(hyper_params, self.sub_optimizers)

  def _split_states(self, treedef, labels, param_states) -> list:
    """Each group's ``param_states``, from this def's (see :meth:`_join_states`)."""
    if not self.param_states_mirror_target:
      return list(param_states)
    leaves = _tree.per_leaf_states(self, treedef, param_states)
    return [_groups.masked(treedef, labels, str(i), leaves)
            for i in range(len(self.sub_optimizers))]

  def _join_states(self, treedef, labels, group_states):
    """This def's ``param_states``: the target's mirror holding each leaf's group state
    (``None`` where unmatched), or the tuple of group states (a group keeps one state)."""
    if not self.param_states_mirror_target:
      return tuple(group_states)
    merged = [None] * len(labels)
    for i, (opt, group_state) in enumerate(zip(self.sub_optimizers, group_states)):
      if group_state is not None:
        for j, s in _groups.group_leaves(treedef, labels, str(i), group_state,
                                         f'({opt!r}) states'):
          merged[j] = s
    return treedef.unflatten(merged)

  def _label_tree(self, tree):
    return jax.tree_util.tree_structure(tree).unflatten(self._labels(tree))

  def _group_txs(self, hyper_params, txs) -> list:
    hps = self._checked(self.hyper_params if hyper_params is None else hyper_params)
    return _groups.group_transforms(self.sub_optimizers, txs, hps)

  def _group_params(self, params):
    treedef, labels, _ = self._active_groups(params)
    leaves = treedef.flatten_up_to(params)
    return treedef, labels, [_groups.masked(treedef, labels, str(i), leaves)
                             for i in range(len(self.sub_optimizers))]

  def optax_transform(self, hyper_params=None, *, group_txs=None) -> optax.GradientTransformation:
    """``optax.multi_transform`` of the groups' own optax transforms (or of ``group_txs``).

    Labels come from the traversals for the tree ``init``/``update`` receive: ``'0'``, ``'1'``,
    ... by group, ``'unmatched'`` for the rest, which gets ``optax.set_to_zero()`` (with
    ``optax.masked`` it would still move). Every group needs an optax transform (WeightNorm
    and legacy per-leaf defs have none).

    Args:
      hyper_params: the list of per-group hyper-params (default ``self.hyper_params``).
      group_txs: one optax transformation per group, in order, instead of the groups' own
        (e.g. each group's ``plain_optax()``).
    """
    return _groups.transform(self._group_txs(hyper_params, group_txs), self._label_tree)

  def plain_optax(self, arg_sources=None):
    """``optax.multi_transform({'0': ..., 'unmatched': optax.set_to_zero()}, param_labels)``.

    Each group's own ``plain_optax()``; ``param_labels`` stands for the labels the traversals
    decide (see :meth:`optax_transform`). ``exact`` is the least exact group's.
    """
    if arg_sources:
      raise ValueError('MultiOptimizer.plain_optax takes no arg_sources; ask each group.')
    groups = [opt.plain_optax() for opt in self.sub_optimizers]
    order = ('bit-exact', '1e-6', 'not exact')
    worst = max(groups, key=lambda p: order.index(p.exact))
    expression = _groups.multi_transform_source([p.expression for p in groups])
    return type(worst)(expression, worst.exact, worst.difference)

  def label_groups(self, params, tx) -> dict:
    """``{label: group}`` of a user's own ``optax.multi_transform`` ``tx``: the legacy group
    (``'0'``, ``'1'``, ..., ``'unmatched'``) each of its labels continues, read from which
    params each label's state covers (:func:`_groups.label_groups`; ValueError, one line,
    where that is ambiguous)."""
    names = [f'group {i} ({opt!r})' for i, opt in enumerate(self.sub_optimizers)]
    return _groups.label_groups(tx, params, self._labels(params), names)

  def optax_state(self, params, state, hyper_params=None, tx=None):
    """The state of :meth:`optax_transform` (``group_txs=tx``) holding the legacy ``state``.

    ``tx``: ``None`` (the groups' own transforms), one optax transformation per group, in
    order, or a user's own ``optax.multi_transform`` (its labels mapped to the groups by
    :meth:`label_groups`); each group's state is mapped by its sub-optimizer's
    ``optax_state``.
    """
    treedef, labels, group_params = self._group_params(params)
    group_states = [state.replace(param_states=s)
                    for s in self._split_states(treedef, labels, state.param_states)]
    if _groups.is_user_multi(tx):
      return _groups.user_optax_state(self.sub_optimizers, tx, self.label_groups(params, tx),
                                      params, labels, group_params, group_states)
    return _groups.optax_state(self.sub_optimizers, self._group_txs(hyper_params, tx),
                               self._label_tree, params, group_params, group_states)

  def legacy_state(self, params, opt_state, step=None, tx=None) -> OptimizerState:
    """The legacy ``OptimizerState`` held by a state of :meth:`optax_transform` (its inverse)."""
    step = _tree.first_count(opt_state) if step is None else step
    if step is None:
      raise ValueError('the MultiOptimizer optax state keeps no `count`; give the legacy step.')
    treedef, labels, group_params = self._group_params(params)
    names = None
    if _groups.is_user_multi(tx):
      names, txs = _groups.user_group_txs(tx, self.label_groups(params, tx), params, labels,
                                          len(self.sub_optimizers))
    else:
      txs = self._group_txs(None, tx)
    group_states = _groups.legacy_states(self.sub_optimizers, txs, group_params, opt_state,
                                         step, names)
    return OptimizerState(jnp.asarray(step, jnp.int32),
                          self._join_states(treedef, labels, group_states))

  def init_state(self, params) -> OptimizerState:
    treedef, labels, groups = self._active_groups(params)
    leaves = treedef.flatten_up_to(params)
    group_states = [None] * len(self.sub_optimizers)
    for i, label, opt in groups:
      group_states[i] = opt.init_state(
          _groups.masked(treedef, labels, label, leaves)).param_states
    return OptimizerState(jnp.asarray(0, dtype=jnp.int32),
                          self._join_states(treedef, labels, group_states))

  def apply_gradient(self, hyper_params, params, state, grads):
    """Applies ``grads``: each group through its sub-optimizer, unmatched params unchanged.

    Raises:
      ValueError: ``grads`` differs from ``params`` in structure or shapes; ``hyper_params``
        has the wrong length; traversals overlap.
      TypeError: ``hyper_params`` is not a list of the sub-optimizers' hyper-param objects.
    """
    hyper_params = self._checked(hyper_params)
    _tree.check_grads(params, grads)
    treedef, labels, groups = self._active_groups(params)
    param_leaves, grad_leaves = treedef.flatten_up_to(params), treedef.flatten_up_to(grads)
    group_states = self._split_states(treedef, labels, state.param_states)
    new_params = list(param_leaves)
    for i, label, opt in groups:
      try:
        group_params, group_state = opt.apply_gradient(
            hyper_params[i], _groups.masked(treedef, labels, label, param_leaves),
            OptimizerState(state.step, group_states[i]),
            _groups.masked(treedef, labels, label, grad_leaves))
      except _hyper.MissingLearningRateError as e:
        raise _hyper.MissingLearningRateError(
            f'{e} (sub-optimizer {i} of the MultiOptimizer, {opt!r})') from None
      for j, p in _groups.group_leaves(treedef, labels, label, group_params,
                                       f'({opt!r}) params'):
        new_params[j] = p
      group_states[i] = group_state.param_states
    return treedef.unflatten(new_params), OptimizerState(
        _tree.next_step(state.step), self._join_states(treedef, labels, group_states))

  def update_hyper_params(self, **hyper_param_overrides):
    """The list of per-group hyper-params for one step.

    ``hyper_params=`` replaces the whole list (checked); every other keyword is applied to
    every group by the group's own ``update_hyper_params`` (an unknown name raises
    ``TypeError``, as legacy).
    """
    hps = self._checked(hyper_param_overrides.pop('hyper_params', self.hyper_params))
    if not hyper_param_overrides:
      return hps
    out = []
    for i, (opt, hp) in enumerate(zip(self.sub_optimizers, hps)):
      try:
        out.append(opt.update_hyper_params(hyper_params=hp, **hyper_param_overrides))
      except TypeError as e:
        raise TypeError(f'{e} (override for sub-optimizer {i}, {type(opt).__name__}; a '
                        'keyword override applies to every sub-optimizer)') from e
    return out

  def current_hyper_params(self, target, state) -> list:
    """One ``{name: value}`` dict per group (see ``Optimizer.current_hyper_params``)."""
    treedef, labels, group_params = self._group_params(target)
    group_states = self._split_states(treedef, labels, state.param_states)
    return [opt.current_hyper_params(group_params[i], OptimizerState(state.step, group_states[i]))
            for i, opt in enumerate(self.sub_optimizers)]
