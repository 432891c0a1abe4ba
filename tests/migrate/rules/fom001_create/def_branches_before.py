import json

import jax
import jax.numpy as jnp
from flax import optim


def loss_fn(params):
  return jnp.sum((params['w'] - 1.0) ** 2) + jnp.sum(params['b'] ** 2)


def get_optimizer_def(config):
  if config['optimizer'] == 'adam':
    opt_def = optim.Adam(learning_rate=config['lr'], beta1=0.8)
  elif config['optimizer'] == 'momentum':
    opt_def = optim.Momentum(learning_rate=config['lr'], beta=0.8)
  else:
    raise ValueError(config['optimizer'])
  return opt_def


def create_optimizer(config, params):
  return get_optimizer_def(config).create(params)


@jax.jit
def train_step(optimizer, lr):
  loss, grads = jax.value_and_grad(loss_fn)(optimizer.target)
  optimizer = optimizer.apply_gradient(grads, learning_rate=lr)
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
