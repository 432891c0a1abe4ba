import json

import jax.numpy as jnp
from flax import optim


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
  optimizer = optim.Adam(learning_rate=0.05, beta1=0.8).create(params)

  def loss_fn(params):
    return jnp.sum((params['w'] - 1.0) ** 2) + jnp.sum(params['b'] ** 2)

  def loss_and_aux(params):
    loss = loss_fn(params)
    return loss, {'half': 0.5 * loss}

  trajectory = []
  for step in range(20):
    if step % 2:
      new_optimizer, loss = optimizer.optimize(loss_fn)
    else:
      new_optimizer, loss, aux = optimizer.optimize(loss_and_aux)
      loss = loss + 0.0 * aux['half']
    optimizer = new_optimizer
    trajectory.append(float(loss))
  print(json.dumps(trajectory + [float(v) for v in optimizer.target['w']]))


if __name__ == '__main__':
  main()
