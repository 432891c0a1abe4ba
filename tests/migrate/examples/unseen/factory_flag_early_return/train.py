"""Runs both of ``losses.optimization_manager``'s steps: with ``joint=True`` its first
``return`` is the one that runs, with the default its last. Before, each call was resolved to
no function (both ``return``s counted for a call binding ``joint=True``; the variable bound in
each branch was bound twice), so what the steps returned was not followed: the migrated
program kept ``.target`` on the TrainStates it got back (AttributeError), reported whole."""
import json

import flax
import jax
import jax.numpy as jnp

import losses


@flax.struct.dataclass
class State:
  step: int
  optimizer: flax.optim.Optimizer
  lr: float


@flax.struct.dataclass
class JointState:
  step: int
  a_optimizer: flax.optim.Optimizer
  b_optimizer: flax.optim.Optimizer
  lr: float


def loss(p):
  return jnp.sum(jnp.tanh(p['w'] - 0.2) ** 2)


def run(joint):
  params = {'w': jnp.linspace(-1.0, 1.0, 5)}
  if joint:
    state = JointState(step=0, a_optimizer=losses.get_optimizer(0.1).create(params),
                       b_optimizer=losses.get_optimizer(0.05).create(params), lr=0.1)
    optimize_fn = losses.optimization_manager(joint=True)
    grad = {'a': jax.grad(loss)(state.a_optimizer.target),
            'b': jax.grad(loss)(state.b_optimizer.target)}
    a, b = optimize_fn(state, grad)
    return [float(v) for v in a.target['w']] + [float(v) for v in b.target['w']]
  state = State(step=0, optimizer=losses.get_optimizer(0.1).create(params), lr=0.2)
  optimize_fn = losses.optimization_manager()
  new_opt = optimize_fn(state, jax.grad(loss)(state.optimizer.target))
  return [float(v) for v in new_opt.target['w']]


print(json.dumps(run(True) + run(False)))
