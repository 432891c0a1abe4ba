import json

import flax
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


@flax.struct.dataclass
class State:
  step: int
  optimizer: optim.Optimizer


def main():
  model = Net()
  x = jnp.linspace(-1.0, 1.0, 12, dtype=jnp.float32).reshape(6, 2)
  y = jnp.sin(3.0 * x[:, :1])
  params = model.init(jax.random.PRNGKey(0), x)['params']

  def loss_fn(params):
    return jnp.mean((model.apply({'params': params}, x) - y) ** 2)

  ignored = ('norm', 'bias')
  decayed = optim.ModelParamTraversal(lambda path, _: not any(i in path for i in ignored))
  not_decayed = optim.ModelParamTraversal(lambda path, _: any(i in path for i in ignored))
  decayed_opt = optim.Adam(weight_decay=0.01)
  not_decayed_opt = optim.Adam(weight_decay=0)
  optimizer = optim.MultiOptimizer((decayed, decayed_opt),
                                   (not_decayed, not_decayed_opt)).create(params)
  state = State(step=0, optimizer=optimizer)

  @jax.jit
  def train_step(state, lr):
    loss, grad = jax.value_and_grad(loss_fn)(state.optimizer.target)
    new_optimizer = state.optimizer.apply_gradient(grad, learning_rate=lr)
    return state.replace(step=state.step + 1, optimizer=new_optimizer), loss

  losses = []
  for i in range(20):
    state, loss = train_step(state, 0.05 * (0.9 ** i))
    losses.append(float(loss))
  print(json.dumps(losses + [float(state.optimizer.target['head']['bias'][0])]))


if __name__ == '__main__':
  main()
