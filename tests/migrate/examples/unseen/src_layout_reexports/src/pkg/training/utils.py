from functools import partial

from jax import jit, value_and_grad


def create_update(loss_fn, scale):
  def step(opt, loss_fn, scale):
    loss, grad = value_and_grad(loss_fn)(opt.target, scale)
    return opt.apply_gradient(grad), loss

  return jit(partial(step, loss_fn=loss_fn, scale=scale))
