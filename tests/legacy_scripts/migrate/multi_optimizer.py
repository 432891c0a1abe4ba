"""Two parameter groups with their own optimizers through `optim.MultiOptimizer` and
`ModelParamTraversal`; the middle layer is selected by neither traversal, so legacy keeps it
frozen.

Usage: python multi_optimizer.py
Prints (last line) a JSON list: the 20 losses, then every final parameter.
"""
import json

import jax
import jax.numpy as jnp
import numpy as np
from flax import linen as nn
from flax import optim

NUM_STEPS = 20


class Model(nn.Module):

  @nn.compact
  def __call__(self, x):
    x = nn.tanh(nn.Dense(8, name='encoder')(x))
    x = nn.tanh(nn.Dense(6, name='hidden')(x))
    return nn.Dense(1, name='head')(x)


def get_batch():
  rng = np.random.RandomState(6)
  x = rng.normal(size=(24, 4)).astype(np.float32)
  y = np.cos(x[:, :1]) * x[:, 1:2] - x[:, 3:]
  return {'x': x, 'y': y.astype(np.float32)}


def init_params(model, *inputs, **kwargs):
  """The model's params, with fixed values drawn by numpy (as from a pretrained checkpoint)."""
  params = model.init(jax.random.PRNGKey(0), *inputs, **kwargs)['params']
  rng = np.random.RandomState(0)
  return jax.tree_util.tree_map(
      lambda p: jnp.asarray(rng.normal(scale=0.4, size=p.shape), jnp.float32), params)


def loss_fn(params, batch):
  preds = Model().apply({'params': params}, batch['x'])
  return jnp.mean((preds - batch['y']) ** 2)


@jax.jit
def train_step(optimizer, batch):
  loss, grads = jax.value_and_grad(loss_fn)(optimizer.target, batch)
  return optimizer.apply_gradient(grads), loss


def main():
  params = init_params(Model(), jnp.ones((1, 4), jnp.float32))
  encoder = optim.ModelParamTraversal(lambda path, _: path.startswith('/encoder/'))
  head = optim.ModelParamTraversal(lambda path, _: path.startswith('/head/'))
  optimizer_def = optim.MultiOptimizer(
      (encoder, optim.Adam(learning_rate=0.01)),
      (head, optim.Momentum(learning_rate=0.05, beta=0.9)))
  optimizer = optimizer_def.create(params)
  batch = get_batch()
  losses = []
  for _ in range(NUM_STEPS):
    optimizer, loss = train_step(optimizer, batch)
    losses.append(float(loss))
  leaves = jax.tree_util.tree_leaves(optimizer.target)
  print(json.dumps(losses + [float(v) for leaf in leaves for v in np.ravel(leaf)]))


if __name__ == '__main__':
  main()
