import json
import types

import jax
import jax.numpy as jnp
from flax import linen as nn
from flax import optim


class Net(nn.Module):

  @nn.compact
  def __call__(self, x):
    x = nn.relu(nn.Dense(4, name='body')(x))
    x = nn.LayerNorm(name='norm')(x)
    return nn.Dense(1, name='head')(x)


def create_optimizer(config, params):
  if config.wd_ignore:
    igns = config.wd_ignore
    p = optim.ModelParamTraversal(lambda path, _: not any([i in path for i in igns]))
    p_nowd = optim.ModelParamTraversal(lambda path, _: any([i in path for i in igns]))
    p_opt = optim.Adam(weight_decay=config.weight_decay)
    p_nowd_opt = optim.Adam(weight_decay=0)
    opt_def = optim.MultiOptimizer((p, p_opt), (p_nowd, p_nowd_opt))
  else:
    opt_def = optim.Momentum(beta=0.8, nesterov=True)
  return opt_def.create(params)


def train(config):
  model = Net()
  x = jnp.linspace(-1.0, 1.0, 12, dtype=jnp.float32).reshape(6, 2)
  y = jnp.sin(3.0 * x[:, :1])
  params = model.init(jax.random.PRNGKey(0), x)['params']

  def loss_fn(params):
    return jnp.mean((model.apply({'params': params}, x) - y) ** 2)

  @jax.jit
  def train_step(optimizer, lr):
    loss, grad = jax.value_and_grad(loss_fn)(optimizer.target)
    return optimizer.apply_gradient(grad, learning_rate=lr), loss

  optimizer = create_optimizer(config, params)
  losses = []
  for i in range(15):
    optimizer, loss = train_step(optimizer, 0.05 * (0.9 ** i))
    losses.append(float(loss))
  return losses + [float(optimizer.target['head']['bias'][0])]


def main():
  with_groups = types.SimpleNamespace(wd_ignore=('norm', 'bias'), weight_decay=0.01)
  plain = types.SimpleNamespace(wd_ignore=(), weight_decay=0.01)
  print(json.dumps(train(with_groups) + train(plain)))


if __name__ == '__main__':
  main()
