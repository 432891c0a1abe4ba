"""The one bridge between the legacy state layout and optax: :class:`OptaxBackedDef`.

Users, checkpoints and old code see ``OptimizerState(step, param_states)`` where ``param_states``
mirrors the target and holds one legacy dataclass (e.g. ``_AdamParamState``) per leaf. The math
runs in an ``optax.GradientTransformation`` whose state is a chain of NamedTuples holding one tree
per field (e.g. ``ScaleByAdamState(count, mu, nu)``). A built-in optimizer derives from
:class:`OptaxBackedDef` and declares, as data, which legacy field is which optax field
(``{'grad_ema': 'mu', 'grad_sq_ema': 'nu'}``) plus one hook that builds its transform; the adapter
transposes between the two layouts, sets every optax ``count`` from the legacy ``step``, and runs
16-bit floats in float32.

The adapter is two modules: this one holds the class, its step and the float32 policy; its
private sub-module ``_adapter_state`` holds the state translation itself (the optax state walk,
per-leaf dataclasses <-> per-field trees, and the mapping into and out of the state of any optax
transformation by field meaning).

Everything here runs at trace time under ``jax.jit``: the compiled step contains only the optax
math (plus float32 up/down casts for 16-bit floats).
"""
import dataclasses
import inspect
from typing import Callable, ClassVar, List, Mapping, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from . import _adapter_state
from . import _from_optax
from . import _hyper
from . import _plain_optax
from . import _tree
from .base import OptimizerDef
from .base import OptimizerState

__all__ = ['OptaxBackedDef', 'PlainOptax']

PlainOptax = _plain_optax.PlainOptax

_LOW_PRECISION = (jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float16))


# ----------------------------------------------------------------------------- dtype policy

def _upcast(tree):
  """16-bit floats and integers -> float32, so the optax math runs in float32.

  16-bit floats are cast back afterwards (see :func:`_apply_gradient`); integer params and
  states stay float32, as legacy's ``p - lr * g`` promoted them.
  """
  def up(x):
    dtype = _tree.dtype_of(x)
    if dtype in _LOW_PRECISION or jnp.issubdtype(dtype, jnp.integer):
      return jnp.asarray(x).astype(jnp.float32)
    return x
  return jax.tree_util.tree_map(up, tree)


def _cast_like(new_tree, like_tree):
  """New state values in the dtypes of the old ones; integer leaves promote, as legacy's did."""
  return jax.tree_util.tree_map(
      lambda new, old: (_adapter_state.as_dtype(new, _tree.dtype_of(old))
                        if _tree.is_inexact(old) else new),
      new_tree, like_tree)


def _apply_updates(params, updates, keep_param_dtype=False):
  """``optax.apply_updates``, except that integer params promote to the update's dtype.

  Legacy computed ``p - lr * g``, so an integer parameter came back as a float; optax casts
  the sum back to the parameter's dtype, which would truncate it. With ``keep_param_dtype``
  every new param is cast back (legacy Adafactor's ``new_param.astype(param.dtype)``).
  """
  return jax.tree_util.tree_map(
      lambda p, u: (_adapter_state.as_dtype(p + u, _tree.dtype_of(p))
                    if keep_param_dtype or _tree.is_inexact(p) else p + u),
      params, updates)


# ----------------------------------------------------------------------------- the step

def _init_param_states(opt_def, params):
  """Legacy ``param_states`` for ``params``, from the optax transform's own ``init``."""
  # The class's own builder: a per-leaf subclass's `optax_transform` is the template's.
  opt_state = OptaxBackedDef.optax_transform(opt_def).init(params)
  field_trees = _adapter_state.read_optax_state(
      opt_state, set(_adapter_state.optax_fields(opt_def).values()))
  return _adapter_state.to_param_states(
      opt_def, jax.tree_util.tree_structure(params), field_trees)


