"""Leaf-by-leaf comparison of two checkpoint state dicts (``convert.diff``)."""
import dataclasses
from typing import List, Tuple

import numpy as np

from . import _state_dict
from . import _tree


@dataclasses.dataclass
class DiffResult:
  """Per-leaf differences found by :func:`flax_optim_compat.convert.diff`.

  Attributes:
    leaves: ``[(path, max_abs, max_rel), ...]`` for leaves present in both with the same shape;
      ``max_rel`` is ``max|a - b| / max(max|a|, max|b|)`` (0 when both are zero).
    only_a: paths only in ``a``.
    only_b: paths only in ``b``.
    mismatched: ``[(path, description), ...]`` for leaves with different shapes, dtypes or kinds.
  """
  leaves: List[Tuple[str, float, float]]
  only_a: List[str]
  only_b: List[str]
  mismatched: List[Tuple[str, str]]

  @property
  def max_abs(self) -> float:
    return max((x[1] for x in self.leaves), default=0.0)

  @property
  def max_rel(self) -> float:
    return max((x[2] for x in self.leaves), default=0.0)

  def same(self, rtol: float = 0.0) -> bool:
    """No structural difference and every leaf's ``max_rel <= rtol``."""
    return (not self.only_a and not self.only_b and not self.mismatched
            and all(rel <= rtol for _, _, rel in self.leaves))


def compare(tree_a: dict, tree_b: dict) -> DiffResult:
  """The :class:`DiffResult` of two state dicts."""
  leaves_a = {_tree.join_keys(p): v for p, v in _state_dict.leaves(tree_a)}
  leaves_b = {_tree.join_keys(p): v for p, v in _state_dict.leaves(tree_b)}
  result = DiffResult([], [p for p in leaves_a if p not in leaves_b],
                      [p for p in leaves_b if p not in leaves_a], [])
  for path, va in leaves_a.items():
    if path not in leaves_b:
      continue
    vb = leaves_b[path]
    if isinstance(va, dict) and isinstance(vb, dict) and not va and not vb:
      continue
    if va is None or vb is None or isinstance(va, dict) or isinstance(vb, dict):
      if not (va is None and vb is None):
        result.mismatched.append((path, f'{_kind(va)} vs {_kind(vb)}'))
      continue
    xa, xb = np.asarray(va), np.asarray(vb)
    if xa.shape != xb.shape or xa.dtype != xb.dtype:
      result.mismatched.append((path, f'{xa.dtype.name}{list(xa.shape)} vs '
                                      f'{xb.dtype.name}{list(xb.shape)}'))
      continue
    if xa.size == 0:
      result.leaves.append((path, 0.0, 0.0))
      continue
    fa, fb = xa.astype(np.float64), xb.astype(np.float64)
    abs_diff = float(np.max(np.abs(fa - fb)))
    scale = float(max(np.max(np.abs(fa)), np.max(np.abs(fb))))
    if np.isnan(fa).any() or np.isnan(fb).any():
      same_nan = np.array_equal(np.isnan(fa), np.isnan(fb))
      finite = ~(np.isnan(fa) | np.isnan(fb))
      abs_diff = float(np.max(np.abs(fa - fb)[finite], initial=0.0)) if same_nan else float('inf')
      scale = float(np.max(np.abs(np.where(finite, fa, 0)), initial=0.0))
    rel = abs_diff / scale if scale else (0.0 if abs_diff == 0 else float('inf'))
    result.leaves.append((path, abs_diff, rel))
  return result


def _kind(value) -> str:
  if value is None:
    return 'None'
  if isinstance(value, dict):
    return 'a dict' if value else 'an empty dict'
  return f'{np.asarray(value).dtype.name}{list(np.shape(value))}'
