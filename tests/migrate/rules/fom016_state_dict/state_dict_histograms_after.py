"""Weight histograms from ``optimizer.state_dict()`` (NeSF's eval loop): every flattened key of
legacy's state dict and its values, for an Adam whose learning rate is set per step under
``jax.jit`` and a Momentum with weight decay, each printed after a few steps."""
import json

import flax
import jax
import jax.numpy as jnp
from flax import traverse_util
import optax
from flax.training import train_state


def loss_fn(params, x, y):
  h = jnp.tanh(x @ params['dense']['kernel'] + params['dense']['bias'])
  return jnp.mean((h @ params['out'] - y) ** 2)


@jax.jit
def train_step(optimizer, x, y, lr):
  loss, grad = jax.value_and_grad(loss_fn)(optimizer.params, x, y)
  return optimizer.replace(opt_state=optimizer.opt_state._replace(hyperparams=dict(optimizer.opt_state.hyperparams, learning_rate=lr))).apply_gradients(grads=grad), loss


@jax.jit
def momentum_step(optimizer, x, y):
  loss, grad = jax.value_and_grad(loss_fn)(optimizer.params, x, y)
  return optimizer.apply_gradients(grads=grad), loss


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
  adam = train_state.TrainState.create(apply_fn=None, params=params, tx=optax.inject_hyperparams(optax.adam, static_args=('b1', 'b2', 'eps', 'eps_root', 'mu_dtype', 'nesterov'), hyperparam_dtype=jnp.float32)(learning_rate=0.01, b1=0.9, b2=0.99, eps=1e-08))
  momentum = train_state.TrainState.create(apply_fn=None, params=params, tx=optax.chain(optax.add_decayed_weights(weight_decay=1e-3), optax.sgd(learning_rate=0.05, momentum=0.8, nesterov=False)))
  values = []
  for i in range(4):
    adam, loss = train_step(adam, x, y, 0.01 / (i + 1))
    momentum, loss2 = momentum_step(momentum, x, y)
    values += [float(loss), float(loss2)]
  opt_state = flax.serialization.to_state_dict({'target': adam.params, 'state': {'step': jax.numpy.asarray(adam.step, jax.numpy.int32), 'param_states': jax.tree_util.tree_map(lambda grad_ema, grad_sq_ema: {'grad_ema': grad_ema, 'grad_sq_ema': grad_sq_ema}, optax.tree.get(adam.opt_state, 'mu'), optax.tree.get(adam.opt_state, 'nu'))}})
  logged = {'adam': histograms(opt_state), 'momentum': histograms(flax.serialization.to_state_dict({'target': momentum.params, 'state': {'step': jax.numpy.asarray(momentum.step, jax.numpy.int32), 'param_states': jax.tree_util.tree_map(lambda momentum: {'momentum': momentum}, optax.tree.get(momentum.opt_state, 'trace'))}}))}
  print(json.dumps(sorted(logged['adam']) + sorted(logged['momentum'])))
  print(json.dumps(values + [v for name in ('adam', 'momentum')
                             for key in sorted(logged[name]) for v in logged[name][key]]))


if __name__ == '__main__':
  main()
