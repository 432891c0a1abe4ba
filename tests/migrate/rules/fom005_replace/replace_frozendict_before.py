import json

import jax
import jax.numpy as jnp
import numpy as np
from flax import core
from flax import linen as nn
from flax import optim


def main():
  # KAIR-BAIR/dycheck's train step: the loss gives the variables back as a FrozenDict, put in
  # the optimizer before the update (flax 0.5.3's init returned one; today's returns a dict).
  model = nn.Dense(2)
  x = jnp.asarray(np.random.RandomState(0).randn(4, 3), jnp.float32)
  optimizer = optim.Adam(0.05).create(model.init(jax.random.PRNGKey(0), x))

  @jax.jit
  def train_step(optimizer):
    def loss_fn(variables):
      loss = jnp.mean(model.apply(variables, x) ** 2)
      return loss, core.FrozenDict({k: v for k, v in variables.items()})
    (loss, target), grad = jax.value_and_grad(loss_fn, has_aux=True)(optimizer.target)
    optimizer = optimizer.replace(target=target)
    return optimizer.apply_gradient(grad), loss

  losses = []
  for _ in range(20):
    optimizer, loss = train_step(optimizer)
    losses.append(float(loss))
  print(json.dumps(losses))


if __name__ == '__main__':
  main()
