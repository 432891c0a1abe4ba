import json
import os
import pickle
import tempfile

import jax
import jax.numpy as jnp
from flax import jax_utils
from flax import optim


def loss_fn(params, x):
  return jnp.sum((params['w'] * x - 1.0) ** 2) + jnp.sum(params['b'] ** 2)


def train_step(state, x, lr):
  loss, grads = jax.value_and_grad(loss_fn)(state.target, x)
  grads = jax.lax.pmean(grads, axis_name='batch')
  state = state.apply_gradient(grads, learning_rate=lr)
  return state, jax.lax.pmean(loss, axis_name='batch')


p_train_step = jax.pmap(train_step, axis_name='batch', in_axes=(0, 0, None))


def main():
  folder = tempfile.mkdtemp()
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
  devices = jax.local_device_count()
  x = 1.0 + 0.25 * jnp.arange(devices * 3, dtype=jnp.float32).reshape(devices, 3)
  state = optim.Adam(learning_rate=0.0, eps=1e-15).create(params)
  state = jax_utils.replicate(state)
  losses = []
  for i in range(1, 21):
    lr = 0.05 / i ** 0.5
    state, loss = p_train_step(state, x, lr)
    losses.append(float(loss[0]))
    if i % 5 == 0:   # as a NeRF's training loop keeps its state every N steps
      unreplicated_state = jax_utils.unreplicate(state)
      pickle.dump(unreplicated_state, open(os.path.join(folder, f'state{i}.pkl'), 'wb'))
  # Back to the state of step 10, trained on from there.
  unreplicated_state = pickle.load(open(os.path.join(folder, 'state10.pkl'), 'rb'))
  weights = [float(v) for v in unreplicated_state.target['w']]
  state = jax_utils.replicate(unreplicated_state)
  for i in range(11, 21):
    state, loss = p_train_step(state, x, 0.05 / i ** 0.5)
    losses.append(float(loss[0]))
  print(json.dumps(losses + weights + [float(v) for v in jax_utils.unreplicate(state).target['w']]))


if __name__ == '__main__':
  main()
