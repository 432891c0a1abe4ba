"""Leaf-by-leaf comparison of two checkpoint state dicts (``convert.diff``).

Float and complex leaves (bfloat16 included) are compared within a tolerance; NaN equals NaN
and inf equals inf at the same place. Integer and bool leaves are compared exactly, as
integers whatever their width (an ``int32`` step equals the same ``int64`` step). Other leaves
(strings, bytes, None) are compared by value. Python scalars stand for a 0-d array of their
family. Lists compare as dicts of their indices. An empty dict and None are the same leaf:
nothing stored (an empty optax state is ``{}`` in msgpack and reads back as None from orbax).
"""
import dataclasses
from typing import List, Optional, Tuple

import numpy as np

from . import _codec
from . import _state_dict
from .. import _state_check
from .. import _tree


@dataclasses.dataclass
class DiffResult:
  """Per-leaf differences found by :func:`flax_optim_compat.convert.diff`.

  Attributes:
    leaves: ``[(path, max_abs, max_rel), ...]`` for float/complex leaves present in both with
      the same shape and dtype; ``max_rel`` is ``max|a - b| / max(|a|, |b|)`` over the finite
      values (0 when both are equal); NaN against a number, or inf against another value, is an
      infinite difference.
    only_a: paths only in ``a``.
    only_b: paths only in ``b``.
    mismatched: ``[(path, description), ...]`` for leaves with different shapes, dtypes (other
      than integer widths) or kinds.
    differing: ``[(path, description), ...]`` for integer, bool and other leaves (strings,
      bytes, None) whose values differ (exact comparisons, no tolerance).
    exact: the number of leaves compared exactly (those in ``differing`` included).
    layouts: per side, ``'legacy'`` (it holds a legacy optimizer), ``'converted'`` (a
      ``{'params', 'opt_state'}`` train state) or None (neither): a legacy side and a
      converted one compare in one layout only once the legacy side is converted
      (``optimizer_def=``, the CLI's ``--optimizer``).
  """
  leaves: List[Tuple[str, float, float]]
  only_a: List[str]
  only_b: List[str]
  mismatched: List[Tuple[str, str]]
  differing: List[Tuple[str, str]] = dataclasses.field(default_factory=list)
  exact: int = 0
  layouts: Tuple[Optional[str], Optional[str]] = (None, None)

  @property
  def layouts_differ(self) -> bool:
    """One side legacy and the other converted: most paths differ until the legacy side is
    converted (``optimizer_def=``)."""
    return sorted(map(str, self.layouts)) == ['converted', 'legacy']

  @property
  def legacy_side(self) -> Optional[int]:
    """Where the layouts differ, which side (0: ``a``, 1: ``b``) holds the legacy optimizer."""
    return self.layouts.index('legacy') if self.layouts_differ else None

  @property
  def compared(self) -> int:
    """The number of leaves compared: float leaves, and those compared exactly."""
    return len(self.leaves) + self.exact

  @property
  def max_abs(self) -> float:
    return max((x[1] for x in self.leaves), default=0.0)

  @property
  def max_rel(self) -> float:
    return max((x[2] for x in self.leaves), default=0.0)

  @property
  def structural(self) -> int:
    """The number of paths in one side only or with different shapes, dtypes or kinds."""
    return len(self.only_a) + len(self.only_b) + len(self.mismatched)

  @staticmethod
  def leaf_same(max_abs: float, max_rel: float, rtol: float = 0.0,
                atol: float = 0.0) -> bool:
    """Whether a float leaf agrees: ``max_abs <= atol`` or ``max_rel <= rtol``."""
    return max_abs <= atol or max_rel <= rtol

  def as_dict(self, rtol: float = 0.0, atol: float = 0.0) -> dict:
    """A JSON-ready dict: ``same`` within ``rtol``/``atol``, the counts and every list."""
    return {'same': self.same(rtol, atol), 'rtol': rtol, 'atol': atol,
            'compared': self.compared, 'layouts': list(self.layouts), 'max_abs': _json_number(self.max_abs),
            'max_rel': _json_number(self.max_rel), 'structural': self.structural,
            'leaves': [{'path': p, 'max_abs': _json_number(a), 'max_rel': _json_number(r),
                        'same': self.leaf_same(a, r, rtol, atol)} for p, a, r in self.leaves],
            'only_a': list(self.only_a), 'only_b': list(self.only_b),
            'mismatched': [{'path': p, 'what': w} for p, w in self.mismatched],
            'differing': [{'path': p, 'what': w} for p, w in self.differing]}

  def same(self, rtol: float = 0.0, atol: float = 0.0) -> bool:
    """No structural or exact difference, and every float leaf agrees within ``rtol``/``atol``."""
    return (not self.structural and not self.differing
            and all(self.leaf_same(a, r, rtol, atol) for _, a, r in self.leaves))


def _json_number(x: float):
  """``x``, or 'inf' / 'nan' (JSON has no such numbers)."""
  return x if np.isfinite(x) else str(x)


def _normalise(tree):
  """Lists and tuples as dicts of their indices (as flax's state dicts store them); an empty
  container as None (:func:`_state_check.is_empty`)."""
  if _state_check.is_empty(tree):
    return None
  if isinstance(tree, dict):
    return {k: _normalise(v) for k, v in tree.items()}
  if isinstance(tree, (list, tuple)):
    return {str(i): _normalise(v) for i, v in enumerate(tree)}
  return tree


