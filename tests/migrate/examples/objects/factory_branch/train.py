"""A train state holding the optimizer, stepped by the function a factory in another file
returns (score_flow's ``losses.optimization_manager(config)``), passed into the step builder."""
import json
from typing import Any

import flax
import jax
import jax.numpy as jnp
from flax import optim

import losses


@flax.struct.dataclass
class State:
  step: int
  optimizer: optim.Optimizer
  lr: float
  ema_rate: float
  params_ema: Any


def loss_fn(params, batch):
  x, y = batch
  return jnp.mean((x @ params['w'] + params['b'] - y) ** 2)


def main():
  key = jax.random.PRNGKey(0)
  x = jax.random.normal(key, (16, 3))
  y = jnp.sin(x[:, :1])
  params = {'w': jnp.full((3, 1), 0.3), 'b': jnp.zeros((1,))}
  config = {'warmup': 4, 'grad_clip': 1.0}
  optimizer = optim.Adam(learning_rate=0.02, beta1=0.8).create(params)
  state = State(step=0, optimizer=optimizer, lr=0.02, ema_rate=0.9, params_ema=params)
  optimize_fn = losses.optimization_manager(config)
  train_step = jax.jit(losses.get_step_fn(loss_fn, optimize_fn=optimize_fn))
  history = []
  for _ in range(8):
    state, loss = train_step(state, (x, y))
    history.append(float(loss))
  final = [float(v) for tree in (state.optimizer.target, state.params_ema)
           for leaf in jax.tree_util.tree_leaves(tree) for v in leaf.ravel()]
  print(json.dumps(history + [int(state.optimizer.state.step)] + final))


if __name__ == '__main__':
  main()
