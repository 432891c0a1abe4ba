import json

import flax
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


@flax.struct.dataclass
class State:
  step: int
  optimizer: train_state.TrainState


def main():
  model = Net()
  x = jnp.linspace(-1.0, 1.0, 12, dtype=jnp.float32).reshape(6, 2)
  y = jnp.sin(3.0 * x[:, :1])
  params = model.init(jax.random.PRNGKey(0), x)['params']

  def loss_fn(params):
    return jnp.mean((model.apply({'params': params}, x) - y) ** 2)

  ignored = ('norm', 'bias')
  decayed = lambda path, _: not any(i in path for i in ignored)
  not_decayed = lambda path, _: any(i in path for i in ignored)
  optimizer = train_state.TrainState.create(apply_fn=None, params=params, tx=optax.inject_hyperparams(lambda learning_rate: optax.multi_transform({'0': optax.adamw(learning_rate=learning_rate, b1=0.9, b2=0.999, eps=1e-08, weight_decay=0.01), '1': optax.adam(learning_rate=learning_rate, b1=0.9, b2=0.999, eps=1e-08), 'unmatched': optax.set_to_zero()}, lambda params: traverse_util.path_aware_map(lambda path, value: '0' if decayed('/' + '/'.join(path), value) else '1' if not_decayed('/' + '/'.join(path), value) else 'unmatched', params)), hyperparam_dtype=jnp.float32)(learning_rate=0.0))
  state = State(step=0, optimizer=optimizer)

  @jax.jit
  def train_step(state, lr):
    loss, grad = jax.value_and_grad(loss_fn)(state.optimizer.params)
    new_optimizer = state.optimizer.replace(opt_state=state.optimizer.opt_state._replace(hyperparams=dict(state.optimizer.opt_state.hyperparams, learning_rate=lr))).apply_gradients(grads=grad)
    return state.replace(step=state.step + 1, optimizer=new_optimizer), loss

  losses = []
  for i in range(20):
    state, loss = train_step(state, 0.05 * (0.9 ** i))
    losses.append(float(loss))
  print(json.dumps(losses + [float(state.optimizer.params['head']['bias'][0])]))


if __name__ == '__main__':
  main()
