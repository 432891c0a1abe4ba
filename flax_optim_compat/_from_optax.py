"""Any optax transformation behind the legacy ``OptimizerDef`` API: :func:`from_optax`.

The legacy state is ``OptimizerState(step, param_states=<the optax state>)``: ``step`` counts
``apply_gradient`` calls as for every legacy optimizer, and the optax state is kept whole (its
NamedTuple types, ``MaskedNode`` s and flattened vectors as ``tx.init`` made them), so it
checkpoints and restores like any other optimizer state and is exactly the state a plain optax
loop would hold.

Per-step overrides (``apply_gradient(grads, learning_rate=lr)``) go through
``optax.inject_hyperparams``: its state keeps every numeric hyper-parameter in
``state.hyperparams``, which its ``update`` reads and records in the new state. Before every
update the def writes its own values (``hyper_params``, as legacy defs hold theirs) with the
call's overrides on top, so an override holds for that call only, the state records what the
update used, and a traced value compiles once. A transform injected outside ``from_optax``
keeps its values in its state only: an override of one of those is put back after the update.
A hyper-parameter given as a schedule is not overridable: optax evaluates the schedule at every
update and ignores ``state.hyperparams`` for it.
"""
import inspect
from typing import Any, Callable, Dict, List, Mapping, Tuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from . import _state_check
from . import _tree
from .base import OptimizerDef
from .base import OptimizerState

__all__ = ['FromOptax', 'from_optax']

_INJECTED = optax.InjectStatefulHyperparamsState


def _is_injected(node) -> bool:
  return isinstance(node, _INJECTED)


def _injected_states(opt_state) -> List[Tuple[str, Any]]:
  """``(path, state)`` of every ``inject_hyperparams`` state inside ``opt_state``, outer first."""
  found = []
  for path, node in jax.tree_util.tree_flatten_with_path(opt_state, is_leaf=_is_injected)[0]:
    if _is_injected(node):
      found.append((_tree.format_path(path), node))
  return found


def _overridable(injected) -> List[str]:
  """The names ``state.hyperparams`` holds that are not schedules (optax recomputes those)."""
  return [name for name in injected.hyperparams if name not in injected.hyperparams_states]


def _is_numeric(value) -> bool:
  """What ``optax.inject_hyperparams`` keeps in ``state.hyperparams`` as a constant (its rule)."""
  return isinstance(value, (int, float, jax.Array, np.ndarray)) and not isinstance(value, bool)


def _factory_name(factory) -> str:
  return getattr(factory, '__name__', None) or type(factory).__name__


