"""An optimizer defined with `learning_rate=None`: every `apply_gradient` passes the learning
rate, here from a per-epoch rule on the host (halved each epoch; the inner loop's counter
restarts every epoch).

Usage: python learning_rate_none.py
Prints (last line) a JSON list: the 24 losses (4 epochs x 6 steps), then every final parameter.
"""
import json

import jax
import jax.numpy as jnp
import numpy as np
from flax import linen as nn
from flax import optim

NUM_EPOCHS = 4
STEPS_PER_EPOCH = 6
BASE_LR = 0.01


class MLP(nn.Module):

  @nn.compact
  def __call__(self, x):
    x = nn.Dense(8)(x)
    x = nn.swish(x)
    return nn.Dense(1)(x)


def get_batch(epoch, i):
  rng = np.random.RandomState(1000 * epoch + i)
  x = rng.normal(size=(20, 3)).astype(np.float32)
  y = x[:, :1] ** 2 - x[:, 1:2] + 0.5 * x[:, 2:]
  return {'x': x, 'y': y.astype(np.float32)}


def init_params(model, *inputs, **kwargs):
  """The model's params, with fixed values drawn by numpy (as from a pretrained checkpoint)."""
  params = model.init(jax.random.PRNGKey(0), *inputs, **kwargs)['params']
  rng = np.random.RandomState(0)
  return jax.tree_util.tree_map(
      lambda p: jnp.asarray(rng.normal(scale=0.4, size=p.shape), jnp.float32), params)


def loss_fn(params, batch):
  preds = MLP().apply({'params': params}, batch['x'])
  return jnp.mean((preds - batch['y']) ** 2)


@jax.jit
def train_step(optimizer, batch, learning_rate):
  loss, grads = jax.value_and_grad(loss_fn)(optimizer.target, batch)
  optimizer = optimizer.apply_gradient(grads, learning_rate=learning_rate)
  return optimizer, loss


def main():
  params = init_params(MLP(), jnp.ones((1, 3), jnp.float32))
  optimizer = optim.RMSProp(learning_rate=None, beta2=0.9).create(params)
  losses = []
  for epoch in range(NUM_EPOCHS):
    lr = BASE_LR * 0.5 ** epoch
    for i in range(STEPS_PER_EPOCH):
      optimizer, loss = train_step(optimizer, get_batch(epoch, i), lr)
      losses.append(float(loss))
  leaves = jax.tree_util.tree_leaves(optimizer.target)
  print(json.dumps(losses + [float(v) for leaf in leaves for v in np.ravel(leaf)]))


if __name__ == '__main__':
  main()
