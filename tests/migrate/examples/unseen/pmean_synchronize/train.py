"""j-towns/vdvae-jax (2020): replicas are brought back in line by a pmapped ``lax.pmean`` of the
whole ``(optimizer, ema)`` pair (``p_synchronize``), between pmapped training steps. The pair was
refused FOM107 ('jax.lax.pmean is not a function or class of the given files'): ``pmean`` hands
back a tree of the structure it is given, the optimizer in its place."""
import json

import jax
import jax.numpy as jnp
from flax import jax_utils
from flax import optim
from jax import lax


def apply_fn(params, x):
  return jnp.tanh(x @ params['w'] + params['b'])


def training_step(optimizer, ema, batch):
  def loss_fn(params):
    return ((apply_fn(params, batch['x']) - batch['y']) ** 2).mean()
  loss, grad = jax.value_and_grad(loss_fn)(optimizer.target)
  optimizer = optimizer.apply_gradient(grad)
  ema = jax.tree_util.tree_map(lambda e, p: 0.9 * e + 0.1 * p, ema, optimizer.target)
  return optimizer, ema, loss


p_training_step = jax.pmap(training_step, 'batch')


def synchronize(x):
  return lax.pmean(x, 'batch')


p_synchronize = jax.pmap(synchronize, 'batch')


def main():
  params = {'w': jnp.linspace(-0.5, 0.5, 8).reshape(4, 2), 'b': jnp.zeros(2)}
  optimizer = optim.Adam(learning_rate=1e-2, beta1=0.8).create(params)
  optimizer, ema = jax_utils.replicate((optimizer, params))
  devices = jax.local_device_count()
  x = jnp.cos(jnp.arange(devices * 24.0).reshape(devices, 6, 4))
  batch = {'x': x, 'y': jnp.sin(x[..., :2])}
  losses = []
  for step in range(4):
    # each replica steps on its own shard (no pmean of the gradients), then all are averaged
    optimizer, ema, loss = p_training_step(optimizer, ema, batch)
    optimizer, ema = p_synchronize((optimizer, ema))
    losses.extend(float(v) for v in loss)
  optimizer = jax_utils.unreplicate(optimizer)
  print(json.dumps(losses + [float(v) for tree in (optimizer.target, jax_utils.unreplicate(ema))
                             for leaf in jax.tree_util.tree_leaves(tree)
                             for v in jnp.ravel(leaf)]
                   + [int(optimizer.state.step)]))


if __name__ == '__main__':
  main()
