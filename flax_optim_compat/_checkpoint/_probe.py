"""A conversion checks itself before it writes: legacy and target, side by side, update by update.

The legacy side is the optimizer as ``--optimizer`` states it (its def's own ``apply_gradient``:
the legacy math); the target side is the transformation the conversion writes a state for,
``tx.update`` from the state the conversion's own mapping (``optax_state(tx=)``) builds.

Where it runs (the *probe tree*): the file's own values at the file's own step. Every params
leaf keeps its path, dtype and rank, each dimension above :data:`MAX_DIM` cut down (the two
largest to :data:`MAX_DIM`, the others to :data:`MAX_OTHER_DIM`; a dimension at or above 128
stays at or above 128, so Adafactor factors what it factored) to the leaf's leading corner (an
all-zero leaf stays all zeros: LAMB's and LARS's zero-norm rules show); every state leaf is the
same corner of the file's state leaf, and the step is the file's, so bias corrections, step
offsets and schedules run where the user continues from. The cost does not grow with the file:
at most ~0.6 M elements a leaf, a few compiled steps.

What it compares: the updates, not the params. Both sides start each update from the same
params (legacy's), and per leaf the largest ``|legacy update - target update|`` (new minus old
params of each side) is measured relative to the largest legacy update of the leaf: a decay,
an eps or a trust ratio that changes the update by 1e-4 of itself measures 1e-4. The class is
measured on float64 copies of the probe tree (no float32 rounding of ``params + update`` hides
a term below a param's last bit); bit-exactness on float32 copies (the file's bits where the file
is float32). A file holding 16-bit floats also runs on its own values: what half precision
adds is a separate note, never a wider class. A non-finite value on either side is never
equal: the probe says it cannot check.

Three passes through the same compiled updates: the file's values with gradients of
element-wise magnitudes 1e-8 to 1 (tiny second moments where eps placement shows); the same
with gradients of global norm above 1e3 (every clipping or threshold shows); the params scaled
by 1e-6 (floors on the params' scale, Adafactor's ``epsilon2``, and trust ratios show).
"""
import ast
import math
from typing import Any, Callable, List, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from .. import _expression_syntax
from .. import _tree

try:
  _enable_x64 = jax.enable_x64
except AttributeError:  # jax 0.5 (the floors) has it in jax.experimental only, today's jax not
  from jax.experimental import enable_x64 as _enable_x64

__all__ = ['ProbeResult', 'run', 'UPDATES', 'TOLERANCE', 'describe_known', 'describe_half',
           'cause', 'differences', 'learning_rate_of']

UPDATES = 4
MAX_DIM = 160
MAX_OTHER_DIM = 4
TOLERANCE = 1e-6     # the "1e-6" class: each update within 1e-6 of legacy's
LARGE_NORM = 2e3     # the global norm of the large gradients' pass
_HALF = ('float16', 'bfloat16')


class ProbeResult(NamedTuple):
  """What the probe measured.

  Attributes:
    updates: how many updates each side ran (in each of the three passes).
    bit_exact: every param equal, bit for bit, after every update (float32 copies).
    max_rel: the largest difference of the two sides' updates, relative to the leaf's largest
      legacy update (leaves of ``known`` excepted): the class.
    first: ``(leaf path, update, relative difference)`` of the first leaf beyond the
      class, or None when every leaf is within it.
    known: ``(path, note, relative difference)`` of differing leaves the def explains.
    stand_ins: leaves cut down to fit the probe (their paths).
    unchecked: why the probe cannot check (a non-finite value on one side), or None.
    half_rel: the largest difference on the file's own 16-bit values (None: the file has none).
    half_dtypes: the file's 16-bit float dtypes.
    accepted: the caller accepted a difference beyond the class.
    first_pass: the pass of ``first`` (``''``: the file's values; ``' (gradients of global norm
      2000)'``, ``' (params scaled by 1e-6)'``).
  """
  updates: int
  bit_exact: bool
  max_rel: float
  first: Optional[Tuple[str, int, float]]
  known: Tuple[Tuple[str, str, float], ...]
  stand_ins: Tuple[str, ...]
  unchecked: Optional[str] = None
  half_rel: Optional[float] = None
  half_dtypes: Tuple[str, ...] = ()
  accepted: bool = False
  first_pass: str = ''

  @property
  def within(self) -> bool:
    return self.first is None and self.unchecked is None

  def summary(self) -> str:
    """One line, only what was measured: ``'bit-exact over 4 updates'`` / ``'within 1e-6 of
    each update over 4 updates (the 1e-6 class; largest 3e-07 of an update on float64
    copies)'`` / ``'differs by 0.01 of an update (params leaf /w): accepted'`` / the
    difference beyond the class."""
    if self.unchecked is not None:
      return f'cannot check: {self.unchecked}'
    copies = (f' (on float32 copies of the {" and ".join(self.half_dtypes)} values)'
              if self.half_dtypes else '')
    if self.bit_exact:
      return f'bit-exact over {self.updates} updates{copies}'
    if self.first is None:
      return (f'within 1e-6 of each update over {self.updates} updates (the 1e-6 class; '
              f'largest {self.max_rel:.2g} of an update on float64 copies){copies}')
    path, update, rel = self.first
    if self.accepted:
      return (f'differs by {_rel_text(rel)} of an update (params leaf {path}{self.first_pass}): '
              'accepted')
    return (f'params leaf {path} differs by {_rel_text(rel)} of the legacy update in update '
            f'{update + 1} of {self.updates}{self.first_pass}, beyond the 1e-6 class')


