"""The one bridge between the legacy state layout and optax: :class:`OptaxBackedDef`.

Users, checkpoints and old code see ``OptimizerState(step, param_states)`` where ``param_states``
mirrors the target and holds one legacy dataclass (e.g. ``_AdamParamState``) per leaf. The math
runs in an ``optax.GradientTransformation`` whose state is a chain of NamedTuples holding one tree
per field (e.g. ``ScaleByAdamState(count, mu, nu)``). A built-in optimizer derives from
:class:`OptaxBackedDef` and declares, as data, which legacy field is which optax field
(``{'grad_ema': 'mu', 'grad_sq_ema': 'nu'}``) plus one hook that builds its transform; this module
transposes between the two layouts, sets every optax ``count`` from the legacy ``step``, and runs
16-bit floats in float32.

Everything here runs at trace time under ``jax.jit``: the compiled step contains only the optax
math (plus float32 up/down casts for 16-bit floats).
"""
import dataclasses
import functools
import inspect
from typing import Any, Callable, ClassVar, Dict, List, Mapping, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from . import _from_optax
from . import _hyper
from . import _plain
from . import _tree
from .base import OptimizerDef
from .base import OptimizerState

__all__ = ['OptaxBackedDef', 'PlainOptax']

PlainOptax = _plain.PlainOptax

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


def _as_dtype(x, dtype):
  """``jnp.asarray(x).astype(dtype)``, skipped for a strongly typed array already of ``dtype``.

  Most leaves already have their dtype: the skip saves a ``jnp`` call per leaf and field,
  whose first trace for each new shape costs a fresh process noticeable time.
  """
  if getattr(x, 'dtype', None) == dtype and getattr(x, 'weak_type', True) is False:
    return x
  return jnp.asarray(x).astype(dtype)


def _cast_like(new_tree, like_tree):
  """New state values in the dtypes of the old ones; integer leaves promote, as legacy's did."""
  return jax.tree_util.tree_map(
      lambda new, old: _as_dtype(new, _tree.dtype_of(old)) if _tree.is_inexact(old) else new,
      new_tree, like_tree)


def _apply_updates(params, updates, keep_param_dtype=False):
  """``optax.apply_updates``, except that integer params promote to the update's dtype.

  Legacy computed ``p - lr * g``, so an integer parameter came back as a float; optax casts
  the sum back to the parameter's dtype, which would truncate it. With ``keep_param_dtype``
  every new param is cast back (legacy Adafactor's ``new_param.astype(param.dtype)``).
  """
  return jax.tree_util.tree_map(
      lambda p, u: (_as_dtype(p + u, _tree.dtype_of(p))
                    if keep_param_dtype or _tree.is_inexact(p) else p + u),
      params, updates)


# ----------------------------------------------------------------------------- optax state walk


class StateMappingError(ValueError):
  """A legacy state and an optax state that do not correspond (the message names the field)."""


def _is_namedtuple(node) -> bool:
  return isinstance(node, tuple) and hasattr(node, '_fields')


def _map_state(node, on_field: Callable[[str, Any], Any], path=''):
  """Rebuilds an optax state, giving ``on_field(name, value)`` every NamedTuple field."""
  if _is_namedtuple(node):
    return type(node)(*[
        on_field(name, child, f'{path}{type(node).__name__}.{name}')
        for name, child in zip(node._fields, node)])
  if isinstance(node, (tuple, list)):
    return type(node)(_map_state(c, on_field, path) for c in node)
  if isinstance(node, dict):
    return {k: _map_state(v, on_field, f'{path}{k}/') for k, v in node.items()}
  return node


def _holds_namedtuple(node) -> bool:
  """Whether a container holds optax states (NamedTuples), not per-parameter values."""
  return any(_is_namedtuple(x) for x in jax.tree_util.tree_leaves(node, is_leaf=_is_namedtuple))


def _optax_fields(opt_def) -> Dict[str, str]:
  return dict(opt_def.optax_state_fields)


