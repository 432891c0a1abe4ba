"""``from_optax`` wherever a built-in optimizer goes: pmap (both legacy routes), a sharded mesh,
``MultiOptimizer`` groups and ``create(focus=...)``.

References are plain optax loops on one device (mean of the per-device gradients) or a plain
``optax.multi_transform``; the 8 CPU devices come from conftest.py.
"""
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import jax_utils
from flax import serialization
from flax import traverse_util
from jax.sharding import Mesh
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import flax_optim_compat as optim
from flax_optim_compat._from_optax import from_optax
from tests import _utils
from tests.test_from_optax import assert_same
from tests.test_from_optax import assert_same_types

pytestmark = [
    pytest.mark.filterwarnings('ignore::flax_optim_compat.FlaxOptimDeprecationWarning'),
    pytest.mark.filterwarnings(
        'ignore:`flax.traverse_util.Traversal` will be deprecated:DeprecationWarning'),
]

if jax.device_count() < 8:
  pytest.skip('needs 8 devices (conftest.py simulates 8 CPU devices)', allow_module_level=True)

DEVICES = jax.local_devices()[:8]
STEPS = 10


def _params():
  k1, k2, k3 = jax.random.split(jax.random.PRNGKey(1), 3)
  return {'dense': {'kernel': jax.random.normal(k1, (4, 8)), 'bias': jax.random.normal(k2, (8,))},
          'scale': jax.random.normal(k3, (3,))}


def _device_grads(k):
  """Per-device gradients: a leading axis of 8."""
  leaves, treedef = jax.tree_util.tree_flatten(_params())
  keys = jax.random.split(jax.random.PRNGKey(200 + k), len(leaves))
  return treedef.unflatten([jax.random.normal(key, (8,) + leaf.shape)
                            for key, leaf in zip(keys, leaves)])


def _tx():
  """Clipping (a global norm across devices' averaged grads), injected schedule, adamw."""
  schedule = optax.linear_schedule(1e-2, 1e-3, transition_steps=STEPS)
  return optax.chain(optax.clip_by_global_norm(1.0),
                     optax.inject_hyperparams(optax.adamw)(learning_rate=schedule,
                                                           weight_decay=1e-3))


def _weight_decay(k):
  return 1e-3 * (1 + k % 3)


def _reference(tx, steps=STEPS, weight_decays=None):
  """Plain optax on the mean gradient; ``weight_decays[k]`` injected for step ``k`` only."""
  @jax.jit
  def step(params, state, grads, wd):
    grads = jax.tree_util.tree_map(lambda g: jnp.mean(g, axis=0), grads)
    injected = state[1]
    if wd is not None:
      state = (state[0], injected._replace(
          hyperparams={**injected.hyperparams, 'weight_decay': wd}))
    updates, state = tx.update(grads, state, params)
    state = (state[0], state[1]._replace(hyperparams={
        **state[1].hyperparams, 'weight_decay': injected.hyperparams['weight_decay']}))
    return optax.apply_updates(params, updates), state

  params, state, out = _params(), tx.init(_params()), []
  for k in range(steps):
    wd = None if weight_decays is None else jnp.float32(weight_decays(k))
    params, state = step(params, state, _device_grads(k), wd)
    out.append((params, state))
  return out


def _close(actual, expected, what):
  # pmean/psum reduce in another order than jnp.mean: rounding only.
  for a, e in zip(jax.tree_util.tree_leaves(actual), jax.tree_util.tree_leaves(expected)):
    assert _utils.max_rel_diff(a, e) <= 1e-5, what


# ----------------------------------------------------------------------------- pmap


