"""The def's keywords from a parameter, its learning rate set at every update (injected): a key
set without one is legacy's ``learning_rate=None`` def, which every update sets."""
import json

import jax
import jax.numpy as jnp
from flax import optim


def make(params, optim_kwargs):
  return optim.Momentum(**optim_kwargs).create(params)


@jax.jit
def step(opt, x, y, lr):
  loss, grad = jax.value_and_grad(
      lambda p: jnp.mean((x @ p['w'] + p['b'] - y) ** 2))(opt.target)
  return opt.apply_gradient(grad, learning_rate=lr), loss


def main():
  x = jax.random.normal(jax.random.PRNGKey(1), (8, 3))
  y = jnp.cos(x[:, :1])
  params = {'w': jnp.full((3, 1), -0.2), 'b': jnp.ones((1,))}
  out = []
  for kwargs in ({'learning_rate': 0.3, 'beta': 0.5}, {'weight_decay': 0.05},
                 {'beta': 0.8, 'nesterov': True}):
    opt = make(params, kwargs)
    for i in range(6):
      opt, loss = step(opt, x, y, 0.1 / (1 + i))
      out.append(float(loss))
    out += [float(v) for leaf in jax.tree_util.tree_leaves(opt.target) for v in leaf.ravel()]
  try:
    make(params, {'learning_rate': 0.1, 'beta1': 0.9})
    out.append(0.0)
  except TypeError:
    out.append(1.0)
  print(json.dumps(out))


if __name__ == '__main__':
  main()
