import json

import jax
import jax.numpy as jnp
import optax
from flax.training import train_state

ADAM_KWARGS = {
    'beta1': 0.8,
    'beta2': 0.95,
    'eps': 1e-6,
}


def loss_fn(params):
  return jnp.sum((params['w'] - 1.0) ** 2) + jnp.sum(params['b'] ** 2)


@jax.jit
def train_step(optimizer, lr):
  loss, grads = jax.value_and_grad(loss_fn)(optimizer.params)
  optimizer = optimizer.replace(opt_state=optimizer.opt_state._replace(hyperparams=dict(optimizer.opt_state.hyperparams, learning_rate=lr))).apply_gradients(grads=grads)
  return optimizer, loss


@jax.jit
def momentum_step(optimizer):
  loss, grads = jax.value_and_grad(loss_fn)(optimizer.params)
  return optimizer.apply_gradients(grads=grads), loss


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
  optimizer = train_state.TrainState.create(apply_fn=None, params=params, tx=optax.inject_hyperparams(optax.adam, static_args=('b1', 'b2', 'eps', 'eps_root', 'mu_dtype', 'nesterov'), hyperparam_dtype=jnp.float32)(learning_rate=0.0, b1=0.8, b2=0.95, eps=1e-6))
  base = 0.05
  momentum_kwargs = dict(learning_rate=base * 2, beta=0.8, nesterov=True)
  other = train_state.TrainState.create(apply_fn=None, params=params, tx=optax.sgd(learning_rate=momentum_kwargs['learning_rate'], momentum=0.8, nesterov=True))
  losses = []
  for step in range(20):
    optimizer, loss = train_step(optimizer, 0.1 / (1 + step))
    other, other_loss = momentum_step(other)
    losses.extend([float(loss), float(other_loss)])
  print(json.dumps(losses))


if __name__ == '__main__':
  main()