def _fill_optax_state(template, step, field_trees: Dict[str, Any], opt_def,
                      hyperparams: Optional[Mapping[str, Any]] = None, injected=()):
  """optax state with the structure of ``template`` holding the legacy values.

  Every NamedTuple field named in ``field_trees`` is replaced by that tree, every ``count`` is
  ``step``, and the ``hyperparams`` dict of an ``optax.inject_hyperparams`` state takes the
  values of ``hyperparams`` it names; its other names keep the values of the next dict of
  ``injected`` (the transformation's own ``init`` values, in the order the walk meets them).
  """
  seen: Dict[str, str] = {}
  injected = iter(injected)

  def on_field(name, child, where):
    if name in field_trees:
      if name in seen:
        raise StateMappingError(
            f'{type(opt_def).__name__}: optax field {name!r} occurs twice ({seen[name]} and '
            f'{where}); the legacy mapping is ambiguous.')
      seen[name] = where
      return field_trees[name]
    if name == 'count':
      return jnp.asarray(step, dtype=child.dtype)
    if name == 'hyperparams' and hyperparams is not None and isinstance(child, dict):
      own = next(injected, child)
      return {k: (jnp.asarray(hyperparams[k], dtype=_tree.dtype_of(v)) if k in hyperparams
                  else own.get(k, v)) for k, v in child.items()}
    if jax.tree_util.tree_leaves(child):
      if _is_namedtuple(child) or (isinstance(child, (tuple, list, dict))
                                   and _holds_namedtuple(child)):
        return _map_state(child, on_field, where + '/')
      fields = ', '.join(sorted(_optax_fields(opt_def))) or 'none'
      raise StateMappingError(
          f'the optax state field {where} has no counterpart in the legacy '
          f'{type(opt_def).__name__} state (its per-parameter fields: {fields}): the '
          'transformation is a different algorithm.')
    return child

  return _map_state(template, on_field)


def _read_optax_state(opt_state, wanted) -> Dict[str, Any]:
  found: Dict[str, Any] = {}

  def on_field(name, child, where):
    if name in wanted:
      found[name] = child
    elif _is_namedtuple(child) or isinstance(child, (tuple, list, dict)):
      _map_state(child, on_field, where + '/')
    return child

  _map_state(opt_state, on_field)
  return found


# ----------------------------------------------------------------------------- legacy <-> optax

def _absent_field_column(opt_def, legacy, num_leaves) -> List[Any]:
  """Values of a legacy field whose optax field is absent from the state.

  ``None`` (e.g. RMSProp ``mg`` when not centered), unless the optimizer declares
  ``legacy_placeholders = {legacy field: zero-argument factory}``, e.g. Adafactor's
  ``m = jnp.zeros((1,))`` when ``beta1 is None``: legacy kept a dummy array in unused slots.
  """
  factory = opt_def.legacy_placeholders.get(legacy)
  return [None if factory is None else factory() for _ in range(num_leaves)]


def _to_param_states(opt_def, treedef, field_trees: Dict[str, Any]):
  """Transposes {optax field: tree} into a tree of legacy per-leaf dataclasses."""
  param_state_cls = opt_def.param_state_cls
  if param_state_cls is None:
    return treedef.unflatten([() for _ in range(treedef.num_leaves)])
  fields = _optax_fields(opt_def)
  columns = {legacy: (treedef.flatten_up_to(field_trees[name]) if name in field_trees
                      else _absent_field_column(opt_def, legacy, treedef.num_leaves))
             for legacy, name in fields.items()}
  leaves = [param_state_cls(**{legacy: col[i] for legacy, col in columns.items()})
            for i in range(treedef.num_leaves)]
  return treedef.unflatten(leaves)



