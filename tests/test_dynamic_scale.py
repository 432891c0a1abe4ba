"""DynamicScale at its legacy paths, with legacy fields, behaviour and checkpoint keys."""
import dataclasses
import math
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import serialization

import flax_optim_compat
from flax_optim_compat import dynamic_scale
from flax_optim_compat.dynamic_scale import DynamicScale
from flax_optim_compat.dynamic_scale import DynamicScaleResult
from tests import _utils

INF, NAN = math.inf, math.nan

# The legacy unit test (re-run against flax 0.5.3): DynamicScale(growth_interval=2),
# loss float16(p) ** 2 at p = 1. (finite, loss, scale after the step, grad) per step. The first
# step overflows: 65536 * 1 is inf in float16 (and the loss inf / inf = nan).
GOLDEN = [(False, NAN, 32768.0, INF), (False, 1.0, 16384.0, INF), (True, 1.0, 16384.0, 2.0),
          (True, 1.0, 16384.0, 2.0), (True, 1.0, 32768.0, 2.0), (False, 1.0, 16384.0, INF)]


def _f16_square(p):
  return jnp.asarray(p, jnp.float16) ** 2


def test_importable_from_legacy_paths():
  assert flax_optim_compat.DynamicScale is dynamic_scale.DynamicScale
  assert DynamicScaleResult._fields == ('dynamic_scale', 'finite', 'aux', 'grad')


def test_fields_and_defaults():
  ds = DynamicScale()
  assert [f.name for f in dataclasses.fields(ds)] == [
      'growth_factor', 'backoff_factor', 'growth_interval', 'fin_steps', 'scale']
  assert (ds.growth_factor, ds.backoff_factor, ds.growth_interval) == (2.0, 0.5, 2000)
  assert (ds.fin_steps, ds.scale) == (0, 65536.0)
  # Only fin_steps and scale are pytree leaves; the three factors are static.
  assert jax.tree_util.tree_leaves(DynamicScale(3.0, 0.25, 7)) == [0, 65536.0]


@pytest.mark.parametrize('jit', [True, False])
def test_legacy_golden_sequence(jit):
  step = lambda ds, p: ds.value_and_grad(_f16_square)(p)
  if jit:
    step = jax.jit(step)
  ds = DynamicScale(growth_interval=2)
  for i, (finite, loss, scale, grad) in enumerate(GOLDEN):
    result = step(ds, jnp.float32(1.0))
    assert isinstance(result, DynamicScaleResult)
    ds, is_finite, value, g = result
    got = (bool(is_finite), float(value), float(ds.scale), float(g))
    np.testing.assert_allclose(got, (finite, loss, scale, grad), err_msg=f'step {i}')
    assert g.dtype == jnp.float32


def test_growth_after_growth_interval_finite_steps():
  """Hand math: the scale grows on the (growth_interval + 1)-th consecutive finite step."""
  ds = DynamicScale(growth_factor=4.0, backoff_factor=0.25, growth_interval=3, scale=8.0)
  fn = ds.value_and_grad(lambda p: p * 3.0)
  history = []
  for _ in range(5):
    ds, finite, loss, grad = fn(jnp.float32(2.0))
    assert bool(finite) and float(loss) == 6.0 and float(grad) == 3.0
    history.append((int(ds.fin_steps), float(ds.scale)))
    fn = ds.value_and_grad(lambda p: p * 3.0)
  assert history == [(1, 8.0), (2, 8.0), (3, 8.0), (0, 32.0), (1, 32.0)]


def test_backoff_resets_the_finite_count():
  ds = DynamicScale(backoff_factor=0.25, fin_steps=5, scale=8.0)
  ds, finite, _, grad = ds.value_and_grad(lambda p: jnp.log(p))(jnp.float32(0.0))
  assert not bool(finite) and not np.isfinite(float(grad))
  assert (int(ds.fin_steps), float(ds.scale)) == (0, 2.0)


def test_has_aux_and_argnums():
  def loss_fn(w, b):
    return jnp.sum(w * b), {'note': w + 1.0}

  ds = DynamicScale(scale=4.0)
  ds, finite, (loss, aux), (gw, gb) = ds.value_and_grad(loss_fn, argnums=(0, 1), has_aux=True)(
      jnp.array([1.0, 2.0]), jnp.array([3.0, 5.0]))
  assert bool(finite)
  assert float(loss) == 13.0  # unscaled
  np.testing.assert_array_equal(aux['note'], [2.0, 3.0])  # aux is not scaled
  np.testing.assert_array_equal(gw, [3.0, 5.0])
  np.testing.assert_array_equal(gb, [1.0, 2.0])


def test_axis_name_averages_the_gradients():
  n = 2
  ds = DynamicScale(scale=2.0)

  def per_device(ds, x):
    return ds.value_and_grad(lambda p: p * x, axis_name='batch')(jnp.float32(1.0))

  # One GPU has one device: the 8 host devices the suite forces stand in for the mapped axis.
  backend = None if jax.local_device_count() >= n else 'cpu'
  out = jax.pmap(per_device, axis_name='batch', in_axes=(None, 0),
                 devices=jax.local_devices(backend=backend)[:n])(ds, jnp.array([1.0, 3.0]))
  np.testing.assert_array_equal(out.grad, [2.0, 2.0])  # mean of the per-device grads 1 and 3
  np.testing.assert_array_equal(out.aux, [1.0, 3.0])   # the losses are per device


def test_checkpoint_fields_match_legacy():
  """State dict = {'fin_steps', 'scale'} only: Python values fresh, 0-d arrays after a step."""
  fresh = serialization.to_state_dict(DynamicScale(growth_interval=2))
  assert fresh == {'fin_steps': 0, 'scale': 65536.0}
  assert type(fresh['fin_steps']) is int and type(fresh['scale']) is float
  ds = jax.jit(lambda ds, p: ds.value_and_grad(_f16_square)(p).dynamic_scale)(
      DynamicScale(growth_interval=2), jnp.float32(1.0))
  stepped = serialization.msgpack_restore(serialization.to_bytes(ds))
  assert list(stepped) == ['fin_steps', 'scale']
  assert stepped['fin_steps'].dtype == np.int32 and stepped['scale'].dtype == np.float32
  assert float(stepped['scale']) == 32768.0


def test_restores_the_dynamic_scale_legacy_wrote():
  """The train-state checkpoint written by legacy flax 0.5.3 (``tools.oracle.gen_checkpoints``)."""
  path = os.path.join('checkpoints', 'legacy', 'TrainState-Adam', 'checkpoint_3')
  legacy = _utils.load_fixture(path)['dynamic_scale']
  assert sorted(legacy) == ['fin_steps', 'scale']
  restored = serialization.from_state_dict(DynamicScale(growth_interval=2), legacy)
  assert isinstance(restored, DynamicScale) and restored.growth_interval == 2
  assert int(restored.fin_steps) == int(legacy['fin_steps'])
  assert float(restored.scale) == float(legacy['scale'])
  assert serialization.to_state_dict(restored) == legacy
  with pytest.raises(ValueError, match='Missing field scale'):
    serialization.from_state_dict(DynamicScale(), {'fin_steps': 0})
