"""sezaiacers/diffusion (a DDPM, 2022): the step factory ends ``return jax.pmap(update_fn,
axis_name='batch')`` (not the decorator form), and the training loop calls what it returns with
the replicated optimizer and a learning rate per step. It was refused FOM107 ('not a function or
class of the given files: a library call'); the decorated twin migrated whole."""
import json

import jax
import jax.numpy as jnp
from flax import jax_utils
from flax import optim


def make_update_fn(apply_fn, lr_fn):

  def update_fn(opt, step, batch):
    def loss_fn(params):
      return ((apply_fn(params, batch['x']) - batch['y']) ** 2).mean()
    loss, grad = jax.value_and_grad(loss_fn)(opt.target)
    grad = jax.lax.pmean(grad, 'batch')
    opt = opt.apply_gradient(grad, learning_rate=lr_fn(step))
    return opt, loss

  return jax.pmap(update_fn, axis_name='batch')


def apply_fn(params, x):
  return jnp.tanh(x @ params['w'] + params['b'])


def main():
  params = {'w': jnp.linspace(-0.5, 0.5, 8).reshape(4, 2), 'b': jnp.zeros(2)}
  opt_repl = jax_utils.replicate(optim.Adam(learning_rate=1e-2, beta1=0.8).create(params))
  update_fn_repl = make_update_fn(apply_fn, lambda step: 1e-2 / (1.0 + step))
  devices = jax.local_device_count()
  x = jnp.cos(jnp.arange(devices * 24.0).reshape(devices, 6, 4))
  batch = {'x': x, 'y': jnp.sin(x[..., :2])}
  losses = []
  for step in range(5):
    opt_repl, loss = update_fn_repl(opt_repl, jax_utils.replicate(jnp.float32(step)), batch)
    losses.append(float(loss[0]))
  target = jax_utils.unreplicate(opt_repl).target
  print(json.dumps(losses + [float(v) for leaf in jax.tree_util.tree_leaves(target)
                             for v in jnp.ravel(leaf)]))


if __name__ == '__main__':
  main()
