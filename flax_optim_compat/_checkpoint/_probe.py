"""A conversion checks itself before it writes: legacy and target, side by side, for a few updates.

The legacy side is the optimizer as ``--optimizer`` states it (its def's own ``apply_gradient``:
the legacy math); the target side is the transformation the conversion writes a state for,
``tx.update`` from the state the conversion's own mapping (``optax_state(tx=)``) builds. Both
run :data:`UPDATES` updates on the same synthetic gradients and their params are compared
after each update.

What it runs on (the *probe tree*): the file's tree, every leaf with its path, dtype and rank,
each dimension above :data:`MAX_DIM` cut down (the two largest to :data:`MAX_DIM`, the others to
:data:`MAX_OTHER_DIM`; a dimension at or above 128 stays at or above 128, so Adafactor factors
what it factored); the params are the leaf's own leading corner (an all-zero leaf stays all
zeros: LAMB's and LARS's zero-norm rules show), its legacy state is built by the legacy
optimizer itself from ``init_state`` over :data:`WARMUP` updates, at the file's step. The
gradients have element-wise magnitudes from 1e-8 to 1 (fixed per element over the updates), so
the state holds tiny second moments where eps placement shows, and large ones elsewhere. The
cost does not grow with the file: at most ~0.6 M elements a leaf, a few compiled steps.

A second pass runs the same compiled updates on the same leaves scaled by 1e-6, where floors on
the params' scale (Adafactor's ``epsilon2``) and trust ratios show.

The comparison: per leaf, the largest ``|legacy - target|`` over the leaf's largest ``|value|``
(the class of the guide's table: bit-exact, or within 1e-6 for float32; 16-bit floats allow
the same number of their own ulps).
"""
import math
import ast
import inspect
from typing import List, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from .. import _tree

__all__ = ['ProbeResult', 'Known', 'run', 'UPDATES', 'TOLERANCE']

UPDATES = 4
WARMUP = 3
MAX_DIM = 160
MAX_OTHER_DIM = 4
TOLERANCE = 1e-6   # the "1e-6" class, for float32 leaves
_TINY_FACTOR = 100.0
_F32_EPS = float(np.finfo(np.float32).eps)


class Known(NamedTuple):
  """A difference the conversion already says (one note), not a refusal: e.g. LAMB's zero params."""
  path: str
  note: str


class ProbeResult(NamedTuple):
  """What the probe measured.

  Attributes:
    updates: how many updates each side ran (in each of the two passes).
    bit_exact: every param equal, bit for bit, after every update.
    max_rel: the largest relative difference on the file's values (leaves of ``known``
      excepted): the class.
    tiny_rel: the same on the params scaled by 1e-6 (refused only beyond 100 times the class:
      there values are about one update, whose own rounding shows at ~1e-6).
    first: ``(leaf path, update, relative difference)`` of the first leaf beyond the class, or
      None when every leaf is within it.
    known: ``(path, note, relative difference)`` of differing leaves the def explains.
    stand_ins: leaves cut down to fit the probe (their paths).
  """
  updates: int
  bit_exact: bool
  max_rel: float
  tiny_rel: float
  first: Optional[Tuple[str, int, float]]
  known: Tuple[Tuple[str, str, float], ...]
  stand_ins: Tuple[str, ...]

  @property
  def within(self) -> bool:
    return self.first is None

  def summary(self) -> str:
    """``'bit-exact over 4 updates'`` / ``'max relative difference 3e-07 over 4 updates (the
    1e-6 class)'`` / ``'... beyond the 1e-6 class at ...'``."""
    if self.bit_exact:
      return f'bit-exact over {self.updates} updates'
    if self.first is None:
      tiny = (f'; {self.tiny_rel:.2g} on params scaled by 1e-6' if self.tiny_rel > self.max_rel
              else '')
      return (f'max relative difference {self.max_rel:.2g} over {self.updates} updates (the '
              f'1e-6 class: within 1e-6 an update{tiny})')
    path, update, rel = self.first
    return (f'params leaf {path} differs by {_rel_text(rel)} (relative) after update '
            f'{update + 1} of {self.updates}, beyond the 1e-6 class')


def _rel_text(rel: float) -> str:
  return 'NaN/inf at other places' if math.isinf(rel) else f'{rel:.2g}'


# ----------------------------------------------------------------------------- the probe tree


def _stand_in_shape(shape) -> Tuple[int, ...]:
  if all(d <= MAX_DIM for d in shape):
    return tuple(shape)
  order = sorted(range(len(shape)), key=lambda i: shape[i])   # stable, as Adafactor's sort
  largest = set(order[-2:])
  return tuple(min(d, MAX_DIM) if i in largest else min(d, MAX_OTHER_DIM)
               for i, d in enumerate(shape))


