"""The learning rate computed on the host from the training loop's counter, which starts at 1
(as in vit_jax's legacy loop), and passed into the jitted step as an argument.

Usage: python schedule_loop_counter.py
Prints (last line) a JSON list: the 24 losses, then every final parameter.
"""
import json
import math

import jax
import jax.numpy as jnp
import numpy as np
from flax import linen as nn
from flax import optim

TOTAL_STEPS = 24
BASE_LR = 0.1


class MLP(nn.Module):

  @nn.compact
  def __call__(self, x):
    x = nn.Dense(10)(x)
    x = nn.gelu(x)
    return nn.Dense(1)(x)


def get_batch():
  rng = np.random.RandomState(3)
  x = rng.normal(size=(48, 5)).astype(np.float32)
  y = np.tanh(x[:, :1] - 2.0 * x[:, 4:5]) + 0.1 * x[:, 2:3]
  return {'x': x, 'y': y.astype(np.float32)}


def cosine_lr(step):
  return 0.5 * BASE_LR * (1.0 + math.cos(math.pi * step / TOTAL_STEPS))


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
def update_fn(optimizer, batch, lr):
  loss, grads = jax.value_and_grad(loss_fn)(optimizer.target, batch)
  optimizer = optimizer.apply_gradient(grads, learning_rate=lr)
  return optimizer, loss


def main():
  params = init_params(MLP(), jnp.ones((1, 5), jnp.float32))
  opt = optim.Momentum(learning_rate=BASE_LR, beta=0.9).create(params)
  batch = get_batch()
  losses = []
  for step in range(1, TOTAL_STEPS + 1):
    lr = cosine_lr(step)
    opt, loss = update_fn(opt, batch, lr)
    losses.append(float(loss))
  leaves = jax.tree_util.tree_leaves(opt.target)
  print(json.dumps(losses + [float(v) for leaf in leaves for v in np.ravel(leaf)]))


if __name__ == '__main__':
  main()
