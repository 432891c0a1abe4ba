"""One helper reads ``state_dict()`` of an Adam and of a Momentum (NeSF's train state field
holds an Adam in training and a Momentum in a test): one object of two kinds of def, each read
logged with its own legacy keys."""
import json

import jax
import jax.numpy as jnp
import numpy as np
from flax import optim
from flax import traverse_util


def loss_fn(params, x, y):
  return jnp.mean((x @ params['w'] + params['b'] - y) ** 2)


@jax.jit
def train_step(optimizer, x, y):
  loss, grad = jax.value_and_grad(loss_fn)(optimizer.target, x, y)
  return optimizer.apply_gradient(grad), loss


def histograms(optimizer):
  flat = traverse_util.flatten_dict(optimizer.state_dict())
  return {'/'.join(k): [float(v) for v in jnp.ravel(jnp.asarray(w))] for k, w in flat.items()}


def main():
  x = jax.random.normal(jax.random.PRNGKey(1), (8, 3))
  y = jnp.cos(x[:, :1])
  params = {'w': jnp.full((3, 1), 0.3), 'b': jnp.zeros((1,))}
  adam = optim.Adam(learning_rate=0.02).create(params)
  momentum = optim.Momentum(learning_rate=0.05, beta=0.7).create(params)
  # the step's leaf, before any step and after jitted ones: legacy's is an int32 array
  steps = [np.asarray(adam.state_dict()['state']['step']).dtype.name]
  values = []
  for _ in range(3):
    adam, loss = train_step(adam, x, y)
    momentum, loss2 = train_step(momentum, x, y)
    values += [float(loss), float(loss2)]
  logged = [histograms(adam), histograms(momentum)]
  steps.append(np.asarray(adam.state_dict()['state']['step']).dtype.name)
  print(json.dumps([sorted(h) for h in logged] + [steps]))
  print(json.dumps(values + [v for h in logged for key in sorted(h) for v in h[key]]))


if __name__ == '__main__':
  main()