def _rel_text(rel: float) -> str:
  return 'NaN/inf' if math.isinf(rel) else f'{rel:.2g}'


# ----------------------------------------------------------------------------- the probe tree


def _stand_in_shape(shape) -> Tuple[int, ...]:
  if all(d <= MAX_DIM for d in shape):
    return tuple(shape)
  order = sorted(range(len(shape)), key=lambda i: shape[i])   # stable, as Adafactor's sort
  largest = set(order[-2:])
  return tuple(min(d, MAX_DIM) if i in largest else min(d, MAX_OTHER_DIM)
               for i, d in enumerate(shape))


def _corner(leaf, shape):
  leaf = np.asarray(leaf)   # sliced on the host: no compiled slice per leaf shape
  return np.array(leaf[tuple(slice(0, d) for d in shape)]) if shape else np.array(leaf)


def _stand_in(leaf, rng):
  """``(value, cut)``: the leaf's leading corner (a numpy copy); whether it was cut down."""
  shape = np.shape(leaf)
  small = _stand_in_shape(shape)
  corner = _corner(leaf, small)
  if small != tuple(shape) and corner.size and not corner.any() and np.asarray(leaf).any():
    # A non-zero leaf whose corner is zeros: zero-norm rules must not show where the file has none.
    scale = float(np.max(np.abs(np.asarray(leaf, np.float32))))
    corner = (rng.standard_normal(small) * scale).astype(corner.dtype)
  return corner, small != tuple(shape)


def _state_corner(opt_def, probe_params, state):
  """The file's legacy state cut as the params were (each leaf the corner of the shape the def
  gives the probe params), at the file's step; the def's initial state at the file's step
  where the file's state does not line up with it leaf by leaf."""
  template = opt_def.init_state(jax.tree_util.tree_map(jnp.asarray, probe_params))
  wanted, treedef = jax.tree_util.tree_flatten(template)
  have, file_def = jax.tree_util.tree_flatten(state)
  if treedef == file_def and all(
      np.ndim(w) == np.ndim(h) and all(a <= b for a, b in zip(np.shape(w), np.shape(h)))
      for w, h in zip(wanted, have)):
    return treedef.unflatten([_corner(h, np.shape(w)) for w, h in zip(wanted, have)])
  return template.replace(step=np.asarray(state.step, np.int32))


def _gradients(params, rng, count, low, high):
  """``count`` gradient trees (float64 numpy): normal values times a per-element magnitude in
  [10**low, 10**high], fixed over the updates."""
  leaves, treedef = jax.tree_util.tree_flatten(params)
  scales = [10.0 ** rng.uniform(low, high, np.shape(p)) for p in leaves]
  return [treedef.unflatten([rng.standard_normal(np.shape(p)) * s
                             for p, s in zip(leaves, scales)]) for _ in range(count)]