class FromOptax(OptimizerDef):
  """An optax transformation as a legacy ``OptimizerDef``; made by :func:`from_optax`.

  Args:
    tx: the transformation: anything with optax's ``init(params)`` and
      ``update(updates, state, params)`` (an ``optax.GradientTransformation``,
      ``optax.MultiSteps``, ...).
    hyper_params: ``{name: value}`` of the injected constants this def sets before every
      update (for ``from_optax(factory, ...)`` every numeric argument of the factory, given or
      defaulted; ``{}`` for a transform given as it is).
    factory: the optax factory ``tx`` was built from with ``optax.inject_hyperparams``, or
      ``None``.
    factory_kwargs: every keyword argument given for ``factory`` (schedules and flags too).

  Examples:
    >>> import jax.numpy as jnp
    >>> import optax
    >>> import flax_optim_compat as optim
    >>> opt_def = optim.from_optax(optax.sgd, learning_rate=0.5)
    >>> opt_def
    from_optax(sgd, learning_rate=0.5)
    >>> opt_def.hyper_params
    {'learning_rate': 0.5}
    >>> optim.from_optax(optax.adam, learning_rate=0.1).hyper_params
    {'learning_rate': 0.1, 'b1': 0.9, 'b2': 0.999, 'eps': 1e-08, 'eps_root': 0.0}
  """

  # One optax state for the whole target, not one state per parameter.
  param_states_mirror_target = False
  # optax transformations are pure functions of their inputs (optax's contract: they run under
  # jax.jit), so an un-traced apply_gradient runs this def's step compiled and cached.
  pure_jax_step = True

  def __init__(self, tx, hyper_params: Mapping[str, Any] | None = None, factory=None,
               factory_kwargs: Mapping[str, Any] | None = None):
    if not (callable(getattr(tx, 'init', None)) and callable(getattr(tx, 'update', None))):
      raise TypeError(f'from_optax needs an optax transformation (with init and update) or an '
                      f'optax factory such as optax.adamw, got {type(tx).__name__}.')
    super().__init__(dict(hyper_params or {}))
    self.tx = tx
    self.factory = factory
    self.factory_kwargs = dict(factory_kwargs or {})

  def __repr__(self):
    if self.factory is None:
      return f'from_optax(<{type(self.tx).__name__}>)'
    args = ''.join(f', {k}={v!r}' for k, v in self.factory_kwargs.items())
    return f'from_optax({_factory_name(self.factory)}{args})'

  # -- the legacy per-leaf protocol: none --------------------------------------------

  def init_param_state(self, param):
    raise NotImplementedError(
        f'{self!r} keeps one optax state for the whole target and has no per-parameter state; '
        'use init_state.')

  def apply_param_gradient(self, step, hyper_params, param, state, grad):
    raise NotImplementedError(
        f'{self!r} updates the whole target with its optax transformation and has no '
        'per-parameter update; use apply_gradient.')

  # -- whole-tree API ----------------------------------------------------------------

  def init_state(self, params) -> OptimizerState:
    return OptimizerState(jnp.asarray(0, dtype=jnp.int32), self.tx.init(params))

  def update_hyper_params(self, **hyper_param_overrides) -> Dict[str, Any]:
    """The ``{name: value}`` injected for one step: ``self.hyper_params`` with the overrides.

    ``hyper_params=`` (a mapping) replaces ``self.hyper_params`` (names it leaves out keep the
    def's values); other keywords set single hyper-parameters. Names are checked against the
    optax state in :meth:`apply_gradient` (a transform built by the user with
    ``optax.inject_hyperparams`` says which it has only there).
    """
    hp = hyper_param_overrides.pop('hyper_params', self.hyper_params)
    if not isinstance(hp, Mapping):
      raise TypeError(f'{self!r}: hyper_params must be a mapping {{name: value}} of injected '
                      f'hyper-parameters, got {_state_check.describe_value(hp)}.')
    return {**hp, **hyper_param_overrides}

  def _check_names(self, opt_state, hyper_params) -> None:
    if not hyper_params:
      return
    injected = _injected_states(opt_state)
    overridable = sorted({n for _, s in injected for n in _overridable(s)})
    scheduled = sorted({n for _, s in injected for n in s.hyperparams_states})
    for name in hyper_params:
      if name in overridable:
        continue
      if name in scheduled:
        raise TypeError(
            f'{self!r}: {name!r} is a schedule, which optax evaluates at every update, so it '
            f'cannot be overridden per step; overridable: {overridable}.')
      if not injected:
        raise TypeError(
            f'{self!r} has no injected hyper-parameters, so {name!r} cannot be overridden: '
            'build it with from_optax(factory, **hyper_params) (e.g. from_optax(optax.adamw, '
            'learning_rate=1e-3)) or wrap the factory with optax.inject_hyperparams.')
      raise TypeError(
          f'{self!r} got an unexpected hyper-parameter {name!r}; available: {overridable}.')

  def _with_hyper_params(self, opt_state, hyper_params):
    """``opt_state`` with ``hyper_params`` written into every injected state that has them."""
    if not hyper_params:
      return opt_state

    def set_values(node):
      if not _is_injected(node):
        return node
      values = dict(node.hyperparams)
      for name, value in hyper_params.items():
        if name in values and name not in node.hyperparams_states:
          old = values[name]
          if np.shape(value) != np.shape(old):
            raise ValueError(
                f'{self!r}: the override {name!r} has shape {np.shape(value)} but the '
                f'hyper-parameter has shape {np.shape(old)}.')
          values[name] = jnp.asarray(value, dtype=jnp.result_type(old))
      return node._replace(hyperparams=values)

    return jax.tree_util.tree_map(set_values, opt_state, is_leaf=_is_injected)

  def _restore_hyper_params(self, old_state, new_state, names):
    """``new_state`` with the constants ``names`` set back to their values in ``old_state``.

    For the names this def does not hold (a transform injected outside ``from_optax``): their
    value lives in the state only, so a one-call override must not stay there.
    """
    if not names:
      return new_state
    old_nodes = iter([s for _, s in _injected_states(old_state)])

    def put_back(node):
      if not _is_injected(node):
        return node
      old = next(old_nodes)
      values = dict(node.hyperparams)
      for name in names:
        if name in values and name not in node.hyperparams_states:
          values[name] = old.hyperparams[name]
      return node._replace(hyperparams=values)

    return jax.tree_util.tree_map(put_back, new_state, is_leaf=_is_injected)

  def apply_gradient(self, hyper_params, params, state, grads):
    """One optax update of ``params``; returns ``(new_params, new_state)``.

    Args:
      hyper_params: ``{name: value}`` to inject for this update, over ``self.hyper_params``
        (see :meth:`update_hyper_params`).
      params: the target. An ``optax.LookaheadParams`` target takes the gradients of its
        ``fast`` params (or a ``LookaheadParams`` of gradients, whose ``fast`` part is used).
      state: the ``OptimizerState`` holding the optax state.
      grads: the gradients, with the tree structure and leaf shapes of ``params``.

    Raises:
      ValueError: ``grads`` differs from ``params`` in structure or a leaf's shape.
      TypeError: an override names no overridable injected hyper-parameter.
    """
    if isinstance(params, optax.LookaheadParams):
      if isinstance(grads, optax.LookaheadParams):
        _tree.check_grads(params, grads)
        grads = grads.fast
      else:
        _tree.check_grads(params.fast, grads)
    else:
      _tree.check_grads(params, grads)
    hyper_params = {**self.hyper_params, **self.update_hyper_params(hyper_params=hyper_params)}
    self._check_names(state.param_states, hyper_params)
    opt_state = self._with_hyper_params(state.param_states, hyper_params)
    updates, new_opt_state = self.tx.update(grads, opt_state, params)
    new_opt_state = self._restore_hyper_params(
        state.param_states, new_opt_state, [n for n in hyper_params if n not in self.hyper_params])
    return optax.apply_updates(params, updates), OptimizerState(_tree.next_step(state.step), new_opt_state)

  def current_hyper_params(self, target, state) -> Dict[str, Any]:
    """``{name: value}`` of the injected hyper-parameters, as the optax state records them.

    These are the values the last update used, overrides included, and schedules as optax
    evaluated them; before any update, the initial values. (For a transform injected outside
    ``from_optax``, a one-call override is put back after its update, so the state shows the
    transform's own value.) Several
    ``inject_hyperparams`` inside one transform (a ``multi_transform`` of injected groups):
    a name they share is reported once per state, as ``'<path in the optax state>/<name>'``.
    ``{}`` for a transform without injected hyper-parameters.

    Examples:
      >>> import jax.numpy as jnp
      >>> import optax
      >>> import flax_optim_compat as optim
      >>> schedule = optax.linear_schedule(1.0, 0.0, transition_steps=4)
      >>> optimizer = optim.from_optax(optax.sgd, learning_rate=schedule).create(
      ...     {'w': jnp.zeros(1)})
      >>> for _ in range(2):
      ...   optimizer = optimizer.apply_gradient({'w': jnp.ones(1)})
      >>> optimizer.current_hyper_params()
      {'learning_rate': Array(0.75, dtype=float32)}
    """
    del target
    injected = _injected_states(state.param_states)
    counts: Dict[str, int] = {}
    for _, node in injected:
      for name in node.hyperparams:
        counts[name] = counts.get(name, 0) + 1
    out = {}
    for path, node in injected:
      for name, value in node.hyperparams.items():
        out[name if counts[name] == 1 else f'{path.rstrip("/")}/{name}'] = value
    return out

  # -- optax -------------------------------------------------------------------------

  def optax_transform(self, hyper_params=None):
    """The wrapped optax transformation.

    Args:
      hyper_params: ``{name: value}`` to build it with instead of ``self.hyper_params``; only
        for ``from_optax(factory, ...)`` (for a given transform, they live in its state:
        pass them to :meth:`optax_state`).

    Returns:
      The transformation (the same object for ``hyper_params=None``).
    """
    if hyper_params is None or hyper_params == self.hyper_params:
      return self.tx
    if self.factory is None:
      raise ValueError(
          f'{self!r} wraps a transformation built outside: its injected hyper-parameters are '
          'in its state; pass them to optax_state(params, state, hyper_params).')
    return optax.inject_hyperparams(self.factory)(**{**self.factory_kwargs, **hyper_params})

  def optax_state(self, params, state, hyper_params=None, tx=None):
    """The optax state of :meth:`optax_transform`: ``state.param_states`` itself.

    With ``hyper_params``, the injected constants are set to them (checked as overrides).
    A ``tx`` must keep a state of the same structure (the state is not translated).
    """
    if tx is not None:
      want = jax.tree_util.tree_structure(jax.eval_shape(tx.init, params))
      have = jax.tree_util.tree_structure(state.param_states)
      if want != have:
        raise ValueError('a from_optax optimizer\'s state is its own transformation\'s state, '
                         'kept as it is: tx must keep a state of the same structure (the '
                         f'state is {have}, tx.init gives {want}).')
    if hyper_params is None:
      return state.param_states
    hyper_params = self.update_hyper_params(hyper_params=hyper_params)
    self._check_names(state.param_states, hyper_params)
    return self._with_hyper_params(state.param_states, hyper_params)