def _stand_in(leaf, rng):
  """``(value, cut)``: the leaf's leading corner (a numpy copy); whether it was cut down."""
  shape = np.shape(leaf)
  small = _stand_in_shape(shape)
  corner = np.array(leaf[tuple(slice(0, d) for d in small)]) if small else np.array(leaf)
  if small != tuple(shape) and corner.size and not corner.any() and np.asarray(leaf).any():
    # A non-zero leaf whose corner is zeros: zero-norm rules must not show where the file has none.
    scale = float(np.max(np.abs(np.asarray(leaf, np.float32))))
    corner = (rng.standard_normal(small) * scale).astype(corner.dtype)
  return corner, small != tuple(shape)


def _gradients(params, rng, count):
  """``count`` gradient trees: normal values times a per-element magnitude in [1e-8, 1]."""
  leaves, treedef = jax.tree_util.tree_flatten(params)
  scales = [10.0 ** rng.uniform(-8, 0, np.shape(p)) for p in leaves]
  out = []
  for _ in range(count):
    grads = []
    for p, s in zip(leaves, scales):
      dtype = p.dtype if _tree.is_inexact(p) else np.dtype(np.float32)
      grads.append(jnp.asarray((rng.standard_normal(np.shape(p)) * s).astype(dtype)))
    out.append(treedef.unflatten(grads))
  return out


# ----------------------------------------------------------------------------- comparison


def _tolerance(dtype) -> float:
  try:
    eps = float(jnp.finfo(dtype).eps)
  except ValueError:
    return TOLERANCE
  return TOLERANCE * max(1.0, eps / _F32_EPS)


def _relative(a, b) -> float:
  a = np.asarray(a, np.float64)
  b = np.asarray(b, np.float64)
  if a.shape != b.shape:
    return math.inf
  finite = np.isfinite(a) & np.isfinite(b)
  if not np.array_equal(np.isfinite(a), np.isfinite(b)) or not np.array_equal(
      a[~finite], b[~finite], equal_nan=True):
    return math.inf
  if not finite.any():
    return 0.0
  scale = max(float(np.max(np.abs(b[finite]))), float(np.max(np.abs(a[finite]))), 1e-30)
  return float(np.max(np.abs(a[finite] - b[finite]))) / scale


def _same_bits(a, b) -> bool:
  a, b = np.atleast_1d(np.asarray(a)), np.atleast_1d(np.asarray(b))
  return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(
      np.ascontiguousarray(a).view(np.uint8), np.ascontiguousarray(b).view(np.uint8))


# ----------------------------------------------------------------------------- the run


def run(opt_def, params, step, full_tx, state_tx, *, hyper_params=None,
        known_zero_note: Optional[str] = None, seed: int = 0) -> ProbeResult:
  """Runs the legacy optimizer and ``full_tx`` side by side on the probe tree of ``params``.

  Args:
    opt_def: the legacy def, as ``--optimizer`` states it.
    params: the file's params (the legacy target).
    step: the file's optimizer step.
    full_tx: the transformation of the converted TrainState.
    state_tx: the ``tx`` argument the conversion gives ``opt_def.optax_state``.
    hyper_params: the legacy side's hyper-params (default the def's own; a def whose rate was
      set per step runs at the rate the target injects).
    known_zero_note: the def's line for an all-zero param that the target moves and legacy did
      not (LAMB into ``optax.lamb``): such leaves are reported in ``known``, not refused.
    seed: the synthetic values' seed.
  """
  rng = np.random.default_rng(seed)
  leaves, treedef = jax.tree_util.tree_flatten(params)
  paths = _tree.tree_paths(params)
  cut = [_stand_in(leaf, rng) for leaf in leaves]
  probe_params = treedef.unflatten([jnp.asarray(v) for v, _ in cut])
  stand_ins = tuple(p for p, (_, was_cut) in zip(paths, cut) if was_cut)
  zero = [not np.asarray(v).any() and np.size(v) > 0 for v, _ in cut]

  grads = _gradients(probe_params, rng, WARMUP + UPDATES)
  hyper_params = opt_def.hyper_params if hyper_params is None else hyper_params

  # Each side's one update is compiled once and run WARMUP + UPDATES times (compiling is most
  # of the probe's cost; one program of all the updates compiles slower than one update). The
  # legacy state is built by the legacy optimizer itself: init, WARMUP updates, the file's step.
  legacy_step = jax.jit(lambda p, s, g: opt_def.apply_gradient(hyper_params, p, s, g))

  def target_step(p, o, g):
    updates, o = full_tx.update(g, o, p)
    return optax.apply_updates(p, updates), o
  target_step = jax.jit(target_step)

  init = jax.jit(opt_def.init_state)
  bit_exact, max_rel, first, known = True, 0.0, None, {}
  # Two passes through the same compiled updates: the file's values, then the same leaves
  # scaled by 1e-6, where floors on the params' scale (Adafactor's epsilon2) and trust ratios
  # show.
  tiny = jax.tree_util.tree_map(
      lambda x: (x * np.asarray(1e-6, x.dtype)) if _tree.is_inexact(x) else x, probe_params)
  tiny_rel = 0.0
  for label, start in (('', probe_params), (' (params scaled by 1e-6)', tiny)):
    state = init(start)
    warm = start
    for g in grads[:WARMUP]:
      warm, state = legacy_step(warm, state, g)
    state = state.replace(step=jnp.asarray(step, jnp.int32))
    opt_state = opt_def.optax_state(start, state, tx=state_tx)
    legacy_params = target_params = start
    for k, g in enumerate(grads[WARMUP:]):
      legacy_params, state = legacy_step(legacy_params, state, g)
      target_params, opt_state = target_step(target_params, opt_state, g)
      for j, (a, b) in enumerate(zip(jax.tree_util.tree_leaves(legacy_params),
                                     jax.tree_util.tree_leaves(target_params))):
        if _same_bits(a, b):
          continue
        bit_exact = False
        rel = _relative(a, b)
        if known_zero_note is not None and zero[j]:
          known[paths[j]] = max(known.get(paths[j], 0.0), rel)
          continue
        if label:
          # Values about the size of one update: rounding shows at ~1e-6 of it (injected
          # float32 hyper-params); a floor or a trust ratio differs by far more.
          tiny_rel = max(tiny_rel, rel)
          beyond = rel > (k + 1) * _TINY_FACTOR * _tolerance(leaves[j].dtype)
        else:
          max_rel = max(max_rel, rel)
          # The class is per update (each update within 1e-6): the two sides run on their own,
          # so after update k+1 their difference may hold k+1 updates' roundings.
          beyond = rel > (k + 1) * _tolerance(leaves[j].dtype)
        if first is None and beyond:
          first = (paths[j] + label, k, rel)
  return ProbeResult(UPDATES, bit_exact, max_rel, tiny_rel, first,
                     tuple((p, known_zero_note, r) for p, r in known.items()), stand_ins)


