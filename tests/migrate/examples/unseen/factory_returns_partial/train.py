"""modax (2021): the step factory ends ``return jax.jit(partial(step, loss_fn=loss_fn))``, and
a training function takes what it returns as a parameter, ``train(update_fn, optimizer, ...)``,
calling ``update_fn(optimizer, state)``. It was refused FOM107 ("update_fn ... a library
call"); the def and its optimizer share one module variable. A second factory binds its first
parameter positionally (``partial(step, loss_fn)``), its step called in a loop."""
import json
from functools import partial

import jax
import jax.numpy as jnp
from flax import optim


def create_update(loss_fn):
  def step(opt, state, loss_fn):
    loss, grad = jax.value_and_grad(loss_fn)(opt.target, state)
    opt = opt.apply_gradient(grad)
    return (opt, state + 1.0), loss

  return jax.jit(partial(step, loss_fn=loss_fn))


def create_momentum_update(loss_fn):
  def step(loss_fn, opt, state):
    loss, grad = jax.value_and_grad(loss_fn)(opt.target, state)
    return (opt.apply_gradient(grad), state * 0.5), loss

  return jax.jit(partial(step, loss_fn))


def train(update_fn, optimizer, state, n):
  losses = []
  for _ in range(n):
    (optimizer, state), loss = update_fn(optimizer, state)
    losses.append(float(loss))
  return optimizer, state, losses


def loss_fn(params, state):
  return jnp.sum(jnp.tanh(params['w'] * state - 0.3) ** 2)


params = {'w': jnp.linspace(-1.0, 1.0, 6)}
optimizer = optim.Adam(learning_rate=2e-2, beta1=0.9, beta2=0.99)
optimizer = optimizer.create(params)
update_fn = create_update(loss_fn)
optimizer, state, losses = train(update_fn, optimizer, 1.0, 4)
momentum = optim.Momentum(learning_rate=0.1, beta=0.8).create(params)
momentum_step = create_momentum_update(loss_fn)
more, m_state = [], 1.0
for _ in range(4):
  (momentum, m_state), loss = momentum_step(momentum, m_state)
  more.append(float(loss))
print(json.dumps(losses + more + [float(v) for v in optimizer.target['w']]
                 + [float(v) for v in momentum.target['w']] + [float(state)]))
