"""Part of the adapter: the legacy per-leaf state <-> optax state translation.

:class:`flax_optim_compat._adapter.OptaxBackedDef` keeps a legacy ``param_states`` tree (one
dataclass per parameter, e.g. ``_AdamParamState(grad_ema, grad_sq_ema)``) while its math runs in
an optax transformation whose state is a chain of NamedTuples holding one tree per field (e.g.
``ScaleByAdamState(count, mu, nu)``). This module translates between the two layouts by a def's
declared ``optax_state_fields``: it walks an optax state by field name, transposes per-leaf
dataclasses <-> per-field trees, fills the state of the def's own transform (every ``count``
is the legacy ``step``), and maps a legacy state into and out of the state of any other optax
transformation by field meaning (``inject_hyperparams`` values, fields kept negated, shapes
checked). The step that uses it, the float32 policy and the class live in ``_adapter.py``,
which this module does not import.

Everything here runs at trace time under ``jax.jit``.
"""
import dataclasses
import functools
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from . import _plain_optax
from . import _tree
from .base import OptimizerState

__all__ = ['StateMappingError', 'as_dtype', 'optax_fields', 'read_optax_state', 'to_param_states',
           'legacy_to_optax', 'to_any_optax_state', 'from_any_optax_state',
           'injected_differences']


# ----------------------------------------------------------------------------- cast helper

def as_dtype(x, dtype):
  """``jnp.asarray(x).astype(dtype)``, skipped for a strongly typed array already of ``dtype``.

  Most leaves already have their dtype: the skip saves a ``jnp`` call per leaf and field,
  whose first trace for each new shape costs a fresh process noticeable time.
  """
  if getattr(x, 'dtype', None) == dtype and getattr(x, 'weak_type', True) is False:
    return x
  return jnp.asarray(x).astype(dtype)


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


def optax_fields(opt_def) -> Dict[str, str]:
  """``{legacy field: optax state field}`` that ``opt_def`` declares."""
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
      fields = ', '.join(sorted(optax_fields(opt_def))) or 'none'
      raise StateMappingError(
          f'the optax state field {where} has no counterpart in the legacy '
          f'{type(opt_def).__name__} state (its per-parameter fields: {fields}): the '
          'transformation is a different algorithm.')
    return child

  return _map_state(template, on_field)


def _find_fields(opt_state, keep) -> List[Tuple[str, Any]]:
  """``(name, value)`` of every field of the state with ``keep(name, value)``, anywhere in it,
  in the walk's order (a kept field is not looked into)."""
  found = []

  def on_field(name, child, where):
    if keep(name, child):
      found.append((name, child))
    elif _is_namedtuple(child) or isinstance(child, (tuple, list, dict)):
      _map_state(child, on_field, where + '/')
    return child

  _map_state(opt_state, on_field)
  return found


def read_optax_state(opt_state, wanted) -> Dict[str, Any]:
  """``{optax field: value}`` of the fields named in ``wanted``, anywhere in the state."""
  return dict(_find_fields(opt_state, lambda name, _: name in wanted))


# ----------------------------------------------------------------------------- legacy <-> optax

def _absent_field_column(opt_def, legacy, num_leaves) -> List[Any]:
  """Values of a legacy field whose optax field is absent from the state.

  ``None`` (e.g. RMSProp ``mg`` when not centered), unless the optimizer declares
  ``legacy_placeholders = {legacy field: zero-argument factory}``, e.g. Adafactor's
  ``m = jnp.zeros((1,))`` when ``beta1 is None``: legacy kept a dummy array in unused slots.
  """
  factory = opt_def.legacy_placeholders.get(legacy)
  return [None if factory is None else factory() for _ in range(num_leaves)]


def to_param_states(opt_def, treedef, field_trees: Dict[str, Any]):
  """Transposes {optax field: tree} into a tree of legacy per-leaf dataclasses."""
  param_state_cls = opt_def.param_state_cls
  if param_state_cls is None:
    return treedef.unflatten([() for _ in range(treedef.num_leaves)])
  fields = optax_fields(opt_def)
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
  for legacy, name in optax_fields(opt_def).items():
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
  names = {optax_fields(opt_def)[legacy] for legacy in placeholder_fields} & set(field_trees)
  if not names:
    return field_trees
  specs = read_optax_state(template, names)
  expand = lambda value, spec: (value if np.shape(value) == spec.shape
                                else jnp.zeros(spec.shape, spec.dtype))
  return {name: (jax.tree_util.tree_map(expand, tree, specs[name]) if name in specs else tree)
          for name, tree in field_trees.items()}


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