def _apply_gradient(opt_def, hyper_params, params, state, grads):
  """``(new_params, new_param_states)``: one step of ``opt_def.optax_transform(hyper_params)``.

  Fills the optax state from the legacy ``state`` (every ``count`` = ``state.step``), runs
  ``tx.update`` and ``optax.apply_updates``, and reads the new legacy per-leaf states back.
  16-bit float params, grads and states are computed in float32 and cast back to their own
  dtypes, so e.g. Adam's bias correction ``1 - 0.999**t`` does not round to zero in bfloat16
  (legacy computed it in the param dtype and bfloat16 params never moved).

  ``params`` may contain ``optax.MaskedNode`` (no leaves) where ``state.param_states`` has one
  too, as for a ``MultiOptimizer`` group.
  """
  tx = OptaxBackedDef.optax_transform(opt_def, hyper_params)
  params32, grads32 = _upcast(params), _upcast(grads)
  opt_state, wanted, old_fields = _adapter_state.legacy_to_optax(
      opt_def, tx, params, state, _upcast)
  updates, new_opt_state = tx.update(grads32, opt_state, params32)
  new_fields = _adapter_state.read_optax_state(new_opt_state, wanted)
  new_fields = {name: _cast_like(tree, old_fields[name]) for name, tree in new_fields.items()}
  new_param_states = _adapter_state.to_param_states(
      opt_def, jax.tree_util.tree_structure(params), new_fields)
  # `p + u` promotes a 16-bit p to the float32 update, which is cast back to p's dtype.
  return _apply_updates(params, updates, opt_def.keep_param_dtype), new_param_states


# ----------------------------------------------------------------------------- the base class

# What a per-leaf (legacy protocol) subclass of a built-in takes back from the legacy template.
_TEMPLATE_METHODS = ('init_state', 'apply_gradient', 'optax_transform', 'optax_state')


