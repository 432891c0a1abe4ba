import json

import jax
import jax.numpy as jnp
from flax import linen as nn
from flax import optim


class MLP(nn.Module):

  @nn.compact
  def __call__(self, x):
    x = nn.tanh(nn.Dense(4)(x))
    scale = self.param('scale', nn.initializers.ones, (1,))
    return nn.Dense(1)(x) * scale


def main():
  model = MLP()
  x = jnp.linspace(-1.0, 1.0, 12, dtype=jnp.float32).reshape(6, 2)
  y = jnp.sin(3.0 * x[:, :1])
  params = model.init(jax.random.PRNGKey(0), x)['params']

  def loss_fn(params):
    return jnp.mean((model.apply({'params': params}, x) - y) ** 2)

  kernels = optim.ModelParamTraversal(lambda path, _: path.endswith('/kernel'))
  biases = optim.ModelParamTraversal(lambda path, _: path.endswith('/bias'))
  optimizer_def = optim.MultiOptimizer(
      (kernels, optim.Adam(learning_rate=0.05)),
      (biases, optim.Momentum(learning_rate=0.1, beta=0.8)))
  optimizer = optimizer_def.create(params)
  losses = []
  for _ in range(20):
    loss, grads = jax.value_and_grad(loss_fn)(optimizer.target)
    optimizer = optimizer.apply_gradient(grads)
    losses.append(float(loss))
  print(json.dumps(losses + [float(optimizer.target['scale'][0])]))


if __name__ == '__main__':
  main()