def _large(grads):
  """``grads`` scaled so that every tree's global norm is at least :data:`LARGE_NORM`."""
  out = []
  for tree in grads:
    norm = math.sqrt(sum(float(np.sum(np.square(g))) for g in jax.tree_util.tree_leaves(tree)))
    factor = LARGE_NORM / norm if norm else 1.0
    out.append(jax.tree_util.tree_map(lambda g, f=max(factor, 1.0): g * f, tree))
  return out


def _cast(tree, dtype):
  """``tree`` with every inexact leaf as ``dtype`` (None: as it is), as jax arrays.

  An injected hyper-parameter (a scalar under ``hyperparams``) goes to float64 as the shortest
  decimal of its float32 value (``0.999``, the number written): legacy computes with that same
  Python number there, and ``1 - b2 ** t`` magnifies a last float32 bit a thousandfold.
  """
  def one(key_path, x):
    if dtype is None or not _tree.is_inexact(x):
      return jnp.asarray(x)
    if (np.dtype(dtype) == np.float64 and np.ndim(x) == 0 and np.asarray(x).dtype == np.float32
        and any(getattr(k, 'key', None) == 'hyperparams' or getattr(k, 'name', None) ==
                'hyperparams' for k in key_path)):
      return jnp.asarray(float(str(np.float32(x))), np.float64)
    return jnp.asarray(np.asarray(x, np.float64).astype(dtype))
  return jax.tree_util.tree_map_with_path(one, tree)


def _like(grads, params):
  """Gradient leaves in the dtype of their params (float32 for a non-float param)."""
  return jax.tree_util.tree_map(
      lambda g, p: jnp.asarray(g.astype(p.dtype if _tree.is_inexact(p) else np.float32)),
      grads, params)


# ----------------------------------------------------------------------------- comparison


def _update_rel(old, a, b) -> float:
  """``max |a - b| / max |a - old|``: how far the target's update (to ``b``) is from legacy's
  (to ``a``), relative to the legacy update (to the target's where legacy did not move the
  leaf: 1, the whole update)."""
  old, a, b = (np.asarray(x, np.float64) for x in (old, a, b))
  if a.shape != b.shape:
    return math.inf
  diff = float(np.max(np.abs(a - b), initial=0.0))
  if diff == 0.0:
    return 0.0
  scale = float(np.max(np.abs(a - old), initial=0.0)) or float(
      np.max(np.abs(b - old), initial=0.0))
  return diff / scale if scale else math.inf


def _same_bits(a, b) -> bool:
  a, b = np.atleast_1d(np.asarray(a)), np.atleast_1d(np.asarray(b))
  return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(
      np.ascontiguousarray(a).view(np.uint8), np.ascontiguousarray(b).view(np.uint8))


def _finite(x) -> bool:
  return not _tree.is_inexact(x) or bool(np.all(np.isfinite(np.asarray(x, np.float64))))


# ----------------------------------------------------------------------------- the run


