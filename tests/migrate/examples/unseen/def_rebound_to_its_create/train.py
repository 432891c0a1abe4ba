"""Graph-Representative-Selection's RS-GNN (2022): the def and the optimizer made from it share
one variable, ``optimizer = optim.Adam(...)`` then ``optimizer = optimizer.create(params)``, in a
helper that returns it (with ``jax.device_put``); the training loop jits a step that applies the
gradient, with weight decay."""
import json

import jax
import jax.numpy as jnp
from flax import optim


def create_optimizer(learning_rate, init_params, w_decay=0.0):
  optimizer = optim.Adam(learning_rate=learning_rate, weight_decay=w_decay)
  optimizer = optimizer.create(init_params)
  return jax.device_put(optimizer)


@jax.jit
def train_step(optimizer, x, y):
  def loss_fn(params):
    return jnp.mean((jnp.tanh(x @ params['w1']) @ params['w2'] - y) ** 2)
  loss, grad = jax.value_and_grad(loss_fn)(optimizer.target)
  return optimizer.apply_gradient(grad), loss


def main():
  key = jax.random.PRNGKey(0)
  params = {'w1': jax.random.normal(key, (4, 8)) * 0.5,
            'w2': jax.random.normal(jax.random.PRNGKey(1), (8, 2)) * 0.5}
  optimizer = create_optimizer(1e-2, params, w_decay=1e-3)
  x = jax.random.normal(jax.random.PRNGKey(2), (16, 4))
  y = jnp.sin(x[:, :2])
  losses = []
  for _ in range(5):
    optimizer, loss = train_step(optimizer, x, y)
    losses.append(float(loss))
  print(json.dumps(losses + [float(v) for v in jax.tree_util.tree_leaves(optimizer.target)
                             for v in jnp.ravel(v)]))


if __name__ == '__main__':
  main()
