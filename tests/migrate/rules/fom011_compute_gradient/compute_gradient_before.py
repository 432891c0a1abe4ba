import json

import jax.numpy as jnp
from flax import optim


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
  optimizer = optim.Adam(learning_rate=0.05).create(params)

  def loss_fn(params):
    return jnp.sum((params['w'] - 1.0) ** 2) + jnp.sum(params['b'] ** 2)

  def loss_and_aux(params):
    loss = loss_fn(params)
    return loss, {'half': 0.5 * loss}

  losses = []
  for step in range(20):
    if step % 2:
      loss, grads = optimizer.compute_gradient(loss_fn)
    else:
      loss, aux, grads = optimizer.compute_gradient(loss_and_aux)
      loss = loss + 0.0 * aux['half']
    optimizer = optimizer.apply_gradient(grads)
    losses.append(float(loss))
  print(json.dumps(losses))


if __name__ == '__main__':
  main()
