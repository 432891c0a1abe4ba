from absl.testing import absltest
from absl.testing import parameterized
from flax import optim
import jax.numpy as jnp
import optax

LR = 0.1


class EquivalenceTest(parameterized.TestCase):

  @parameterized.named_parameters(
      ('sgd', optax.sgd(LR), optim.GradientDescent(LR)),
      ('adam', optax.adam(LR), optim.Adam(LR)),
  )
  def test_equivalence(self, optax_optimizer, flax_optimizer):
    params = (jnp.array([1., 2.]),)
    grads = (jnp.array([0.3, 5.]),)
    flax_optimizer = flax_optimizer.create(params)
    for _ in range(3):
      flax_optimizer = flax_optimizer.apply_gradient(grads)
    flax_params = flax_optimizer.target
    state = optax_optimizer.init(params)
    optax_params = params
    for _ in range(3):
      updates, state = optax_optimizer.update(grads, state, optax_params)
      optax_params = optax.apply_updates(optax_params, updates)
    for a, b in zip(flax_params, optax_params):
      self.assertTrue(jnp.allclose(a, b, rtol=1e-4))


if __name__ == '__main__':
  absltest.main()