def legacy_to_optax(opt_def, tx, params, state, cast=lambda tree: tree):
  """``(opt_state, wanted optax fields, legacy field trees)`` for ``tx`` from a legacy state.

  ``cast`` is applied to the params before ``tx.init``'s shapes are taken and to the state
  values put into the optax state (the float32 policy of ``_adapter._apply_gradient``).
  """
  template = _state_template(opt_def, tx, cast(params))
  wanted = set(read_optax_state(template, set(optax_fields(opt_def).values())))
  old_fields = _from_param_states(opt_def, params, state.param_states, wanted)
  old_fields = _expand_placeholders(opt_def, old_fields, template)
  opt_state = _fill_optax_state(template, state.step, cast(old_fields), opt_def)
  return opt_state, wanted, old_fields


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
  # A keyword a form ties to a hyper-param wins over a literal another form writes for it: a
  # literal holds only under that form's conditions (Adadelta's `optax.adadelta(...,
  # weight_decay=0.0)` when the def's weight_decay is 0), the hyper-param always.
  for literals in (False, True):
    for form in opt_def.plain_optax_forms:
      for call in form.calls:
        for keyword, spec in call.keywords:
          if keyword in out or isinstance(spec, _plain_optax.Attr):
            continue
          if isinstance(spec, _plain_optax.Hyper) == literals:
            continue
          value = getattr(opt_def.hyper_params, spec.name) if not literals else spec
          if value is None or callable(value) or isinstance(value, (bool, str)):
            continue
          out[keyword] = value
  return out


def _collect_hyperparams(opt_state) -> List[dict]:
  """The ``hyperparams`` dicts of the ``inject_hyperparams`` states, in the walk's order."""
  return [child for _, child in _find_fields(
      opt_state, lambda name, child: name == 'hyperparams' and isinstance(child, dict))]


def _injected_values(tx, params, template) -> List[dict]:
  """``tx.init``'s own injected hyper-param values (none for a transformation without them).

  Run under ``jax.jit`` returning only those values, so the per-parameter zeros are never
  allocated.
  """
  if not _collect_hyperparams(template):
    return []
  return jax.jit(lambda p: _collect_hyperparams(tx.init(p)))(params)


def injected_differences(tx, params, opt_state) -> List[str]:
  """``'name=file value (the tx says v)'`` for each injected hyper-param of a converted
  ``opt_state`` that differs from what ``tx.init`` injects (the state keeps the file's)."""
  kept = _collect_hyperparams(opt_state)
  try:
    given = _injected_values(tx, params, opt_state)
  except Exception:  # pylint: disable=broad-except  # then nothing to compare with
    return []
  out = []
  for mine, theirs in zip(kept, given):
    for name in mine:
      a, b = np.asarray(mine[name]), np.asarray(theirs.get(name, mine[name]))
      if a.shape == b.shape == () and float(a) != float(b):
        out.append(f'{name}={float(a):g} (the tx says {float(b):g})')
  return out


def _step_signs(opt_def, tx, params) -> Dict[str, float]:
  """``{optax field: -1.0}`` for each ``step_scaled_fields`` entry ``tx`` keeps negated.

  A legacy field holding learning-rate-scaled steps (LARS ``momentum``) is positive after one
  step on positive params and grads; ``optax.lars`` scales by ``-learning_rate`` before its
  ``trace``, so its ``trace`` holds the negated steps. One update of ``tx`` and of the legacy
  update on tiny params (on the user's tree structure if ``tx`` needs it) says which.
  """
  fields = {legacy: name for legacy, name in optax_fields(opt_def).items()
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
    found = read_optax_state(new_state, set(fields.values()))
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
      if not hasattr(w, 'shape'):  # e.g. optax.MaskedNode: the tx keeps no state there
        raise StateMappingError(
            f'{type(opt_def).__name__}: the {what} keeps no {name!r} for {path!r} (a mask?), '
            'where the legacy state has one: a different algorithm for that param.')
      if np.shape(g) != tuple(w.shape):
        raise StateMappingError(
            f'{type(opt_def).__name__}: {name!r} of {path!r} has shape {np.shape(g)} but the '
            f'{what} has {tuple(w.shape)} there (other hyper-params, e.g. '
            'min_dim_size_to_factor?).')


def _own_fields(opt_def, params) -> Dict[str, Any]:
  """``{optax field: spec tree}`` that ``opt_def``'s own transform keeps for ``params``."""
  template = jax.eval_shape(opt_def.optax_transform().init, params)
  return read_optax_state(template, set(optax_fields(opt_def).values()))


def _legacy_name(opt_def, name) -> str:
  return next(l for l, n in optax_fields(opt_def).items() if n == name)


def to_any_optax_state(opt_def, tx, params, state):
  """The state of any ``tx`` holding the legacy ``state``, mapped field by field by meaning."""
  template = jax.eval_shape(tx.init, params)
  names = set(optax_fields(opt_def).values())
  specs = read_optax_state(template, names)
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
  fields = {name: jax.tree_util.tree_map(lambda x, s: as_dtype(x, s.dtype), tree, specs[name])
            for name, tree in fields.items()}
  fields = _negate(fields, _step_signs(opt_def, tx, params))
  return _fill_optax_state(template, state.step, fields, opt_def, _hyperparam_values(opt_def),
                           _injected_values(tx, params, template))


def from_any_optax_state(opt_def, tx, params, opt_state, step):
  """The legacy ``OptimizerState`` held by ``opt_state``, a state of ``tx`` over ``params``."""
  names = set(optax_fields(opt_def).values())
  found = read_optax_state(opt_state, names)
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
  param_states = to_param_states(opt_def, jax.tree_util.tree_structure(params), found)
  return OptimizerState(jnp.asarray(step, jnp.int32), param_states)