def _from_param_states(opt_def, params, param_states, wanted) -> Dict[str, Any]:
  """Transposes the legacy per-leaf dataclasses into {optax field: tree}."""
  treedef = jax.tree_util.tree_structure(params)
  per_leaf = _tree.per_leaf_states(opt_def, treedef, param_states)
  trees = {}
  for legacy, name in _optax_fields(opt_def).items():
    if name not in wanted:
      continue
    column = [getattr(s, legacy, None) for s in per_leaf]
    missing = next((i for i, value in enumerate(column) if value is None), None)
    if missing is not None:  # by identity: `list.index(None)` compares arrays with `==`
      path = _tree.tree_paths(params)[missing]
      raise StateMappingError(
          f'{type(opt_def).__name__}: the state of {path!r} has no {legacy!r} but the optax '
          f'state needs it as {name!r} (an override or a target transformation may not '
          'change the state layout, e.g. centered= or beta1=None -> value).')
    trees[name] = treedef.unflatten(column)
  return trees


def _expand_placeholders(opt_def, field_trees: Dict[str, Any], template) -> Dict[str, Any]:
  """Declared placeholders where the transform needs a real state -> zeros of ``tx.init``'s shape.

  A legacy state holds a ``legacy_placeholders`` value in a slot that the per-call
  hyper-params may use after all (Adafactor built with ``beta1=None``, then
  ``apply_gradient(..., beta1=0.9)``). Legacy broadcast the ``(1,)`` zeros against the
  parameter; we read the slot as zeros of the shape and dtype ``tx.init`` would give, which is
  the same value, except that for a 0-d parameter legacy's broadcast also turned the
  parameter itself into shape ``(1,)``.
  """
  placeholder_fields = opt_def.legacy_placeholders
  names = {_optax_fields(opt_def)[legacy] for legacy in placeholder_fields} & set(field_trees)
  if not names:
    return field_trees
  specs = _read_optax_state(template, names)
  expand = lambda value, spec: (value if np.shape(value) == spec.shape
                                else jnp.zeros(spec.shape, spec.dtype))
  return {name: (jax.tree_util.tree_map(expand, tree, specs[name]) if name in specs else tree)
          for name, tree in field_trees.items()}


def _init_param_states(opt_def, params):
  """Legacy ``param_states`` for ``params``, from the optax transform's own ``init``."""
  # The class's own builder: a per-leaf subclass's `optax_transform` is the template's.
  opt_state = OptaxBackedDef.optax_transform(opt_def).init(params)
  field_trees = _read_optax_state(opt_state, set(_optax_fields(opt_def).values()))
  return _to_param_states(opt_def, jax.tree_util.tree_structure(params), field_trees)


def _state_template(opt_def, tx, params):
  """The structure of ``tx.init(params)`` (``jax.ShapeDtypeStruct`` leaves), traced cheaply.

  Every per-parameter optax field is replaced as a whole by the legacy values
  (:func:`_fill_optax_state`), so only the nesting of the state, its non-per-parameter leaves
  (``count``) and the field names are used, and none of them depends on the number of
  parameters: ``tx.init`` is traced on the first parameter alone. Tracing it on the whole
  tree costs one ``zeros_like`` per leaf and state field (measured: 0.9 s of a 3.2 s trace
  for 1000 Adam leaves). The whole tree is used where a per-parameter shape is read
  (``legacy_placeholders``: Adafactor) or where the one-leaf trace fails.
  """
  leaves = jax.tree_util.tree_leaves(params)
  if leaves and all(isinstance(x, jax.core.Tracer) for x in leaves):
    # Inside a trace, `tx.init` binds a few ops on tracers, which the lowering drops as
    # unused: cheaper than `eval_shape`'s own trace (~1 ms each, one per MultiOptimizer group).
    init = lambda tree: jax.tree_util.tree_map(
        lambda x: jax.ShapeDtypeStruct(np.shape(x), _tree.dtype_of(x)), tx.init(tree))
  else:
    init = functools.partial(jax.eval_shape, tx.init)
  if len(leaves) > 1 and not opt_def.legacy_placeholders:
    try:
      return init([leaves[0]])
    except Exception:  # pylint: disable=broad-except
      pass  # a transform that needs the real tree: trace it on that
  return init(params)


