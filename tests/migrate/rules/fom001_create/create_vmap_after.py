import json

import jax
import jax.numpy as jnp
import optax
from flax.training import train_state


def loss_fn(params, x):
  return jnp.sum((params['w'] * x - 1.0) ** 2) + jnp.sum(params['b'] ** 2)


@jax.jit
def train_op(opt: train_state.TrainState, x):
  loss, grads = jax.value_and_grad(loss_fn)(opt.params, x)
  return loss, opt.apply_gradients(grads=grads)


def train_op_n(opt: train_state.TrainState, x, n: int):
  for _ in range(n):
    loss, opt = train_op(opt, x)
  return loss, opt


# One optimizer per row of the batch, as a population is trained.
jv_train_op_n = jax.jit(jax.vmap(train_op_n, in_axes=(0, 0, None)), static_argnums=(2,))


def main():
  batch = {'w': jnp.array([[0.5, -1.0, 2.0], [1.5, 0.0, -2.0]]),
           'b': jnp.array([[0.3], [-0.7]])}
  xs = jnp.array([1.0, 2.0])
  opt_def = optax.adam(learning_rate=0.1, b1=0.9, b2=0.999, eps=1e-08)
  opts = jax.vmap(lambda params: train_state.TrainState.create(apply_fn=None, params=params, tx=opt_def))(batch)
  trajectory = [float(s) for s in opts.step]
  for _ in range(4):
    losses, opts = jv_train_op_n(opts, xs, 5)
    trajectory += [float(v) for v in losses]
  trajectory += [float(s) for s in opts.step]
  trajectory += [float(x) for x in opts.params['w'].ravel()]
  print(json.dumps(trajectory))


if __name__ == '__main__':
  main()
