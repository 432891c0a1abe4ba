"""j-towns/vdvae-jax (2020): an update is skipped when the gradient norm is over a threshold, and
the skip still counts the step (``optimizer.replace(state=optimizer.state.replace(
step=optimizer.state.step + 1))`` in one branch of a ``lax.cond``, ``apply_gradient`` in the
other); the learning rate is a warm-up read from the step. Legacy Adam's bias correction and the
warm-up both read that step, so the skip moves both on. It was refused FOM104 ('sets legacy
internals a TrainState does not have')."""
import json

import jax
import jax.numpy as jnp
from flax import optim
from jax import lax


def apply_fn(params, x):
  return jnp.tanh(x @ params['w'] + params['b'])


def linear_warmup(warmup_iters):
  return lambda i: lax.min(1., (i + 1) / warmup_iters)


@jax.jit
def training_step(optimizer, batch, threshold):
  def loss_fn(params):
    return ((apply_fn(params, batch['x']) - batch['y']) ** 2).mean()
  loss, grad = jax.value_and_grad(loss_fn)(optimizer.target)
  grad_norm = jnp.sqrt(sum(jnp.sum(g ** 2) for g in jax.tree_util.tree_leaves(grad)))
  learning_rate = 0.05 * linear_warmup(4)(optimizer.state.step)

  def skip_update(_):
    # only increment the step
    return optimizer.replace(state=optimizer.state.replace(step=optimizer.state.step + 1))

  def update(_):
    return optimizer.apply_gradient(grad, learning_rate=learning_rate)

  optimizer = lax.cond(grad_norm > threshold, skip_update, update, None)
  return optimizer, loss, grad_norm


def main():
  params = {'w': jnp.linspace(-0.5, 0.5, 8).reshape(4, 2), 'b': jnp.zeros(2)}
  optimizer = optim.Adam(beta1=0.8).create(params)
  x = jnp.cos(jnp.arange(24.0).reshape(6, 4))
  batch = {'x': x, 'y': jnp.sin(x[:, :2])}
  losses = []
  # steps 2 and 3 are skipped (threshold 0), the others update
  for threshold in (1e9, 1e9, 0.0, 0.0, 1e9, 1e9, 1e9):
    optimizer, loss, grad_norm = training_step(optimizer, batch, threshold)
    losses += [float(loss), float(grad_norm)]
  print(json.dumps(losses + [float(v) for leaf in jax.tree_util.tree_leaves(optimizer.target)
                             for v in jnp.ravel(leaf)] + [int(optimizer.state.step)]))


if __name__ == '__main__':
  main()