def _number(value):
  """``(array, kind)`` for an array or Python number (kind as ``_tree.dtype_kind``), else None."""
  if isinstance(value, _codec.LeafMeta):
    return None
  if isinstance(value, (bool, int, float, complex, np.generic, np.ndarray)) or hasattr(
      value, '__array__') and hasattr(value, 'dtype'):
    array = np.asarray(value)
    kind = _tree.dtype_kind(array.dtype)
    if kind in 'biufc':
      return array, kind
  return None


def _short(value) -> str:
  text = repr(value.tolist() if isinstance(value, np.ndarray) and value.size <= 4 else value)
  return text if len(text) <= 60 else text[:57] + '...'


def _exact(xa: np.ndarray, xb: np.ndarray):
  """A description of how two integer or bool arrays of one shape differ, or None."""
  if xa.dtype != xb.dtype and {xa.dtype.kind, xb.dtype.kind} == {'i', 'u'}:
    equal = xa.astype(object) == xb.astype(object)  # exact beyond int64 and uint64
  else:
    equal = xa == xb
  equal = np.asarray(equal, bool)
  if equal.all():
    return None
  if xa.ndim == 0:
    return f'{xa.item()!r} vs {xb.item()!r}'
  return f'{int((~equal).sum())} of {equal.size} values differ'


def _inexact(xa: np.ndarray, xb: np.ndarray) -> Tuple[float, float]:
  """``(max_abs, max_rel)`` of two float or complex arrays of one shape."""
  wide = np.complex128 if 'c' in (xa.dtype.kind, xb.dtype.kind) else np.float64
  fa, fb = xa.astype(wide), xb.astype(wide)
  nan_a, nan_b = np.isnan(fa), np.isnan(fb)
  equal = (fa == fb) | (nan_a & nan_b)  # inf == inf at the same place
  with np.errstate(invalid='ignore', over='ignore'):
    gap = np.where(equal, 0.0, np.abs(fa - fb))
  gap = np.where(np.isnan(gap), np.inf, gap)  # NaN against a number, or inf - inf
  max_abs = float(np.max(gap, initial=0.0))
  magnitudes = [np.abs(x[np.isfinite(x)]) for x in (fa, fb)]
  scale = float(max((np.max(m, initial=0.0) for m in magnitudes), default=0.0))
  max_rel = max_abs / scale if scale else (0.0 if max_abs == 0 else float('inf'))
  return max_abs, max_rel


def layout(tree) -> Optional[str]:
  """``'legacy'``, ``'converted'`` or None: what kind of checkpoint ``tree`` is."""
  if not isinstance(tree, dict):
    return None
  if _state_dict.find_optimizers(tree):
    return 'legacy'
  if _state_dict.find(tree, _state_dict.is_train_state):
    return 'converted'
  return None


def compare(tree_a: dict, tree_b: dict) -> DiffResult:
  """The :class:`DiffResult` of two state dicts."""
  leaves_a = {_tree.join_keys(p): v for p, v in _state_dict.leaves(_normalise(tree_a))}
  leaves_b = {_tree.join_keys(p): v for p, v in _state_dict.leaves(_normalise(tree_b))}
  result = DiffResult([], [p for p in leaves_a if p not in leaves_b],
                      [p for p in leaves_b if p not in leaves_a], [],
                      layouts=(layout(tree_a), layout(tree_b)))
  for path, va in leaves_a.items():
    if path not in leaves_b:
      continue
    vb = leaves_b[path]
    na, nb = _number(va), _number(vb)
    if na is None or nb is None:
      if na is not None or nb is not None or type(va) is not type(vb):
        result.mismatched.append((path, f'{_kind(va)} vs {_kind(vb)}'))
      elif isinstance(va, _codec.LeafMeta) or isinstance(vb, _codec.LeafMeta):
        result.mismatched.append((path, 'not read'))
      else:
        result.exact += 1
        if va != vb:
          result.differing.append((path, f'{_short(va)} vs {_short(vb)}'))
      continue
    (xa, kind_a), (xb, kind_b) = na, nb
    family_a = 'i' if kind_a in 'iu' else kind_a
    family_b = 'i' if kind_b in 'iu' else kind_b
    python_scalar = isinstance(va, (bool, int, float, complex)) or isinstance(
        vb, (bool, int, float, complex))
    if (xa.shape != xb.shape or family_a != family_b
        or (family_a in 'fc' and xa.dtype != xb.dtype and not python_scalar)):
      result.mismatched.append((path, f'{_kind(va)} vs {_kind(vb)}'))
      continue
    if family_a in 'ib':
      result.exact += 1
      what = _exact(xa, xb)
      if what is not None:
        result.differing.append((path, what))
      continue
    result.leaves.append((path,) + _inexact(xa, xb))
  return result


def _kind(value) -> str:
  if value is None:
    return 'None'
  if isinstance(value, dict):
    return 'a dict' if value else 'an empty dict'
  if isinstance(value, _codec.LeafMeta):
    return f'{value.dtype.name}{list(value.shape)}'
  number = _number(value)
  if number is not None:
    array = number[0]
    if isinstance(value, (bool, int, float, complex)):
      return f'a Python {type(value).__name__}'
    return f'{array.dtype.name}{list(array.shape)}'
  return f'a {type(value).__name__}'
