"""The suite's own comparison helpers (tests/_utils.py): a check that certifies must not pass on NaN."""
import numpy as np
import pytest

from tests import _utils

NAN = float('nan')


@pytest.mark.parametrize('actual,expected', [
    ([1.0, NAN], [1.0, NAN]),     # NaN at the same place on both sides
    ([1.0, NAN], [1.0, 2.0]),
    ([1.0, 2.0], [1.0, NAN]),
    ([NAN], [NAN]),
])
def test_a_nan_is_never_equal(actual, expected):
  assert _utils.max_rel_diff(actual, expected) == np.inf
  with pytest.raises(AssertionError, match='max rel diff inf'):
    _utils.assert_trees_close({'w': np.asarray(actual)}, {'w': np.asarray(expected)}, rtol=1.0)


def test_nan_where_expected_checks_the_places_and_the_rest():
  expected = {'w': np.asarray([1.0, NAN, 3.0])}
  _utils.assert_trees_close({'w': np.asarray([1.0, NAN, 3.0])}, expected, rtol=0,
                            nan_where_expected=True)
  with pytest.raises(AssertionError, match=r'NaN at \[\[2\]\], expected at \[\[1\]\]'):
    _utils.assert_trees_close({'w': np.asarray([1.0, 2.0, NAN])}, expected, rtol=1.0,
                              nan_where_expected=True)
  with pytest.raises(AssertionError, match='max rel diff'):
    _utils.assert_trees_close({'w': np.asarray([1.0, NAN, 3.5])}, expected, rtol=0.1,
                              nan_where_expected=True)


def test_max_rel_diff_is_relative_to_the_largest_expected_value():
  # hand math: max|a - e| = 0.5, max|e| = 4
  assert _utils.max_rel_diff([1.5, 4.0], [1.0, 4.0]) == 0.125
  assert _utils.max_rel_diff([0.0, 0.0], [0.0, 0.0]) == 0.0
  assert _utils.max_rel_diff([np.inf], [1.0]) == np.inf
