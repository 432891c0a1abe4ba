"""nanofi/equalized-impact-fair-regression's util/learn.py (2022): the project's own function
named ``create`` takes the def and makes the optimizer; a step beside it applies a gradient."""
import jax


def create(opt_def, params):
  return opt_def.create(params)


def step(optimizer, loss_fn):
  loss, grad = jax.value_and_grad(loss_fn)(optimizer.target)
  return optimizer.apply_gradient(grad), loss
