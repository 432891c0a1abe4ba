import json
from typing import Any

import flax
import jax
import jax.numpy as jnp
import optax
from flax.training import train_state


@flax.struct.dataclass
class TrainState:
  step: int
  optimizer: train_state.TrainState
  model_state: Any


def loss_fn(params):
  return jnp.sum((params['w'] - 1.0) ** 2) + jnp.sum(params['b'] ** 2)


@jax.jit
def train_step(state: TrainState):
  optimizer = state.optimizer
  loss, grads = jax.value_and_grad(loss_fn)(optimizer.params)
  new_optimizer = optimizer.apply_gradients(grads=grads)
  return state.replace(step=state.step + 1, optimizer=new_optimizer), loss


def main():
  params = {'w': jnp.array([0.5, -1.0, 2.0]), 'b': jnp.array([0.3])}
  optimizer = train_state.TrainState.create(apply_fn=None, params=params, tx=optax.rmsprop(learning_rate=0.01, decay=0.9, eps=1e-08, centered=False, eps_in_sqrt=False))
  state = TrainState(step=0, optimizer=optimizer, model_state={})
  losses = []
  for _ in range(20):
    state, loss = train_step(state)
    losses.append(float(loss))
  print(json.dumps(losses))


if __name__ == '__main__':
  main()
