import json

import jax
import jax.numpy as jnp
from flax import traverse_util
import optax
from flax.training import train_state


def loss_fn(params):
  return jnp.sum((params['dense']['kernel'] - 1.0) ** 2) + jnp.sum(params['head'] ** 2)


def main():
  params = {'dense': {'kernel': jnp.array([0.5, -1.0, 2.0])}, 'head': jnp.array([0.3])}
  optimizer = train_state.TrainState.create(apply_fn=None, params=params, tx=optax.multi_transform({'0': optax.adam(learning_rate=0.05, b1=0.9, b2=0.999, eps=1e-08), 'unmatched': optax.set_to_zero()}, lambda params: traverse_util.path_aware_map(lambda path, value: '0' if (lambda path, _: path.startswith('/dense'))('/' + '/'.join(path), value) else 'unmatched', params)))
  losses = []
  for _ in range(20):
    loss, grads = jax.value_and_grad(loss_fn)(optimizer.params)
    optimizer = optimizer.apply_gradients(grads=grads)
    losses.append(float(loss))
  print(json.dumps(losses))


if __name__ == '__main__':
  main()
