from functools import partial

import jax


def create_update(loss_fn):
  def step(opt, state, loss_fn):
    loss, grad = jax.value_and_grad(loss_fn)(opt.target, state)
    opt = opt.apply_gradient(grad)
    return (opt, state), loss

  return jax.jit(partial(step, loss_fn=loss_fn))