def describe_known(result: ProbeResult) -> List[str]:
  """One note per known difference the probe measured."""
  if not result.known:
    return []
  paths = ', '.join(p for p, _, _ in result.known)
  worst = max(r for _, _, r in result.known)
  note = result.known[0][1]
  return [f'{paths} {"is" if len(result.known) == 1 else "are"} all zeros: {note} (the probe '
          f'measured a relative difference of {_rel_text(worst)})']



# ----------------------------------------------------------------------------- the cause


def _calls(text: str) -> Optional[List[Tuple[str, dict]]]:
  """``[(optax function, {keyword: literal})]`` of an optax expression: one call, the calls of
  an ``optax.chain``, ``inject_hyperparams(optax.X)(...)`` read as ``optax.X(...)``; None when
  it is something else (a multi_transform, a schedule argument: no cause is guessed)."""
  try:
    node = ast.parse(text, mode='eval').body
  except SyntaxError:
    return None

  def name_of(func):
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
        and func.value.id == 'optax':
      return func.attr
    return None

  def one(call):
    if not isinstance(call, ast.Call):
      return None
    func = call.func
    if isinstance(func, ast.Call) and name_of(func.func) == 'inject_hyperparams' and func.args:
      name = name_of(func.args[0])
    else:
      name = name_of(func)
    fn = getattr(optax, name, None) if name else None
    if fn is None:
      return None
    try:
      bound = inspect.signature(fn).bind_partial(*call.args, **{
          k.arg: k.value for k in call.keywords if k.arg})
    except TypeError:
      return None
    values = {'': set(bound.arguments)}   # the keywords written out
    for param in inspect.signature(fn).parameters.values():
      if param.name in bound.arguments:
        try:
          values[param.name] = ast.literal_eval(bound.arguments[param.name])
        except (ValueError, SyntaxError, TypeError):
          values[param.name] = ast.unparse(bound.arguments[param.name])
      elif param.default is not inspect.Parameter.empty:
        values[param.name] = param.default
    return name, values

  if isinstance(node, ast.Call) and name_of(node.func) == 'chain':
    calls = [one(c) for c in node.args]
  else:
    calls = [one(node)]
  return None if any(c is None for c in calls) else calls


def _same(a, b) -> bool:
  if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) \
      and not isinstance(b, bool):
    return float(a) == float(b)
  return a == b


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
  if expected is None or given is None:
    return None
  want, got = _calls(expected), _calls(given)
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
  differing = []
  for (_, mine), (_, theirs) in zip(want, got):
    for key, value in theirs.items():
      if key and key in mine and not _same(mine[key], value):
        differing.append(f'{key}={value!r} in --tx, {mine[key]!r} for {legacy}')
  if differing:
    return '; '.join(differing)
  return None