def run(opt_def, params, state, full_tx, state_tx, *, hyper_params=None,
        rate_of: Optional[Callable[[Any, Any], Any]] = None,
        with_rate: Optional[Callable[[Any], Any]] = None,
        known_zero_note: Optional[str] = None, seed: int = 0) -> ProbeResult:
  """Runs the legacy optimizer and ``full_tx`` side by side on the probe tree of the file.

  Args:
    opt_def: the legacy def, as ``--optimizer`` states it.
    params: the file's params (the legacy target).
    state: the file's legacy optimizer state (its step and per-param states).
    full_tx: the transformation of the converted TrainState.
    state_tx: the ``tx`` argument the conversion gives ``opt_def.optax_state``.
    hyper_params: the legacy side's hyper-params (default the def's own).
    rate_of: for a run that set its rate per step: ``rate_of(step, target state after the
      update)`` is the rate (a tree of rates for groups) the legacy side runs that update at,
      and ``with_rate(rate)`` the hyper-params holding it.
    known_zero_note: the def's line for an all-zero param that the target moves and legacy did
      not (LAMB into ``optax.lamb``): such leaves are reported in ``known``, not refused.
    seed: the synthetic gradients' seed.
  """
  rng = np.random.default_rng(seed)
  leaves, treedef = jax.tree_util.tree_flatten(params)
  paths = _tree.tree_paths(params)
  cut = [_stand_in(leaf, rng) for leaf in leaves]
  probe_params = treedef.unflatten([v for v, _ in cut])
  stand_ins = tuple(p for p, (_, was_cut) in zip(paths, cut) if was_cut)
  zero = [not np.asarray(v).any() and np.size(v) > 0 for v, _ in cut]
  probe_state = _state_corner(opt_def, probe_params, state)
  step0 = int(np.asarray(state.step))
  half = sorted({str(np.dtype(x.dtype)) for x in jax.tree_util.tree_leaves(
      (probe_params, probe_state)) if _tree.is_inexact(x) and str(np.dtype(x.dtype)) in _HALF})
  small = _gradients(probe_params, rng, UPDATES, -8, 0)
  passes = (('', probe_params, small),
            (f' (gradients of global norm {LARGE_NORM:g})', probe_params,
             _large(_gradients(probe_params, rng, UPDATES, -2, 0))),
            (' (params scaled by 1e-6)',
             jax.tree_util.tree_map(lambda x: x * 1e-6 if _tree.is_inexact(x) else x,
                                    probe_params), small))
  hyper_params = opt_def.hyper_params if hyper_params is None else hyper_params
  # The optax state comes from the legacy state by the conversion's own mapping, in the file's
  # dtypes; each run casts both.
  opt_state = opt_def.optax_state(_cast(probe_params, None), _cast(probe_state, None),
                                  tx=state_tx)

  # Each side's one update is compiled once per dtype and run over every pass (compiling is
  # most of the probe's cost).
  legacy_step = jax.jit(lambda p, s, g, r: opt_def.apply_gradient(
      hyper_params if r is None else with_rate(r), p, s, g))

  def target_step(p, o, g):
    updates, o = full_tx.update(g, o, p)
    return optax.apply_updates(p, updates), o
  target_step = jax.jit(target_step)

  def each_update(dtype):
    """``(pass label, update, old, legacy's new, target's new)`` leaves, update by update:
    both sides start every update from legacy's params."""
    for label, start, grads in passes:
      p, s, o = _cast(start, dtype), _cast(probe_state, dtype), _cast(opt_state, dtype)
      for k, g in enumerate(grads):
        g = _like(g, p)
        target_p, o = target_step(p, o, g)
        rate = None if rate_of is None else rate_of(step0 + k, o)
        legacy_p, s = legacy_step(p, s, g, rate)
        yield label, k, (jax.tree_util.tree_leaves(p), jax.tree_util.tree_leaves(legacy_p),
                         jax.tree_util.tree_leaves(target_p))
        p = legacy_p

  def non_finite(label, k, new_leaves, side):
    for j, x in enumerate(new_leaves):
      if not _finite(x):
        return (f'{side} gives NaN or inf at {paths[j]} at update {k + 1}{label} (from the '
                f'file\'s values at step {step0})')
    return None

  bit_exact, unchecked = True, None
  with _enable_x64(False):
    for label, k, (old, new_l, new_t) in each_update(np.float32):
      unchecked = unchecked or non_finite(label, k, new_l, 'legacy') or non_finite(
          label, k, new_t, 'the target')
      bit_exact = bit_exact and all(_same_bits(a, b) for a, b in zip(new_l, new_t))
  max_rel, first, first_pass, known = 0.0, None, '', {}
  # The class, on float64 copies: a term below a float32 param's last bit still shows. (Where
  # every float32 update is bit-exact there is nothing to measure: a term of 1e-6 of an update
  # changes some of the leaf's bits.)
  with _enable_x64(True):
    for label, k, (old, new_l, new_t) in ([] if bit_exact else each_update(np.float64)):
      unchecked = unchecked or non_finite(label, k, new_l, 'legacy') or non_finite(
          label, k, new_t, 'the target')
      for j, (o, a, b) in enumerate(zip(old, new_l, new_t)):
        if not _tree.is_inexact(a):
          continue
        rel = _update_rel(o, a, b)
        if known_zero_note is not None and zero[j]:
          if rel:
            known[paths[j]] = max(known.get(paths[j], 0.0), rel)
          continue
        max_rel = max(max_rel, rel)
        if first is None and rel > TOLERANCE:
          first, first_pass = (paths[j], k, rel), label
  half_rel = None
  if half and unchecked is None:
    # What the file's own 16-bit values add: a note, not the class.
    half_rel = 0.0
    with _enable_x64(False):
      for label, k, (old, new_l, new_t) in each_update(None):
        for j, (o, a, b) in enumerate(zip(old, new_l, new_t)):
          if _tree.is_inexact(a) and not (known_zero_note is not None and zero[j]):
            finite = _finite(a) and _finite(b)
            half_rel = max(half_rel, _update_rel(o, a, b) if finite else math.inf)
  if bit_exact and first is None:
    max_rel = 0.0
  return ProbeResult(UPDATES, bit_exact and unchecked is None and first is None, max_rel,
                     first, tuple((p, known_zero_note, r) for p, r in known.items()), stand_ins,
                     unchecked, half_rel, tuple(half), first_pass=first_pass)


