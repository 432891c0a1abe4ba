"""A donated jitted step updates params and state in place: no second copy of either.

XLA's ``memory_analysis()`` of the compiled step is a property of the program, not a timing,
so it cannot flake: every input byte of the optimizer is aliased to an output, and the
temporaries stay below the largest leaf.
"""
import jax
import jax.numpy as jnp
import optax
import pytest

import flax_optim_compat as optim

pytestmark = pytest.mark.filterwarnings(
    'ignore:`flax.traverse_util.Traversal` will be deprecated:DeprecationWarning')


def _params():
  return {'w': jnp.ones((256, 256)), 'b': jnp.ones((256,)), 'k': {'x': jnp.ones((64, 64))}}


def _multi():
  pick = lambda f: optim.ModelParamTraversal(lambda path, _: f(path))
  return optim.MultiOptimizer((pick(lambda p: 'w' in p), optim.Adam(0.1)),
                              (pick(lambda p: 'w' not in p), optim.Momentum(0.1)))


@pytest.mark.parametrize('make', [
    lambda: optim.GradientDescent(0.1), lambda: optim.Momentum(0.1, nesterov=True),
    lambda: optim.Adam(0.1, weight_decay=0.01), lambda: optim.RMSProp(0.1, centered=True),
    _multi, lambda: optim.from_optax(optax.adamw, learning_rate=0.1),
], ids=['GradientDescent', 'Momentum', 'Adam', 'RMSProp', 'MultiOptimizer', 'from_optax'])
def test_donated_step_aliases_every_buffer(make):
  params = _params()
  grads = jax.tree_util.tree_map(lambda p: 0.5 * p, params)
  optimizer = make().create(params)
  step = jax.jit(lambda o, g: o.apply_gradient(g), donate_argnums=0)
  memory = step.lower(optimizer, grads).compile().memory_analysis()
  if memory is None:
    pytest.skip('this backend gives no memory analysis')
  leaves = [x for x in jax.tree_util.tree_leaves(optimizer) if x.nbytes]
  # from_optax's injected hyper-parameters are scalars recomputed each step: a few bytes.
  assert memory.alias_size_in_bytes >= sum(x.nbytes for x in leaves) - 64
  assert memory.temp_size_in_bytes <= max(x.nbytes for x in leaves)
