"""A step function whose state is a parameter (``train_step(optimizer, state, ...)``), called
with an instance of the program's own class, on which it calls a method that updates the
optimizer: the method is that class's, decided from the step's callers."""
import json

import jax
import jax.numpy as jnp
from flax import optim

import state as state_lib


def train_step(optimizer, state, x, y):
  def loss_fn(params):
    return jnp.mean((x @ params['w'] + params['b'] - y) ** 2)
  loss, grad = jax.value_and_grad(loss_fn)(optimizer.target)
  return state.take_step(optimizer, grad), loss


def main():
  x = jax.random.normal(jax.random.PRNGKey(0), (8, 3))
  y = jnp.sin(x[:, :1])
  optimizer = optim.Adam(learning_rate=0.0, beta1=0.8).create(
      {'w': jnp.full((3, 1), 0.3), 'b': jnp.zeros((1,))})
  state = state_lib.State(lr=0.01)
  losses = []
  for _ in range(5):
    optimizer, loss = train_step(optimizer, state, x, y)
    losses.append(float(loss))
  final = [float(v) for leaf in jax.tree_util.tree_leaves(optimizer.target) for v in leaf.ravel()]
  print(json.dumps(losses + final + [int(optimizer.state.step)]))


if __name__ == '__main__':
  main()
