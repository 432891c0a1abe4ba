import json

import jax.numpy as jnp
import jax
import optax
from flax.training import train_state


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
  optimizer = train_state.TrainState.create(apply_fn=None, params=params, tx=optax.adam(learning_rate=0.05, b1=0.8, b2=0.999, eps=1e-08))

  def loss_fn(params):
    return jnp.sum((params['w'] - 1.0) ** 2) + jnp.sum(params['b'] ** 2)

  def loss_and_aux(params):
    loss = loss_fn(params)
    return loss, {'half': 0.5 * loss}

  trajectory = []
  for step in range(20):
    if step % 2:
      loss, grads = jax.value_and_grad(loss_fn)(optimizer.params)
      new_optimizer = optimizer.apply_gradients(grads=grads)
    else:
      (loss, aux), grads = jax.value_and_grad(loss_and_aux, has_aux=True)(optimizer.params)
      new_optimizer = optimizer.apply_gradients(grads=grads)
      loss = loss + 0.0 * aux['half']
    optimizer = new_optimizer
    trajectory.append(float(loss))
  print(json.dumps(trajectory + [float(v) for v in optimizer.params['w']]))


if __name__ == '__main__':
  main()