def _legacy_to_optax(opt_def, tx, params, state, cast=lambda tree: tree):
  """``(opt_state, wanted optax fields, legacy field trees)`` for ``tx`` from a legacy state.

  ``cast`` is applied to the params before ``tx.init``'s shapes are taken and to the state
  values put into the optax state (the float32 policy of :func:`_apply_gradient`).
  """
  template = _state_template(opt_def, tx, cast(params))
  wanted = set(_read_optax_state(template, set(_optax_fields(opt_def).values())))
  old_fields = _from_param_states(opt_def, params, state.param_states, wanted)
  old_fields = _expand_placeholders(opt_def, old_fields, template)
  opt_state = _fill_optax_state(template, state.step, cast(old_fields), opt_def)
  return opt_state, wanted, old_fields


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
  opt_state, wanted, old_fields = _legacy_to_optax(opt_def, tx, params, state, _upcast)
  updates, new_opt_state = tx.update(grads32, opt_state, params32)
  new_fields = _read_optax_state(new_opt_state, wanted)
  new_fields = {name: _cast_like(tree, old_fields[name]) for name, tree in new_fields.items()}
  new_param_states = _to_param_states(opt_def, jax.tree_util.tree_structure(params), new_fields)
  # `p + u` promotes a 16-bit p to the float32 update, which is cast back to p's dtype.
  return _apply_updates(params, updates, opt_def.keep_param_dtype), new_param_states


# ----------------------------------------------------------------------------- any optax transformation

# Tiny params and grads to read which way round a transformation keeps a step-scaled field.
_PROBE_PARAMS = {'w': np.asarray([0.6, 0.8], np.float32)}
_PROBE_GRADS = {'w': np.asarray([0.3, 0.4], np.float32)}


def _hyperparam_values(opt_def) -> Dict[str, Any]:
  """``{optax keyword: value}`` of ``opt_def``'s numeric hyper-params, by its plain forms.

  An ``optax.inject_hyperparams`` state keeps its hyper-params by optax name (``b1``); the
  plain forms say which legacy hyper-param each optax keyword takes (``b1`` <- ``beta1``).
  """
  out: Dict[str, Any] = {}
  for form in opt_def.plain_optax_forms:
    for call in form.calls:
      for keyword, spec in call.keywords:
        if keyword in out or isinstance(spec, _plain.Attr):
          continue
        value = getattr(opt_def.hyper_params, spec.name) if isinstance(spec, _plain.Hyper) else spec
        if value is None or callable(value) or isinstance(value, (bool, str)):
          continue
        out[keyword] = value
  return out


def _collect_hyperparams(opt_state) -> List[dict]:
  """The ``hyperparams`` dicts of the ``inject_hyperparams`` states, in the walk's order."""
  found = []

  def on_field(name, child, where):
    if name == 'hyperparams' and isinstance(child, dict):
      found.append(child)
    elif _is_namedtuple(child) or isinstance(child, (tuple, list, dict)):
      _map_state(child, on_field, where + '/')
    return child

  _map_state(opt_state, on_field)
  return found


def _injected_values(tx, params, template) -> List[dict]:
  """``tx.init``'s own injected hyper-param values (none for a transformation without them).

  Run under ``jax.jit`` returning only those values, so the per-parameter zeros are never
  allocated.
  """
  if not _collect_hyperparams(template):
    return []
  return jax.jit(lambda p: _collect_hyperparams(tx.init(p)))(params)


