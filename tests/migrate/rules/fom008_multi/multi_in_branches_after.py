import json
import types

import jax
import jax.numpy as jnp
from flax import traverse_util, linen as nn
import optax
from flax.training import train_state


class Net(nn.Module):

  @nn.compact
  def __call__(self, x):
    x = nn.relu(nn.Dense(4, name='body')(x))
    x = nn.LayerNorm(name='norm')(x)
    return nn.Dense(1, name='head')(x)


def create_optimizer(config, params):
  if config.wd_ignore:
    igns = config.wd_ignore
    p = lambda path, _: not any([i in path for i in igns])
    p_nowd = lambda path, _: any([i in path for i in igns])
    opt_def = optax.inject_hyperparams(lambda learning_rate: optax.multi_transform({'0': optax.adamw(learning_rate=learning_rate, b1=0.9, b2=0.999, eps=1e-08, weight_decay=config.weight_decay), '1': optax.adam(learning_rate=learning_rate, b1=0.9, b2=0.999, eps=1e-08), 'unmatched': optax.set_to_zero()}, lambda params: traverse_util.path_aware_map(lambda path, value: '0' if p('/' + '/'.join(path), value) else '1' if p_nowd('/' + '/'.join(path), value) else 'unmatched', params)), hyperparam_dtype=jnp.float32)(learning_rate=0.0)
  else:
    opt_def = optax.inject_hyperparams(optax.sgd, static_args=('momentum', 'nesterov', 'accumulator_dtype'), hyperparam_dtype=jnp.float32)(learning_rate=0.0, momentum=0.8, nesterov=True)
  return train_state.TrainState.create(apply_fn=None, params=params, tx=opt_def)


def train(config):
  model = Net()
  x = jnp.linspace(-1.0, 1.0, 12, dtype=jnp.float32).reshape(6, 2)
  y = jnp.sin(3.0 * x[:, :1])
  params = model.init(jax.random.PRNGKey(0), x)['params']

  def loss_fn(params):
    return jnp.mean((model.apply({'params': params}, x) - y) ** 2)

  @jax.jit
  def train_step(optimizer, lr):
    loss, grad = jax.value_and_grad(loss_fn)(optimizer.params)
    return optimizer.replace(opt_state=optimizer.opt_state._replace(hyperparams=dict(optimizer.opt_state.hyperparams, learning_rate=lr))).apply_gradients(grads=grad), loss

  optimizer = create_optimizer(config, params)
  losses = []
  for i in range(15):
    optimizer, loss = train_step(optimizer, 0.05 * (0.9 ** i))
    losses.append(float(loss))
  return losses + [float(optimizer.params['head']['bias'][0])]


def main():
  with_groups = types.SimpleNamespace(wd_ignore=('norm', 'bias'), weight_decay=0.01)
  plain = types.SimpleNamespace(wd_ignore=(), weight_decay=0.01)
  print(json.dumps(train(with_groups) + train(plain)))


if __name__ == '__main__':
  main()
