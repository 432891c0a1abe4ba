"""Moving a legacy optimizer's state to plain optax: ``Optimizer.optax_state()``.

The check is behavioural: after converting, plain ``tx.update`` must continue exactly like
the legacy API (a wrong ``count`` would change Adam-family bias corrections, a misplaced field
the moments), for every optax-backed optimizer.
"""
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import flax_optim_compat as optim
from tests import _utils
from tests import catalogue

pytestmark = pytest.mark.filterwarnings('ignore::flax_optim_compat.FlaxOptimDeprecationWarning')

def _grads(i, params):
  return jax.tree_util.tree_map(
      lambda p: jnp.sin(jnp.arange(p.size, dtype=jnp.float32) + i).reshape(p.shape), params)


@pytest.mark.parametrize('name', sorted(catalogue.OPTAX_STATE))
def test_plain_optax_continues_exactly_like_the_legacy_api(name):
  params = {'dense': {'kernel': jnp.linspace(-1, 1, 12).reshape(4, 3), 'bias': jnp.ones(3)},
            'scale': jnp.asarray(0.5)}
  optimizer = catalogue.build_def(optim, catalogue.OPTAX_STATE[name]).create(params)
  for i in range(3):
    optimizer = optimizer.apply_gradient(_grads(i, params))
  tx = optimizer.optimizer_def.optax_transform()
  opt_state = optimizer.optax_state()
  target = optimizer.target

  # Both sides compiled (an un-traced apply_gradient runs a cached compiled step), so XLA's
  # contractions are the same on both and the comparison can be bit-exact.
  @jax.jit
  def optax_step(grads, opt_state, target):
    updates, opt_state = tx.update(grads, opt_state, target)
    return optax.apply_updates(target, updates), opt_state

  for i in range(3, 6):
    grads = _grads(i, params)
    target, opt_state = optax_step(grads, opt_state, target)
    optimizer = optimizer.apply_gradient(grads)
    _utils.assert_trees_close(target, optimizer.target, rtol=0)


@pytest.mark.parametrize('name', sorted(catalogue.OPTAX_STATE))
def test_converted_state_has_the_structure_and_shapes_of_tx_init(name):
  """The state is assembled from a one-leaf trace of ``tx.init``: it must be ``tx.init``'s own."""
  params = {'dense': {'kernel': jnp.ones((4, 3)), 'bias': jnp.ones(3)},
            'conv': jnp.ones((2, 2, 3, 5)), 'scale': jnp.asarray(0.5)}
  optimizer = catalogue.build_def(optim, catalogue.OPTAX_STATE[name]).create(params)
  optimizer = optimizer.apply_gradient(jax.tree_util.tree_map(jnp.ones_like, params))
  want = jax.eval_shape(optimizer.optimizer_def.optax_transform().init, params)
  got = optimizer.optax_state()
  assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(want)
  for path, g, w in zip(*zip(*jax.tree_util.tree_flatten_with_path(got)[0]),
                        jax.tree_util.tree_leaves(want)):
    assert (g.shape, g.dtype) == (w.shape, w.dtype), jax.tree_util.keystr(path)


def test_conversion_sets_counts_from_the_legacy_step():
  optimizer = optim.Adam(0.1).create({'w': jnp.ones(2)})
  for _ in range(4):
    optimizer = optimizer.apply_gradient({'w': jnp.ones(2)})
  adam_state = optimizer.optax_state()[0]
  assert isinstance(adam_state, optax.ScaleByAdamState)
  assert int(adam_state.count) == 4 and adam_state.count.dtype == jnp.int32
  np.testing.assert_array_equal(adam_state.mu['w'], optimizer.state.param_states['w'].grad_ema)
  np.testing.assert_array_equal(adam_state.nu['w'], optimizer.state.param_states['w'].grad_sq_ema)


@pytest.mark.filterwarnings('ignore:`flax.traverse_util.Traversal` will be deprecated')
def test_optimizers_without_a_single_optax_state_say_so():
  params = {'w': jnp.ones((2, 2))}
  with pytest.raises(NotImplementedError, match='wrapped optimizer has one'):
    optim.WeightNorm(optim.Momentum(0.1)).create(params).optax_state()
  # A MultiOptimizer (or focus=) has one: the optax.multi_transform state of its groups.
  focus = optim.ModelParamTraversal(lambda path, _: True)
  multi_state = optim.Adam(0.1).create(params, focus=focus).optax_state()
  assert sorted(multi_state.inner_states) == ['0', 'unmatched']
  custom = catalogue.CUSTOM_OPTIMIZERS['custom:SignMomentum'](optim)(0.1)
  with pytest.raises(NotImplementedError, match='per-leaf protocol'):
    custom.create(params).optax_state()


def test_a_transform_that_needs_the_whole_tree_still_works():
  """A subclass whose transform's ``init`` needs the real params tree (``optax.masked`` with a
  mask tree) cannot be traced on one leaf: the whole tree is used instead."""

  class MaskedMomentum(optim.Momentum):

    def build_transform(self, hyper_params):
      return optax.masked(super().build_transform(hyper_params), {'a': True, 'b': True})

  params = {'a': jnp.ones((2, 3)), 'b': jnp.arange(3.0)}
  grads = {'a': jnp.full((2, 3), 0.5), 'b': jnp.ones(3)}
  ours = MaskedMomentum(learning_rate=0.1, beta=0.9).create(params)
  tx = optax.sgd(0.1, momentum=0.9)  # the same update in plain optax
  target, opt_state = params, tx.init(params)
  for _ in range(2):
    ours = ours.apply_gradient(grads)
    updates, opt_state = tx.update(grads, opt_state, target)
    target = optax.apply_updates(target, updates)
  # The subclass steps op by op (it does not declare pure_jax_step): rounding may differ.
  _utils.assert_trees_close(ours.target, target, rtol=1e-6)
  assert isinstance(ours.optax_state(), optax.MaskedState)
