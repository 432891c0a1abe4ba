import json

import jax
import jax.numpy as jnp
from flax import traverse_util, linen as nn
import optax
from flax.training import train_state


class Net(nn.Module):

  @nn.compact
  def __call__(self, x):
    x = nn.tanh(nn.Dense(4, name='body')(x))
    return nn.Dense(1, name='head')(x)


def run(momentum):
  model = Net()
  x = jnp.linspace(-1.0, 1.0, 12, dtype=jnp.float32).reshape(6, 2)
  y = jnp.sin(3.0 * x[:, :1])
  params = model.init(jax.random.PRNGKey(0), x)['params']

  def loss_fn(params):
    return jnp.mean((model.apply({'params': params}, x) - y) ** 2)

  frozen = ['head']
  train = lambda path, _: not any(n in path for n in frozen)
  freeze = lambda path, _: any(n in path for n in frozen)
  # The def is chosen at run time; both choices are MultiOptimizers of two groups, so the
  # per-group overrides below apply to either.
  if momentum:
    opt_def = optax.inject_hyperparams(lambda learning_rate_0, learning_rate_1: optax.multi_transform({'0': optax.sgd(learning_rate=learning_rate_0, momentum=0.8, nesterov=True), '1': optax.sgd(learning_rate=learning_rate_1, momentum=0.9, nesterov=False), 'unmatched': optax.set_to_zero()}, lambda params: traverse_util.path_aware_map(lambda path, value: '0' if train('/' + '/'.join(path), value) else '1' if freeze('/' + '/'.join(path), value) else 'unmatched', params)), hyperparam_dtype=jnp.float32)(learning_rate_0=0.0, learning_rate_1=0.05)
  else:
    opt_def = optax.inject_hyperparams(lambda learning_rate_0, learning_rate_1: optax.multi_transform({'0': optax.adamw(learning_rate=learning_rate_0, b1=0.9, b2=0.999, eps=1e-08, weight_decay=1e-3), '1': optax.adam(learning_rate=learning_rate_1, b1=0.9, b2=0.999, eps=1e-08), 'unmatched': optax.set_to_zero()}, lambda params: traverse_util.path_aware_map(lambda path, value: '0' if train('/' + '/'.join(path), value) else '1' if freeze('/' + '/'.join(path), value) else 'unmatched', params)), hyperparam_dtype=jnp.float32)(learning_rate_0=0.0, learning_rate_1=0.05)
  optimizer = train_state.TrainState.create(apply_fn=None, params=params, tx=opt_def)

  @jax.jit
  def frozen_step(optimizer, lr):
    loss, grad = jax.value_and_grad(loss_fn)(optimizer.params)
    optimizer = optimizer.replace(opt_state=optimizer.opt_state._replace(hyperparams=dict(optimizer.opt_state.hyperparams, learning_rate_0=lr, learning_rate_1=0))).apply_gradients(grads=grad)
    return optimizer, loss

  @jax.jit
  def step(optimizer, lr):
    loss, grad = jax.value_and_grad(loss_fn)(optimizer.params)
    return optimizer.replace(opt_state=optimizer.opt_state._replace(hyperparams=dict(optimizer.opt_state.hyperparams, **dict.fromkeys(('learning_rate_0', 'learning_rate_1'), lr)))).apply_gradients(grads=grad), loss

  losses = []
  for i in range(20):
    lr = 0.1 / (1.0 + i)
    if i < 10:
      optimizer, loss = frozen_step(optimizer, lr)
    else:
      optimizer, loss = step(optimizer, lr)
    losses.append(float(loss))
  return losses + [float(optimizer.params['head']['bias'][0])]


def main():
  print(json.dumps(run(momentum=False) + run(momentum=True)))


if __name__ == '__main__':
  main()