def from_optax(tx_or_factory: Any, **hyper_params: Any) -> FromOptax:
  r"""An optax transformation as a legacy ``OptimizerDef`` (``create``, ``apply_gradient``, ...).

  Two forms:

  * ``from_optax(tx)``: any transformation (``optax.chain(...)``, ``optax.MultiSteps(...)``,
    one built with ``optax.inject_hyperparams``); the hyper-parameters that ``tx`` injects
    (if any) are overridable per step.
  * ``from_optax(factory, **hyper_params)``: ``optax.inject_hyperparams(factory)(**hyper_params)``,
    so every numeric hyper-parameter of ``factory`` (given or defaulted) is overridable per
    step, ``apply_gradient(grads, learning_rate=lr)``, also traced under ``jax.jit`` without a
    recompilation per value. A hyper-parameter may be a schedule (evaluated at optax's count,
    which is the legacy ``step`` before the update); schedules are not overridable. Callable
    arguments that are not schedules (a ``mask`` function) need
    ``optax.inject_hyperparams(factory, static_args=...)``: pass the transform it builds.

  The state is ``OptimizerState(step, param_states=<the optax state>)``; ``step`` counts
  ``apply_gradient`` calls (with ``optax.MultiSteps``, mini-steps; its own ``gradient_step``
  counts the real updates).

  Args:
    tx_or_factory: an optax transformation, or an optax factory (``optax.adamw``, ...).
    **hyper_params: the factory's keyword arguments (only with a factory).

  Returns:
    A :class:`FromOptax` optimizer def.

  Raises:
    TypeError: hyper-params with a transformation, or arguments the factory does not take.

  Examples:
    >>> import jax, jax.numpy as jnp
    >>> import optax
    >>> import flax_optim_compat as optim
    >>> optimizer = optim.from_optax(optax.adamw, learning_rate=0.1, weight_decay=0.0).create(
    ...     {'w': jnp.array([1.0, -1.0])})
    >>> step = jax.jit(lambda opt, g, lr: opt.apply_gradient(g, learning_rate=lr))
    >>> optimizer = step(optimizer, {'w': jnp.array([1.0, -1.0])}, 0.5)
    >>> optimizer.target['w'], int(optimizer.state.step)
    (Array([ 0.5, -0.5], dtype=float32), 1)
    >>> optimizer.state.param_states.hyperparams['learning_rate']  # what the step used
    Array(0.5, dtype=float32)

    A transformation as it is, e.g. a chain with clipping:

    >>> tx = optax.chain(optax.clip_by_global_norm(1.0), optax.sgd(1.0))
    >>> optimizer = optim.from_optax(tx).create({'w': jnp.zeros(2)})
    >>> optimizer.apply_gradient({'w': jnp.array([3.0, 4.0])}).target['w']
    Array([-0.6, -0.8], dtype=float32)

  Differences from optax:
    the updates are applied with ``optax.apply_updates`` (as a plain optax loop would); an
    ``optax.lookahead`` transform needs an ``optax.LookaheadParams`` target
    (``create(optax.LookaheadParams.init_synced(params))``) and takes the gradients of
    ``optimizer.target.fast``.
  """
  if callable(getattr(tx_or_factory, 'init', None)) and callable(
      getattr(tx_or_factory, 'update', None)):
    if hyper_params:
      raise TypeError(
          f'from_optax got hyper-parameters {sorted(hyper_params)} with a transformation; '
          'give them to the factory instead: from_optax(optax.adamw, learning_rate=1e-3), or '
          'build the transformation with them.')
    return FromOptax(tx_or_factory)
  if not callable(tx_or_factory):
    raise TypeError(f'from_optax needs an optax transformation or factory, got '
                    f'{type(tx_or_factory).__name__}.')
  factory: Callable[..., Any] = tx_or_factory
  try:
    bound = inspect.signature(factory).bind(**hyper_params)
  except TypeError as e:
    raise TypeError(f'from_optax({_factory_name(factory)}, ...): {e}.') from None
  tx = optax.inject_hyperparams(factory)(**hyper_params)
  bound.apply_defaults()  # optax injects the defaults too
  injected = {k: v for k, v in bound.arguments.items() if _is_numeric(v)}
  return FromOptax(tx, injected, factory=factory, factory_kwargs=hyper_params)
