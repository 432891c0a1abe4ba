import json

import jax
import jax.numpy as jnp
from flax import traverse_util, linen as nn
import optax
from flax.training import train_state


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

  kernels = lambda path, _: path.endswith('/kernel')
  biases = lambda path, _: path.endswith('/bias')
  optimizer_def = optax.multi_transform({'0': optax.adam(learning_rate=0.05, b1=0.9, b2=0.999, eps=1e-08), '1': optax.sgd(learning_rate=0.1, momentum=0.8, nesterov=False), 'unmatched': optax.set_to_zero()}, lambda params: traverse_util.path_aware_map(lambda path, value: '0' if kernels('/' + '/'.join(path), value) else '1' if biases('/' + '/'.join(path), value) else 'unmatched', params))
  optimizer = train_state.TrainState.create(apply_fn=None, params=params, tx=optimizer_def)
  losses = []
  for _ in range(20):
    loss, grads = jax.value_and_grad(loss_fn)(optimizer.params)
    optimizer = optimizer.apply_gradients(grads=grads)
    losses.append(float(loss))
  print(json.dumps(losses + [float(optimizer.params['scale'][0])]))


if __name__ == '__main__':
  main()