def describe_known(result: ProbeResult) -> List[str]:
  """One note per known difference the probe measured."""
  if not result.known:
    return []
  paths = ', '.join(p for p, _, _ in result.known)
  worst = max(r for _, _, r in result.known)
  note = result.known[0][1]
  return [f'{paths} {"is" if len(result.known) == 1 else "are"} all zeros: {note} (the probe '
          f'measured a relative difference of {_rel_text(worst)})']


def describe_half(result: ProbeResult) -> List[str]:
  """The note on what the file's own 16-bit values add to the class (none where nothing)."""
  if not result.half_rel:
    return []
  amount = ('NaN or inf' if math.isinf(result.half_rel)
            else f'up to {result.half_rel:.2g} of an update')
  return [f'half precision: on the file\'s own {" and ".join(result.half_dtypes)} values the '
          f'two sides\' updates differ by {amount} (16-bit rounding; the class above was '
          'measured on float32 or wider copies)']


# ----------------------------------------------------------------------------- the --tx text


def _dtype_text(value):
  """``'bfloat16'`` for ``jnp.bfloat16``, ``'jnp.bfloat16'`` or ``'bfloat16'``; else the value."""
  if isinstance(value, str):
    for prefix in ('jax.numpy.', 'jnp.', 'numpy.', 'np.'):
      if value.startswith(prefix):
        value = value[len(prefix):]
    return value
  if isinstance(value, type) or hasattr(value, 'itemsize'):
    try:
      return np.dtype(value).name
    except TypeError:
      return value
  return value


def _same(a, b) -> bool:
  if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) \
      and not isinstance(b, bool):
    return float(a) == float(b)
  return a == b or _dtype_text(a) == _dtype_text(b)


# A keyword one optax function has and the other lacks, at the value that does nothing.
_NEUTRAL = {'weight_decay': 0, 'mask': None}


def _shown(key, values) -> str:
  default = '' if key in values[''] else ' (optax\'s default)'
  value = values[key]
  return f'{key}={_dtype_text(value) if isinstance(value, type) else repr(value)}{default}'


def differences(expected: Optional[str], given: Optional[str], legacy: str,
                skip: Tuple[str, ...] = ()) -> List[str]:
  """The hyper-parameters ``given`` (the ``--tx`` text) sets otherwise than ``expected`` (the
  plain optax expression that continues ``legacy``), optax's defaults included: the same
  functions with another value, or a keyword one of two single calls lacks at a value that is
  not neutral (``optax.adamw``'s default ``weight_decay=1e-4`` against ``optax.adam``). The
  keywords of ``skip`` are not compared.

  Examples:
    >>> differences('optax.adam(learning_rate=0.002)', 'optax.adamw(0.002)', 'Adam(0.002)')
    ["weight_decay=0.0001 (optax's default) in --tx, 0 for Adam(0.002)"]
  """
  if expected is None or given is None:
    return []
  want, got = _expression_syntax.calls(expected), _expression_syntax.calls(given)
  if want is None or got is None or len(want) != len(got):
    return []
  found = []
  if [n for n, _ in want] == [n for n, _ in got]:
    for (_, mine), (_, theirs) in zip(want, got):
      for key in theirs:
        if key in ('', '*') or key in skip or key in theirs['*'] or key not in mine:
          continue
        if key.endswith('dtype') and None in (mine[key], theirs[key]):
          continue   # None: the params' dtype, which the probe and the dtype check see
        if not _same(mine[key], theirs[key]):
          found.append(f'{_shown(key, theirs)} in --tx, {mine[key]!r} for {legacy}')
    return found
  if len(want) == 1:
    (_, mine), (their_name, theirs) = want[0], got[0]
    for key in theirs:
      if key in _NEUTRAL and key not in mine and key not in theirs['*'] and not _same(
          theirs[key], _NEUTRAL[key]):
        found.append(f'{_shown(key, theirs)} in --tx, {_NEUTRAL[key]!r} for {legacy}')
    for key in sorted(mine['']):
      if key in _NEUTRAL and key not in theirs and not _same(mine[key], _NEUTRAL[key]):
        found.append(f'optax.{their_name} takes no {key}={mine[key]!r}: {legacy} continues in '
                     f'{expected}')
  return found