def _step_signs(opt_def, tx, params) -> Dict[str, float]:
  """``{optax field: -1.0}`` for each ``step_scaled_fields`` entry ``tx`` keeps negated.

  A legacy field holding learning-rate-scaled steps (LARS ``momentum``) is positive after one
  step on positive params and grads; ``optax.lars`` scales by ``-learning_rate`` before its
  ``trace``, so its ``trace`` holds the negated steps. One update of ``tx`` and of the legacy
  update on tiny params (on the user's tree structure if ``tx`` needs it) says which.
  """
  fields = {legacy: name for legacy, name in _optax_fields(opt_def).items()
            if legacy in opt_def.step_scaled_fields}
  if not fields:
    return {}
  hyper_params = opt_def.hyper_params
  if ('learning_rate' in {f.name for f in dataclasses.fields(hyper_params)}
      and hyper_params.learning_rate is None):  # given per step: any rate shows the sign
    hyper_params = hyper_params.replace(learning_rate=1.0)
  attempts = [(_PROBE_PARAMS, _PROBE_GRADS)]
  if params is not None:
    attempts.append((jax.tree_util.tree_map(lambda x: jnp.full(np.shape(x), 0.5, jnp.float32),
                                            params),
                     jax.tree_util.tree_map(lambda x: jnp.full(np.shape(x), 0.25, jnp.float32),
                                            params)))
  error = None
  for probe_params, probe_grads in attempts:
    try:
      _, new_state = tx.update(probe_grads, tx.init(probe_params), probe_params)
      _, legacy = opt_def.apply_gradient(hyper_params, probe_params,
                                         opt_def.init_state(probe_params), probe_grads)
    except Exception as e:  # pylint: disable=broad-except
      error = e
      continue
    found = _read_optax_state(new_state, set(fields.values()))
    legacy_leaves = jax.tree_util.tree_leaves(
        legacy.param_states, is_leaf=lambda x: dataclasses.is_dataclass(x))
    signs = {}
    for legacy_name, name in fields.items():
      if name not in found:
        continue
      ours = sum(float(np.sum(getattr(s, legacy_name))) for s in legacy_leaves)
      theirs = sum(float(np.sum(x)) for x in jax.tree_util.tree_leaves(found[name]))
      if ours * theirs < 0:
        signs[name] = -1.0
    return signs
  raise StateMappingError(
      f'{type(opt_def).__name__}: could not run the transformation once to see which sign its '
      f'{sorted(fields.values())} keeps ({type(error).__name__}: {error}).')


def _negate(field_trees, signs):
  return {name: (jax.tree_util.tree_map(jnp.negative, tree) if signs.get(name, 1.0) < 0 else tree)
          for name, tree in field_trees.items()}


def _check_shapes(opt_def, params, field_trees, specs, what):
  """Each field tree mirrors ``params`` with the shapes of ``specs`` (``tx.init``'s)."""
  paths = _tree.tree_paths(params)
  treedef = jax.tree_util.tree_structure(params)
  for name, tree in field_trees.items():
    if name not in specs:
      continue
    try:
      got, want = treedef.flatten_up_to(tree), treedef.flatten_up_to(specs[name])
    except (ValueError, TypeError):
      raise StateMappingError(f'{type(opt_def).__name__}: the {what} field {name!r} does not '
                              'mirror the params.') from None
    for path, g, w in zip(paths, got, want):
      if np.shape(g) != tuple(w.shape):
        raise StateMappingError(
            f'{type(opt_def).__name__}: {name!r} of {path!r} has shape {np.shape(g)} but the '
            f'{what} has {tuple(w.shape)} there (other hyper-params, e.g. '
            'min_dim_size_to_factor?).')


def _own_fields(opt_def, params) -> Dict[str, Any]:
  """``{optax field: spec tree}`` that ``opt_def``'s own transform keeps for ``params``."""
  template = jax.eval_shape(opt_def.optax_transform().init, params)
  return _read_optax_state(template, set(_optax_fields(opt_def).values()))


def _legacy_name(opt_def, name) -> str:
  return next(l for l, n in _optax_fields(opt_def).items() if n == name)