class OptaxBackedDef(OptimizerDef):
  """An :class:`OptimizerDef` whose math is an optax transform and whose state is legacy.

  A built-in optimizer subclasses it, declares data (the class attributes below) and
  implements one hook, :meth:`build_transform`; whole-tree ``init_state``/``apply_gradient``,
  the legacy per-leaf calls and :meth:`optax_state` are done here, once for all of them.

  Attributes:
    param_state_cls: the legacy per-parameter ``flax.struct`` dataclass (its field names are
      the keys of every old checkpoint), or ``None`` for a ``()`` state (GradientDescent).
    optax_state_fields: ``{legacy field: optax state field}``, e.g. ``{'grad_ema': 'mu'}``;
      the optax field is looked up anywhere in the (chained) optax state.
    legacy_placeholders: ``{legacy field: zero-argument factory}`` for a slot that legacy
      filled with a dummy array when the transform keeps no such state (Adafactor's ``m``
      without momentum); other absent fields are ``None``.
    constructor_only_hyper_params: hyper-param names always read from the constructor's
      values: a per-call override of them is ignored, as legacy's per-leaf code read them
      from ``self.hyper_params`` (Adafactor's state-layout flags).
    keep_param_dtype: cast every new param back to its old dtype, integers included (legacy
      Adafactor did; the others computed ``p - lr * g``, which promotes an integer param).
    plain_optax_forms: the plain optax expressions of this optimizer, most specific first
      (``_plain_optax.PlainForm``: calls whose keywords name legacy hyper-params, the values
      they need, how exact they are); :meth:`plain_optax` renders the first that applies.
    step_scaled_fields: legacy fields holding learning-rate-scaled steps (LARS ``momentum``):
      a transformation may keep them negated (``optax.lars``), which the state mapping reads
      from one update of it.
    half_precision_note: what flax 0.5.3 did with a bfloat16 param that every continuation
      (this package's included) does not (:meth:`legacy_notes`); None when nothing differs.

  A user subclass of a built-in that implements ``apply_param_gradient`` itself (the legacy
  per-leaf protocol) gets the legacy template's ``init_state``/``apply_gradient`` back and no
  optax transform, so its own per-leaf code is what runs, as in legacy.
  """
  param_state_cls: ClassVar[Optional[type]] = None
  optax_state_fields: ClassVar[Mapping[str, str]] = {}
  legacy_placeholders: ClassVar[Mapping[str, Callable[[], jax.Array]]] = {}
  constructor_only_hyper_params: ClassVar[frozenset] = frozenset()
  keep_param_dtype: ClassVar[bool] = False
  plain_optax_forms: ClassVar[Tuple[_plain_optax.PlainForm, ...]] = ()
  step_scaled_fields: ClassVar[frozenset] = frozenset()
  half_precision_note: ClassVar[Optional[str]] = None
  # The built-ins' steps are optax math: pure jax (see ``OptimizerDef.pure_jax_step``).
  pure_jax_step = True

  def __init_subclass__(cls, **kwargs):
    super().__init_subclass__(**kwargs)
    if 'apply_param_gradient' in vars(cls):
      for name in _TEMPLATE_METHODS:
        if name not in vars(cls):
          setattr(cls, name, getattr(OptimizerDef, name))

  @classmethod
  def checkpoint_fields(cls):
    """The keys of this optimizer's per-parameter state in a checkpoint (``()`` for none)."""
    state_cls = cls.param_state_cls
    return tuple(f.name for f in dataclasses.fields(state_cls)) if state_cls else ()

  def build_transform(self, hyper_params) -> optax.GradientTransformation:
    """The hook: the optax transform of this optimizer's update for ``hyper_params``.

    The update includes ``-learning_rate``. Hyper-params given as schedules reach this hook
    already evaluated (see :meth:`optax_transform`).
    """
    raise NotImplementedError(f'{type(self).__name__} must implement build_transform.')

  def optax_transform(self, hyper_params=None) -> optax.GradientTransformation:
    """The optax ``GradientTransformation`` computing this optimizer's update.

    Any numeric hyper-param may be an optax schedule (``step -> value``): it is evaluated at
    the step the transform's state counts, which is the legacy ``step`` when the state comes
    from :meth:`optax_state` or from the legacy API.

    Args:
      hyper_params: the hyper-params to build it for; defaults to ``self.hyper_params``.

    Returns:
      An ``optax.GradientTransformation`` (the update includes ``-learning_rate``).

    Examples:
      >>> import jax.numpy as jnp
      >>> import optax
      >>> import flax_optim_compat as optim
      >>> opt_def = optim.Momentum(learning_rate=0.1, beta=0.0)
      >>> tx = opt_def.optax_transform(opt_def.hyper_params.replace(
      ...     learning_rate=optax.linear_schedule(1.0, 0.0, transition_steps=4)))
      >>> params, grads = {'w': jnp.array([1.0])}, {'w': jnp.array([1.0])}
      >>> state = tx.init(params)
      >>> for _ in range(2):
      ...   updates, state = tx.update(grads, state, params)
      ...   print(updates['w'])
      [-1.]
      [-0.75]
    """
    hyper_params = self.hyper_params if hyper_params is None else hyper_params
    return _hyper.with_schedules(self.build_transform, _hyper.checked(self, hyper_params))

  def plain_optax(self, arg_sources: Optional[Mapping[str, str]] = None) -> PlainOptax:
    """The plain optax expression (Python source) that continues this optimizer's numbers.

    Keywords only, every name prefixed ``optax.``, every legacy default written out (e.g.
    ``optax.lamb``'s ``weight_decay``); an ``optax.chain(...)`` where the exact plain form is a
    chain. Where no plain optax is exact (Adagrad; LARS with weight decay) it is the closest
    one, with ``exact='not exact'`` and the differing term in ``difference``.

    Args:
      arg_sources: ``{legacy hyper-param name: Python source text}`` used verbatim in the
        expression (e.g. ``{'learning_rate': 'config.lr'}``); names not given are rendered
        from this def's values. A choice that depends on a value given only as source text
        (not a literal) takes the form that is right for every value, or reports the
        conservative ``exact`` class.

    Returns:
      A :class:`PlainOptax` ``(expression, exact, difference)``.

    Raises:
      ValueError: ``arg_sources`` names no hyper-param of this def, or a value (a schedule)
        has no literal source text and is not in ``arg_sources``.

    Examples:
      >>> import flax_optim_compat as optim
      >>> optim.Momentum(learning_rate=0.1, beta=0.9).plain_optax()
      PlainOptax(expression='optax.sgd(learning_rate=0.1, momentum=0.9, nesterov=False)', exact='bit-exact', difference=None)
      >>> optim.Adam().plain_optax({'learning_rate': 'config.lr'}).expression
      'optax.adam(learning_rate=config.lr, b1=0.9, b2=0.999, eps=1e-08)'
    """
    if not self.plain_optax_forms:
      raise NotImplementedError(f'{type(self).__name__} declares no plain optax expression.')
    if _hyper.rate_set_per_step(self) and 'learning_rate' not in (arg_sources or {}):
      # optax reads learning_rate=None as "no scaling": the update would climb the gradient.
      scheduled = _plain_optax.render(self, self.plain_optax_forms,
                                      dict(arg_sources or {}, learning_rate='schedule'))
      _hyper.check_constant_rate(self, scheduled.expression)
    return _plain_optax.render(self, self.plain_optax_forms, arg_sources)

  def plain_optax_transform(self) -> optax.GradientTransformation:
    """The transformation :meth:`plain_optax` names, built from this def's values.

    Examples:
      >>> import flax_optim_compat as optim
      >>> tx = optim.RMSProp(learning_rate=0.1).plain_optax_transform()
      >>> type(tx).__name__
      'GradientTransformationExtraArgs'
    """
    if not self.plain_optax_forms:
      raise NotImplementedError(f'{type(self).__name__} declares no plain optax expression.')
    return _plain_optax.build(self, self.plain_optax_forms)

  def zero_params_note(self) -> Optional[str]:
    """What :meth:`plain_optax` does differently for an all-zero param (LAMB), or None."""
    if not self.plain_optax_forms:
      return None
    return _plain_optax.zero_params_note(self, self.plain_optax_forms)

  def legacy_notes(self, params) -> List[str]:
    """Lines naming params that flax 0.5.3 treated differently from every continuation.

    Only for an optimizer that declares ``half_precision_note`` (Adam, AdaBelief, LAMB): one
    line naming its 16-bit float params, or none.

    Examples:
      >>> import jax.numpy as jnp
      >>> import flax_optim_compat as optim
      >>> optim.Adam(0.1).legacy_notes({'w': jnp.ones(2, jnp.bfloat16), 'b': jnp.ones(2)})[0][:41]
      '/w is bfloat16: flax 0.5.3 never moved it'
    """
    if self.half_precision_note is None:
      return []
    low = [(path, np.dtype(_tree.dtype_of(leaf)).name)
           for path, leaf in zip(_tree.tree_paths(params), jax.tree_util.tree_leaves(params))
           if _tree.dtype_of(leaf) == jnp.bfloat16]
    if not low:
      return []
    paths = ', '.join(p for p, _ in low)
    return [f'{paths} {"is" if len(low) == 1 else "are"} bfloat16: {self.half_precision_note}']

  def plain_optax_notes(self, params) -> List[str]:
    """Lines naming the params whose continuation in :meth:`plain_optax` differs from legacy.

    Only for an optimizer whose plain form treats an all-zero parameter differently (LAMB's
    trust ratio): one line naming those params, or none.

    Examples:
      >>> import jax.numpy as jnp
      >>> import flax_optim_compat as optim
      >>> optim.LAMB(0.1).plain_optax_notes({'w': jnp.ones(2), 'b': jnp.zeros(2)})
      ['/b is all zeros: optax.lamb moves an all-zero param (trust ratio 1), legacy kept it at zero (ratio 0)']
    """
    if not self.plain_optax_forms:
      return []
    note = self.zero_params_note()
    if note is None:
      return []
    zero = [path for path, leaf in zip(_tree.tree_paths(params), jax.tree_util.tree_leaves(params))
            if np.size(leaf) and not np.any(np.asarray(leaf))]
    if not zero:
      return []
    return [f'{", ".join(zero)} {"is" if len(zero) == 1 else "are"} all zeros: {note}']

  def optax_state(self, params, state, hyper_params=None, tx=None) -> optax.OptState:
    """The state of :meth:`optax_transform` (or of ``tx``) holding the legacy ``state``.

    With ``tx = opt_def.optax_transform(hyper_params)``, ``tx.update(grads,
    opt_def.optax_state(params, state, hyper_params), params)`` continues exactly where the
    legacy optimizer stopped (every optax ``count`` is the legacy ``step``, so a schedule
    continues at that step): the one-call way to move a restored checkpoint to plain optax.

    With ``tx`` (any ``optax.GradientTransformation``, e.g. ``optax.adam(...)`` or
    ``optax.inject_hyperparams(optax.adam)(...)``), the result has the structure of
    ``tx.init(params)`` and the legacy per-parameter fields are put where they mean the same
    (``grad_ema`` -> ``mu``, ``momentum`` -> ``trace``, ...; the names are this optimizer's
    ``optax_state_fields``); every ``count`` is the legacy ``step`` and an
    ``inject_hyperparams`` state holds this def's hyper-params (by their optax names).

    Args:
      params: the params (the legacy target).
      state: the legacy :class:`OptimizerState`.
      hyper_params: the hyper-params of :meth:`optax_transform` (without ``tx``).
      tx: the transformation whose state to build; default :meth:`optax_transform`.

    Raises:
      ValueError: ``tx``'s state has a per-parameter field with no legacy counterpart, or
        lacks one the legacy state holds (a different algorithm), or other shapes; the
        message names the field.

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
    if tx is not None:
      return _adapter_state.to_any_optax_state(self, tx, params, state)
    tx = self.optax_transform(hyper_params)
    return _adapter_state.legacy_to_optax(self, tx, params, state)[0]

  def legacy_state(self, params, opt_state, step=None, tx=None) -> OptimizerState:
    """The legacy :class:`OptimizerState` held by ``opt_state``: the inverse of :meth:`optax_state`.

    Args:
      params: the params ``opt_state`` is a state for.
      opt_state: a state of :meth:`optax_transform` or of any transformation keeping the same
        per-parameter fields (``optax.adam``, ``optax.inject_hyperparams(optax.adam)``, ...).
      step: the legacy step; default the first ``count`` in ``opt_state``.
      tx: the transformation ``opt_state`` belongs to, where it may keep a field negated
        (``optax.lars``); default :meth:`optax_transform`.

    Returns:
      The legacy ``OptimizerState(step, param_states)``.

    Raises:
      ValueError: a field the legacy state needs is missing, or one it has no place for is
        present, or shapes differ, or no step is given and ``opt_state`` has no ``count``.

    Examples:
      >>> import jax.numpy as jnp
      >>> import optax
      >>> import flax_optim_compat as optim
      >>> params = {'w': jnp.array([1.0])}
      >>> tx = optax.sgd(learning_rate=0.1, momentum=0.9)
      >>> opt_state = tx.update({'w': jnp.array([2.0])}, tx.init(params), params)[1]
      >>> state = optim.Momentum(0.1).legacy_state(params, opt_state, step=1)
      >>> state.param_states['w'].momentum
      Array([2.], dtype=float32)
    """
    return _adapter_state.from_any_optax_state(self, tx, params, opt_state, step)

  def to_optax(self, target, state):
    """``(from_optax def, its state)``: this optimizer's transform, continuing from ``state``.

    The learning rate is injected (overridable per step, as legacy loops do); the other
    hyper-params stay Python numbers in the transform, so the continuation is bit-exact
    (injected as float32 arrays, ``1 - beta1`` would round differently from legacy's).
    """
    learning_rate = self.hyper_params.learning_rate
    numeric = ({'learning_rate': learning_rate}
               if isinstance(learning_rate, (float, np.floating)) else {})

    # optax.inject_hyperparams reads the factory's signature to know what to inject.
    signature = inspect.Signature([
        inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=value)
        for name, value in numeric.items()])

    def factory(*args, **kwargs):
      bound = signature.bind(*args, **kwargs)
      bound.apply_defaults()
      return self.optax_transform(self.hyper_params.replace(**bound.arguments))
    factory.__signature__ = signature
    factory.__name__ = f'{type(self).__name__}.optax_transform'

    optimizer_def = _from_optax.from_optax(factory, **numeric)
    return optimizer_def, OptimizerState(
        state.step, self.optax_state(target, state, tx=optimizer_def.tx))

  def init_state(self, params) -> OptimizerState:
    return OptimizerState(jnp.asarray(0, dtype=jnp.int32), _init_param_states(self, params))

  def apply_gradient(self, hyper_params, params, state, grads):
    """Applies ``grads`` to ``params``; returns ``(new_params, new_state)``.

    Raises:
      ValueError: ``grads`` differs from ``params`` in tree structure or in a leaf's shape.
    """
    _tree.check_grads(params, grads)
    new_params, new_param_states = _apply_gradient(self, hyper_params, params, state, grads)
    return new_params, OptimizerState(_tree.next_step(state.step), new_param_states)

  def init_param_state(self, param):
    """The legacy state of one parameter (legacy per-leaf protocol)."""
    return _init_param_states(self, param)

  def apply_param_gradient(self, step, hyper_params, param, state, grad):
    """One parameter's ``(new_param, new_state)`` (legacy per-leaf protocol)."""
    return _apply_gradient(self, hyper_params, param, OptimizerState(step, state), grad)
