"""`--to orbax` of leaves as large as orbax's write window or larger.

orbax refuses to write a leaf of as many bytes as its writers' limit or more
(``Requested more bytes than we reserved space for: 50000000 > 50000000.0``); the conversion's
window is 16-64 MB, and was set to exactly the largest leaf above that: a 50 MB leaf failed.
A 4096x4096 float32 kernel (64 MiB, the largest window) and a 256 MiB embedding table go
through too. Expected values: the legacy file's own arrays, read back
with plain orbax.

The 256 MiB case takes tens of seconds on a busy 2-core machine: it runs where
``FLAX_OPTIM_COMPAT_LARGE_TESTS=1`` (``tools/lanes.sh`` sets it: CI's floors lane, and the
newest releases with ``tools/lanes.sh latest``), and is skipped, with that reason, elsewhere.
"""
import os

import numpy as np
import pytest
from flax import serialization

import flax_optim_compat as optim
from flax_optim_compat import convert

ocp = pytest.importorskip('orbax.checkpoint')


def _legacy(shape, seed):
  """A GradientDescent state dict (no per-parameter state) whose kernel has ``shape``."""
  kernel = np.random.default_rng(seed).standard_normal(shape, np.float32)
  bias = np.arange(3, dtype=np.float32)
  return {'target': {'kernel': kernel, 'bias': bias},
          'state': {'step': np.int32(5), 'param_states': {'kernel': {}, 'bias': {}}}}


def _round_trip(tmp_path, shape):
  legacy = _legacy(shape, seed=len(shape) + shape[0])
  source = tmp_path / 'legacy'  # a file: its leaves reach orbax as jax arrays
  source.write_bytes(serialization.msgpack_serialize(legacy))
  out = tmp_path / 'orbax'
  convert.to_orbax(str(source), optim.GradientDescent(0.1), out)
  assert sorted(os.listdir(tmp_path)) == ['legacy', 'orbax']
  with ocp.StandardCheckpointer() as checkpointer:
    restored = checkpointer.restore(out.absolute())
  np.testing.assert_array_equal(restored['params']['kernel'], legacy['target']['kernel'])
  np.testing.assert_array_equal(restored['params']['bias'], legacy['target']['bias'])
  assert int(restored['step']) == 5


def test_a_leaf_of_exactly_the_window_orbax_was_given(tmp_path):
  _round_trip(tmp_path, (2500, 5000))  # 50 MB: the window was set to 0.05 GB, refused


def test_a_4096_by_4096_kernel(tmp_path):
  _round_trip(tmp_path, (4096, 4096))  # 64 MiB, the largest window


@pytest.mark.skipif(os.environ.get('FLAX_OPTIM_COMPAT_LARGE_TESTS') != '1',
                    reason='a 256 MiB leaf: tools/lanes.sh runs it (FLAX_OPTIM_COMPAT_LARGE_TESTS=1)')
def test_a_leaf_larger_than_the_window(tmp_path):
  _round_trip(tmp_path, (8192, 8192))  # 256 MiB