def test_jax_utils_replicate_and_pmean():
  tx = _tx()
  expected = _reference(tx, weight_decays=_weight_decay)
  optimizer = jax_utils.replicate(from_optax(tx).create(_params()), devices=DEVICES)

  def train_step(optimizer, grads, wd):
    grads = jax.lax.pmean(grads, axis_name='batch')
    return optimizer.apply_gradient(grads, weight_decay=wd)

  counter = _utils.TraceCounter(train_step)
  p_step = jax.pmap(counter, axis_name='batch', devices=DEVICES, in_axes=(0, 0, None))
  for k in range(STEPS):
    optimizer = p_step(optimizer, _device_grads(k), _weight_decay(k))
    if k == 1:
      # pmap traces again once for the sharding its own outputs carry (jax_utils.replicate
      # names the device axis differently), then never for a new override value.
      traces = counter.count
    single = jax_utils.unreplicate(optimizer)
    _close(single.target, expected[k][0], f'target after step {k}')
    _close(single.state.param_states, expected[k][1], f'state after step {k}')
  assert counter.count == traces <= 2
  assert_same_types(jax_utils.unreplicate(optimizer).state.param_states, expected[0][1])


def test_optimizer_replicate_and_its_checkpoint():
  tx = _tx()
  expected = _reference(tx)
  with warnings.catch_warnings():
    warnings.simplefilter('ignore', optim.FlaxOptimDeprecationWarning)
    optimizer = from_optax(tx).create(_params()).replicate(devices=DEVICES)
  p_step = jax.pmap(lambda opt, grads: opt.apply_gradient(grads), axis_name='batch',
                    devices=DEVICES)
  for k in range(STEPS // 2):
    optimizer = p_step(optimizer, _device_grads(k))
  # The state dict holds one copy; restoring replicates it again, with the optax types.
  state_dict = optimizer.state_dict()
  assert np.shape(state_dict['target']['scale']) == (3,)
  restored = serialization.from_bytes(optimizer, serialization.to_bytes(optimizer))
  assert_same(restored.state, optimizer.state)
  optimizer = restored
  for k in range(STEPS // 2, STEPS):
    optimizer = p_step(optimizer, _device_grads(k))
    single = optimizer.unreplicate()
    _close(single.target, expected[k][0], f'target after step {k}')
    _close(single.state.param_states, expected[k][1], f'state after step {k}')
  assert_same_types(optimizer.unreplicate().state.param_states, expected[0][1])


# ----------------------------------------------------------------------------- mesh


MESH = Mesh(np.array(DEVICES).reshape(4, 2), ('data', 'model'))
PARAM_SPECS = {'dense': {'kernel': P(None, 'model'), 'bias': P('model')}, 'scale': P()}


def test_mesh_state_sharded_like_the_params():
  tx = optax.MultiSteps(_tx(), every_k_schedule=2)
  opt_def = from_optax(tx)
  param_shardings = jax.tree_util.tree_map(lambda s: NamedSharding(MESH, s), PARAM_SPECS)
  replicated = NamedSharding(MESH, P())
  abstract = jax.eval_shape(opt_def.create, _params())
  # Param-shaped state (moments, accumulated grads) takes its param's sharding.
  state_shardings = optax.tree_map_params(
      tx, lambda _, sharding: sharding, abstract.state.param_states, param_shardings,
      transform_non_params=lambda _: replicated)
  shardings = abstract.replace(
      target=param_shardings,
      state=abstract.state.replace(step=replicated, param_states=state_shardings))
  params = jax.device_put(_params(), param_shardings)
  optimizer = jax.jit(opt_def.create, out_shardings=shardings)(params)

  step = jax.jit(lambda opt, grads: opt.apply_gradient(grads), donate_argnums=0)
  reference = jax.jit(lambda p, s, g: tx.update(g, s, p))
  ref_params, ref_state = _params(), tx.init(_params())
  for k in range(STEPS):
    grads = jax.tree_util.tree_map(lambda g: g[0], _device_grads(k))
    optimizer = step(optimizer, jax.device_put(grads, param_shardings))
    updates, ref_state = reference(ref_params, ref_state, grads)
    ref_params = optax.apply_updates(ref_params, updates)
  # The global norm of the clipping is summed shard by shard: rounding only.
  _close(optimizer.target, ref_params, 'target')
  # Left free to choose, the compiler kept every leaf sharded as it came in.
  for leaf, sharding in zip(jax.tree_util.tree_leaves(optimizer),
                            jax.tree_util.tree_leaves(shardings)):
    assert leaf.sharding.is_equivalent_to(sharding, leaf.ndim), (leaf.shape, leaf.sharding)
  mu = optimizer.state.param_states.inner_opt_state[1].inner_state[0].mu
  assert mu['dense']['kernel'].sharding.spec == P(None, 'model')


# ----------------------------------------------------------------------------- groups


def _traversals():
  kernels = traverse_util.ModelParamTraversal(lambda path, _: 'kernel' in path)
  biases = traverse_util.ModelParamTraversal(lambda path, _: 'bias' in path)
  return kernels, biases


def _labels(params):
  return {'dense': {'kernel': 'kernels', 'bias': 'biases'}, 'scale': 'unmatched'}


def _run(optimizer, reference_tx, steps=STEPS):
  step = jax.jit(lambda opt, grads: opt.apply_gradient(grads))
  ref_step = jax.jit(lambda p, s, g: tx_step(reference_tx, p, s, g))
  params, state = _params(), reference_tx.init(_params())
  for k in range(steps):
    grads = jax.tree_util.tree_map(lambda g: g[0], _device_grads(k))
    optimizer = step(optimizer, grads)
    params, state = ref_step(params, state, grads)
    assert_same(optimizer.target, params, f'target after step {k}')
  return optimizer


def tx_step(tx, params, state, grads):
  updates, state = tx.update(grads, state, params)
  return optax.apply_updates(params, updates), state


def test_as_a_multi_optimizer_group():
  kernels, biases = _traversals()
  opt_def = optim.MultiOptimizer((kernels, from_optax(optax.adam, learning_rate=1e-2)),
                                 (biases, optim.Momentum(1e-2, beta=0.9)))
  reference = optax.multi_transform(
      {'kernels': optax.inject_hyperparams(optax.adam)(learning_rate=1e-2),
       'biases': optim.Momentum(1e-2, beta=0.9).optax_transform(),
       'unmatched': optax.set_to_zero()}, _labels)
  optimizer = _run(opt_def.create(_params()), reference)
  assert_same(optimizer.target['scale'], _params()['scale'])
  # Per-group hyper-params: a dict for the from_optax group.
  hps = optimizer.optimizer_def.hyper_params
  assert hps[0]['learning_rate'] == 1e-2
  grads = jax.tree_util.tree_map(lambda g: g[0], _device_grads(0))
  slow = optimizer.apply_gradient(grads, hyper_params=[{'learning_rate': 0.0}, hps[1]])
  assert_same(slow.target['dense']['kernel'], optimizer.target['dense']['kernel'])


def test_create_with_focus():
  kernels, _ = _traversals()
  tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(1e-2))
  reference = optax.multi_transform(
      {'kernels': tx, 'biases': optax.set_to_zero(), 'unmatched': optax.set_to_zero()}, _labels)
  optimizer = _run(from_optax(tx).create(_params(), focus=kernels), reference)
  assert_same(optimizer.target['dense']['bias'], _params()['dense']['bias'])


def test_multi_optimizer_group_checkpoint_and_plain_override():
  kernels, biases = _traversals()
  opt_def = optim.MultiOptimizer((kernels, from_optax(optax.adam, learning_rate=1e-2)),
                                 (biases, optim.Momentum(1e-2, beta=0.9)))
  step = jax.jit(lambda opt, grads: opt.apply_gradient(grads))
  grads_at = lambda k: jax.tree_util.tree_map(lambda g: g[0], _device_grads(k))
  trained, fresh = opt_def.create(_params()), opt_def.create(_params())
  for k in range(3):
    trained = step(trained, grads_at(k))
  restored = serialization.from_bytes(fresh, serialization.to_bytes(trained))
  # the file's arrays come back as NumPy (as legacy); on the device they are the trained ones
  assert_same(jax.device_put(restored.state), trained.state)
  assert_same_types(restored.state, fresh.state, numpy_leaves=True)
  assert_same(step(restored, grads_at(3)), step(trained, grads_at(3)))
  # A plain keyword override reaches every group, the from_optax one included.
  frozen = trained.apply_gradient(grads_at(3), learning_rate=0.0)
  assert_same(frozen.target, trained.target)
