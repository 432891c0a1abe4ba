import json

import jax
import jax.numpy as jnp
import optax
from flax.training import train_state


def loss_fn(params):
  return jnp.sum((params['w'] - 1.0) ** 2) + jnp.sum(params['b'] ** 2)


def get_optimizer_def(config):
  if config['optimizer'] == 'adam':
    opt_def = optax.inject_hyperparams(optax.adam, static_args=('b1', 'b2', 'eps', 'eps_root', 'mu_dtype', 'nesterov'), hyperparam_dtype=jnp.float32)(learning_rate=config['lr'], b1=0.8, b2=0.999, eps=1e-08)
  elif config['optimizer'] == 'momentum':
    opt_def = optax.inject_hyperparams(optax.sgd, static_args=('momentum', 'nesterov', 'accumulator_dtype'), hyperparam_dtype=jnp.float32)(learning_rate=config['lr'], momentum=0.8, nesterov=False)
  else:
    raise ValueError(config['optimizer'])
  return opt_def


def create_optimizer(config, params):
  return train_state.TrainState.create(apply_fn=None, params=params, tx=get_optimizer_def(config))


@jax.jit
def train_step(optimizer, lr):
  loss, grads = jax.value_and_grad(loss_fn)(optimizer.params)
  optimizer = optimizer.replace(opt_state=optimizer.opt_state._replace(hyperparams=dict(optimizer.opt_state.hyperparams, learning_rate=lr))).apply_gradients(grads=grads)
  return optimizer, loss


def main():
  losses = []
  for kind in ('adam', 'momentum'):
    params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
    optimizer = create_optimizer({'optimizer': kind, 'lr': 0.1}, params)
    for step in range(6):
      optimizer, loss = train_step(optimizer, 0.1 * 0.5 ** (step // 2))
      losses.append(float(loss))
  print(json.dumps(losses))


if __name__ == '__main__':
  main()
