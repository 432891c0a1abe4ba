import json

import jax
import jax.numpy as jnp
import optax
from flax.training import train_state


def loss_fn(params):
  return jnp.sum((params['w'] - 1.0) ** 2) + jnp.sum(params['b'] ** 2)


@jax.jit
def train_step(optimizer, lr):
  loss, grads = jax.value_and_grad(loss_fn)(optimizer.params)
  optimizer = optimizer.replace(opt_state=optimizer.opt_state._replace(hyperparams=dict(optimizer.opt_state.hyperparams, learning_rate=lr))).apply_gradients(grads=grads)
  return optimizer, loss


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
  optimizer = train_state.TrainState.create(apply_fn=None, params=params, tx=optax.inject_hyperparams(optax.sgd, static_args=('momentum', 'nesterov', 'accumulator_dtype'), hyperparam_dtype=jnp.float32)(learning_rate=0.0, momentum=0.8, nesterov=False))
  losses = []
  for epoch in range(4):
    for _ in range(5):
      optimizer, loss = train_step(optimizer, 0.1 * 0.5 ** epoch)
      losses.append(float(loss))
  print(json.dumps(losses))


if __name__ == '__main__':
  main()
