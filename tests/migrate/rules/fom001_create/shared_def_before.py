import json

import jax
import jax.numpy as jnp
from flax import optim


def loss_fn(params):
  return jnp.sum((params['w'] - 1.0) ** 2)


def main():
  opt_def = optim.Momentum(learning_rate=0.1, beta=0.9)
  opt_a = opt_def.create({'w': jnp.zeros(3)})
  opt_b = opt_def.create({'w': jnp.ones(3) * 3.0})
  trajectory = []
  for _ in range(10):
    opt_a = opt_a.apply_gradient(jax.grad(loss_fn)(opt_a.target))
    opt_b = opt_b.apply_gradient(jax.grad(loss_fn)(opt_b.target))
    trajectory += [float(opt_a.target['w'][0]), float(opt_b.target['w'][0])]
  print(json.dumps(trajectory))


if __name__ == '__main__':
  main()
