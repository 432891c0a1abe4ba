"""Weight histograms from ``optimizer.state_dict()`` (NeSF's eval loop): every flattened key of
legacy's state dict and its values, for an Adam whose learning rate is set per step under
``jax.jit`` and a Momentum with weight decay, each printed after a few steps."""
import json

import flax
import jax
import jax.numpy as jnp
from flax import traverse_util


def loss_fn(params, x, y):
  h = jnp.tanh(x @ params['dense']['kernel'] + params['dense']['bias'])
  return jnp.mean((h @ params['out'] - y) ** 2)


@jax.jit
def train_step(optimizer, x, y, lr):
  loss, grad = jax.value_and_grad(loss_fn)(optimizer.target, x, y)
  return optimizer.apply_gradient(grad, learning_rate=lr), loss


@jax.jit
def momentum_step(optimizer, x, y):
  loss, grad = jax.value_and_grad(loss_fn)(optimizer.target, x, y)
  return optimizer.apply_gradient(grad), loss


def histograms(opt_state):
  """What a summary writer would log: each key's values."""
  out = {}
  for var_name, weight in traverse_util.flatten_dict(opt_state).items():
    out['/'.join(var_name)] = [float(v) for v in jnp.ravel(jnp.asarray(weight))]
  return out


def main():
  x = jax.random.normal(jax.random.PRNGKey(0), (8, 3))
  y = jnp.sin(x[:, :1])
  params = flax.core.freeze({'dense': {'kernel': jnp.full((3, 4), 0.2), 'bias': jnp.zeros(4)},
                             'out': jnp.full((4, 1), 0.1)})
  adam = flax.optim.Adam(learning_rate=0.01, beta2=0.99).create(params)
  momentum = flax.optim.Momentum(learning_rate=0.05, beta=0.8, weight_decay=1e-3).create(params)
  values = []
  for i in range(4):
    adam, loss = train_step(adam, x, y, 0.01 / (i + 1))
    momentum, loss2 = momentum_step(momentum, x, y)
    values += [float(loss), float(loss2)]
  opt_state = adam.state_dict()
  logged = {'adam': histograms(opt_state), 'momentum': histograms(momentum.state_dict())}
  print(json.dumps(sorted(logged['adam']) + sorted(logged['momentum'])))
  print(json.dumps(values + [v for name in ('adam', 'momentum')
                             for key in sorted(logged[name]) for v in logged[name][key]]))


if __name__ == '__main__':
  main()
