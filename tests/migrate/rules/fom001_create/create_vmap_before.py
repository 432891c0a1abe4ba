import json

import jax
import jax.numpy as jnp
from flax import optim


def loss_fn(params, x):
  return jnp.sum((params['w'] * x - 1.0) ** 2) + jnp.sum(params['b'] ** 2)


@jax.jit
def train_op(opt: optim.Optimizer, x):
  loss, grads = jax.value_and_grad(loss_fn)(opt.target, x)
  return loss, opt.apply_gradient(grads)


def train_op_n(opt: optim.Optimizer, x, n: int):
  for _ in range(n):
    loss, opt = train_op(opt, x)
  return loss, opt


# One optimizer per row of the batch, as a population is trained.
jv_train_op_n = jax.jit(jax.vmap(train_op_n, in_axes=(0, 0, None)), static_argnums=(2,))


def main():
  batch = {'w': jnp.array([[0.5, -1.0, 2.0], [1.5, 0.0, -2.0]]),
           'b': jnp.array([[0.3], [-0.7]])}
  xs = jnp.array([1.0, 2.0])
  opt_def = optim.Adam(learning_rate=0.1)
  opts = jax.vmap(opt_def.create)(batch)
  trajectory = [float(s) for s in opts.state.step]
  for _ in range(4):
    losses, opts = jv_train_op_n(opts, xs, 5)
    trajectory += [float(v) for v in losses]
  trajectory += [float(s) for s in opts.state.step]
  trajectory += [float(x) for x in opts.target['w'].ravel()]
  print(json.dumps(trajectory))


if __name__ == '__main__':
  main()
