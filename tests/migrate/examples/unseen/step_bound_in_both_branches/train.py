"""tonywu95/flax's latent transformer (laint, 2021): under ``if config.debug:`` the train step
is ``jax.vmap`` of a ``functools.partial`` of it, otherwise ``jax.pmap`` of the same partial,
both bound to ``p_train_step``; the loop calls it with the replicated optimizer. It was refused
FOM107 ('p_train_step is bound more than once in its scope'), every site left legacy. Both
branches run here, each from a fresh optimizer."""
import functools
import json

import jax
import jax.numpy as jnp
from flax import jax_utils
from flax import optim


def train_step(optimizer, batch, learning_rate_fn, label_smoothing=0.0):
  step = optimizer.state.step

  def loss_fn(params):
    pred = jnp.tanh(batch['x'] @ params['w'] + params['b'])
    return ((pred - batch['y'] * (1.0 - label_smoothing)) ** 2).mean()

  loss, grad = jax.value_and_grad(loss_fn)(optimizer.target)
  grad = jax.lax.pmean(grad, 'batch')
  optimizer = optimizer.apply_gradient(grad, learning_rate=learning_rate_fn(step))
  return optimizer, jax.lax.pmean(loss, 'batch')


def run(debug):
  params = {'w': jnp.linspace(-0.5, 0.5, 8).reshape(4, 2), 'b': jnp.zeros(2)}
  optimizer = jax_utils.replicate(optim.Adam(learning_rate=1e-2, beta1=0.8).create(params))
  learning_rate_fn = lambda step: 1e-2 / (1.0 + step)
  if debug:
    p_train_step = jax.vmap(
        functools.partial(train_step, learning_rate_fn=learning_rate_fn, label_smoothing=0.1),
        axis_name='batch')
  else:
    p_train_step = jax.pmap(
        functools.partial(train_step, learning_rate_fn=learning_rate_fn, label_smoothing=0.1),
        axis_name='batch')
  devices = jax.local_device_count()
  x = jnp.cos(jnp.arange(devices * 24.0).reshape(devices, 6, 4))
  batch = {'x': x, 'y': jnp.sin(x[..., :2])}
  losses = []
  for _ in range(4):
    optimizer, loss = p_train_step(optimizer, batch)
    losses.append(float(loss[0]))
  target = jax_utils.unreplicate(optimizer).target
  return losses + [float(v) for leaf in jax.tree_util.tree_leaves(target) for v in jnp.ravel(leaf)]


def main():
  print(json.dumps(run(debug=True) + run(debug=False)))


if __name__ == '__main__':
  main()
