import json

import jax
import jax.numpy as jnp
from flax import linen as nn
from flax import optim


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
  train = optim.ModelParamTraversal(lambda path, _: not any(n in path for n in frozen))
  freeze = optim.ModelParamTraversal(lambda path, _: any(n in path for n in frozen))
  # The def is chosen at run time; both choices are MultiOptimizers of two groups, so the
  # per-group overrides below apply to either.
  if momentum:
    opt_def = optim.MultiOptimizer((train, optim.Momentum(beta=0.8, nesterov=True)),
                                   (freeze, optim.Momentum(learning_rate=0.05)))
  else:
    opt_def = optim.MultiOptimizer((train, optim.Adam(weight_decay=1e-3)),
                                   (freeze, optim.Adam(learning_rate=0.05)))
  optimizer = opt_def.create(params)

  @jax.jit
  def frozen_step(optimizer, lr):
    loss, grad = jax.value_and_grad(loss_fn)(optimizer.target)
    hp = optimizer.optimizer_def.hyper_params
    optimizer = optimizer.apply_gradient(
        grad, hyper_params=[hp[0].replace(learning_rate=lr), hp[1].replace(learning_rate=0)])
    return optimizer, loss

  @jax.jit
  def step(optimizer, lr):
    loss, grad = jax.value_and_grad(loss_fn)(optimizer.target)
    return optimizer.apply_gradient(grad, learning_rate=lr), loss

  losses = []
  for i in range(20):
    lr = 0.1 / (1.0 + i)
    if i < 10:
      optimizer, loss = frozen_step(optimizer, lr)
    else:
      optimizer, loss = step(optimizer, lr)
    losses.append(float(loss))
  return losses + [float(optimizer.target['head']['bias'][0])]


def main():
  print(json.dumps(run(momentum=False) + run(momentum=True)))


if __name__ == '__main__':
  main()