def cause(expected: Optional[str], given: Optional[str], legacy: str) -> Optional[str]:
  """Why ``given`` (the ``--tx`` text) differs from ``expected`` (the plain optax expression that
  continues ``legacy``, the ``--optimizer``): the keywords that differ, or another function.

  Examples:
    >>> cause('optax.adam(learning_rate=0.1, b1=0.9, b2=0.999, eps=1e-08)',
    ...       'optax.adam(0.1, b2=0.99)', 'Adam(0.1)')
    'b2=0.99 in --tx, 0.999 for Adam(0.1)'
    >>> cause('optax.adam(learning_rate=0.1)', 'optax.adamax(0.1)', 'Adam(0.1)')
    'optax.adamax is another algorithm whose state has the fields of optax.adam (what Adam(0.1) continues in)'
  """
  found = differences(expected, given, legacy)
  if found:
    return '; '.join(found)
  if expected is None or given is None:
    return None
  want, got = _expression_syntax.calls(expected), _expression_syntax.calls(given)
  if want is None or got is None:
    return None
  if [n for n, _ in want] != [n for n, _ in got]:
    if len(want) == len(got) == 1:
      (mine_name, mine), (their_name, theirs) = want[0], got[0]
      lacking = [f'{k}={mine[k]!r}' for k in sorted(mine['']) if k not in theirs]
      if lacking:
        return (f'optax.{their_name} takes no {", ".join(lacking)}: {legacy} continues in '
                f'{expected}')
      return (f'optax.{their_name} is another algorithm whose state has the fields of '
              f'optax.{mine_name} (what {legacy} continues in)')
    return f'--tx is {given}; {legacy} continues in {expected}'
  return None


def _schedule(node) -> Optional[Callable]:
  """The optax schedule a call node with literal arguments writes (``optax.exponential_decay(
  0.01, 1, 0.9)``), or None (another node, a schedule of schedules)."""
  name = _expression_syntax.optax_name(node.func) if isinstance(node, ast.Call) else None
  fn = getattr(optax.schedules, name, None) if name else None
  if fn is None or not callable(fn):
    return None
  try:
    args = [_expression_syntax.literal_value(a) for a in node.args]
    kwargs = {k.arg: _expression_syntax.literal_value(k.value) for k in node.keywords if k.arg}
    schedule = fn(*args, **kwargs)
  except (ValueError, TypeError):
    return None
  return schedule if callable(schedule) else None


def learning_rate_of(text: Optional[str]) -> Tuple[str, Any]:
  """How the ``--tx`` text sets its learning rate: ``('schedule', step -> rate)``, ``('injected',
  None)`` (``inject_hyperparams``: the rate is read from the state), ``('constant', value)``,
  or ``('unknown', None)`` (no text, no ``learning_rate`` keyword, a schedule it cannot read).

  Examples:
    >>> learning_rate_of('optax.adam(learning_rate=optax.exponential_decay(0.01, 1, 0.9))')[0]
    'schedule'
    >>> learning_rate_of('optax.chain(optax.clip(1.0), optax.sgd(0.1))')
    ('constant', 0.1)
  """
  try:
    node = _expression_syntax.parse(text) if text else None
  except _expression_syntax.TextError:
    node = None
  for call in _expression_syntax.chained(node):
    bound = _expression_syntax.bound(call)
    if bound is None or 'learning_rate' not in bound[2].arguments:
      continue
    _, injected, arguments = bound
    if injected:
      return 'injected', None
    value = arguments.arguments['learning_rate']
    schedule = _schedule(value)
    if schedule is not None:
      return 'schedule', schedule
    try:
      return 'constant', _expression_syntax.literal_value(value)
    except ValueError:
      return 'unknown', None
  return 'unknown', None
