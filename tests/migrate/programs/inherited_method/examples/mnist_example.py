import jax
import jax.numpy as jnp
import flax.linen as nn
import flax.optim as optim

from pkg.operator.flax_operator import FlaxTrainingOperator


class MnistOperator(FlaxTrainingOperator):
  def setup(self):
    model = nn.Dense(10)
    params = model.init(jax.random.PRNGKey(0), jnp.ones((1, 784)))
    optimizer = optim.Adam(learning_rate=1e-3).create(params)
    self.register(model=model, optimizer=optimizer, criterion=lambda out, b: jnp.sum(out))