def _to_any_optax_state(opt_def, tx, params, state):
  """The state of any ``tx`` holding the legacy ``state``, mapped field by field by meaning."""
  template = jax.eval_shape(tx.init, params)
  names = set(_optax_fields(opt_def).values())
  specs = _read_optax_state(template, names)
  own = _own_fields(opt_def, params)
  dropped = sorted(set(own) - set(specs))
  if dropped:
    raise StateMappingError(
        f'the legacy {type(opt_def).__name__} field {_legacy_name(opt_def, dropped[0])!r} has '
        f'no counterpart ({dropped[0]!r}) in the state of the target transformation: it is a '
        'different algorithm.')
  fields = _from_param_states(opt_def, params, state.param_states, set(specs))
  fields = _expand_placeholders(opt_def, fields, template)
  _check_shapes(opt_def, params, fields, specs, 'target transformation')
  fields = {name: jax.tree_util.tree_map(lambda x, s: _as_dtype(x, s.dtype), tree, specs[name])
            for name, tree in fields.items()}
  fields = _negate(fields, _step_signs(opt_def, tx, params))
  return _fill_optax_state(template, state.step, fields, opt_def, _hyperparam_values(opt_def),
                           _injected_values(tx, params, template))


def _from_any_optax_state(opt_def, tx, params, opt_state, step):
  """The legacy ``OptimizerState`` held by ``opt_state``, a state of ``tx`` over ``params``."""
  names = set(_optax_fields(opt_def).values())
  found = _read_optax_state(opt_state, names)
  own = _own_fields(opt_def, params)
  for name in sorted(set(own) ^ set(found)):
    where = 'has no' if name in own else 'holds a'
    raise StateMappingError(
        f'the optax state {where} {name!r}, which the legacy {type(opt_def).__name__} '
        f'{"needs" if name in own else "has no place for"} (legacy field '
        f'{_legacy_name(opt_def, name)!r}): the transformation is a different algorithm or has '
        'other hyper-parameters.')
  _check_shapes(opt_def, params, found, own, 'legacy state')
  if tx is not None:
    found = _negate(found, _step_signs(opt_def, tx, params))
  if step is None:
    step = _tree.first_count(opt_state)
    if step is None:
      raise StateMappingError(f'the optax state of {type(opt_def).__name__} has no `count`; '
                              'pass step= (the legacy step, e.g. the TrainState step).')
  param_states = _to_param_states(opt_def, jax.tree_util.tree_structure(params), found)
  return OptimizerState(jnp.asarray(step, jnp.int32), param_states)


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
      (``_plain.PlainForm``: calls whose keywords name legacy hyper-params, the values they
      need, how exact they are); :meth:`plain_optax` renders the first that applies.
    step_scaled_fields: legacy fields holding learning-rate-scaled steps (LARS ``momentum``):
      a transformation may keep them negated (``optax.lars``), which the state mapping reads
      from one update of it.

  A user subclass of a built-in that implements ``apply_param_gradient`` itself (the legacy
  per-leaf protocol) gets the legacy template's ``init_state``/``apply_gradient`` back and no
  optax transform, so its own per-leaf code is what runs, as in legacy.
  """
  param_state_cls: ClassVar[Optional[type]] = None
  optax_state_fields: ClassVar[Mapping[str, str]] = {}
  legacy_placeholders: ClassVar[Mapping[str, Callable[[], jax.Array]]] = {}
  constructor_only_hyper_params: ClassVar[frozenset] = frozenset()
  keep_param_dtype: ClassVar[bool] = False
  plain_optax_forms: ClassVar[Tuple[_plain.PlainForm, ...]] = ()
  step_scaled_fields: ClassVar[frozenset] = frozenset()
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
    return _plain.render(self, self.plain_optax_forms, arg_sources)

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
    return _plain.build(self, self.plain_optax_forms)

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
    note = _plain.zero_params_note(self, self.plain_optax_forms)
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
      return _to_any_optax_state(self, tx, params, state)
    tx = self.optax_transform(hyper_params)
    return _legacy_to_optax(self, tx, params, state)[0]

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
    return _from_any_optax_state(self, tx, params, opt_state, step)

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
    return new_params, OptimizerState(state.step + 1, new_param_states)

  def init_param_state(self, param):
    """The legacy state of one parameter (legacy per-leaf protocol)."""
    return _init_param_states(self, param)

  def apply_param_gradient(self, step, hyper_params, param, state, grad):
    """One parameter's ``(new_param, new_state)`` (legacy per-leaf protocol)."""
    return _apply_gradient(self, hyper_params, param, OptimizerState(step, state), grad)
