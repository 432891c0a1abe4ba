import json

import jax
import jax.numpy as jnp
import optax
from flax.training import train_state


def loss_fn(params):
  return jnp.sum((params['w'] - 1.0) ** 2)


def main():
  opt_def = optax.sgd(learning_rate=0.1, momentum=0.9, nesterov=False)
  opt_a = train_state.TrainState.create(apply_fn=None, params={'w': jnp.zeros(3)}, tx=opt_def)
  opt_b = train_state.TrainState.create(apply_fn=None, params={'w': jnp.ones(3) * 3.0}, tx=opt_def)
  trajectory = []
  for _ in range(10):
    opt_a = opt_a.apply_gradients(grads=jax.grad(loss_fn)(opt_a.params))
    opt_b = opt_b.apply_gradients(grads=jax.grad(loss_fn)(opt_b.params))
    trajectory += [float(opt_a.params['w'][0]), float(opt_b.params['w'][0])]
  print(json.dumps(trajectory))


if __name__ == '__main__':
  main()
