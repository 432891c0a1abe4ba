import json

import jax
import jax.numpy as jnp
import optax
from flax.training import train_state


def lr_fn(step):
  return 0.1 / (1.0 + step)


def loss_fn(params, x):
  return jnp.sum((params['w'] * x - 1.0) ** 2)


@jax.jit
def train_step(optimizer, x):
  step = optimizer.step
  grads = jax.grad(loss_fn)(optimizer.params, x)
  optimizer = optimizer.replace(opt_state=optimizer.opt_state._replace(hyperparams=dict(optimizer.opt_state.hyperparams, learning_rate=lr_fn(step)))).apply_gradients(grads=grads)
  grads = jax.grad(loss_fn)(optimizer.params, 2.0 * x)
  optimizer = optimizer.replace(opt_state=optimizer.opt_state._replace(hyperparams=dict(optimizer.opt_state.hyperparams, learning_rate=lr_fn(step)))).apply_gradients(grads=grads)
  return optimizer


def main():
  optimizer = train_state.TrainState.create(apply_fn=None, params={'w': jnp.ones(3)}, tx=optax.inject_hyperparams(optax.sgd, static_args=('momentum', 'nesterov', 'accumulator_dtype'), hyperparam_dtype=jnp.float32)(learning_rate=0.1))
  trajectory = []
  for _ in range(10):
    optimizer = train_step(optimizer, jnp.arange(3.0))
    trajectory.extend(float(v) for v in optimizer.params['w'])
  print(json.dumps(trajectory))


if __name__ == '__main__':
  main()
