"""modax's examples (2021): the def and the optimizer made from it share one module variable,
``optimizer = optim.Adam(...)`` then ``optimizer = optimizer.create(params)``, handed to a
function of the same file whose parameter is named ``optimizer`` too: that parameter is the
function's own variable (it holds the created optimizer), not a read of the module's def."""
import json

import jax
import jax.numpy as jnp
from flax import optim


def train(optimizer, x, y, n):
  losses = []
  for _ in range(n):
    def loss_fn(params):
      return jnp.mean((jnp.tanh(x @ params['w']) - y) ** 2)
    loss, grad = jax.value_and_grad(loss_fn)(optimizer.target)
    optimizer = optimizer.apply_gradient(grad)
    losses.append(float(loss))
  return optimizer, losses


x = jax.random.normal(jax.random.PRNGKey(0), (16, 4))
y = jnp.sin(x[:, :2])
params = {'w': jax.random.normal(jax.random.PRNGKey(1), (4, 2)) * 0.5}
optimizer = optim.Adam(learning_rate=2e-3, beta1=0.99, beta2=0.99)
optimizer = optimizer.create(params)
optimizer, losses = train(optimizer, x, y, 5)
print(json.dumps(losses + [float(v) for v in jnp.ravel(optimizer.target['w'])]))
