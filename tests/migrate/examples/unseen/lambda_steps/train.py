"""Steps written as lambdas (modax's examples bind ``jit(lambda opt, state: ...)``): a jitted
update lambda, an evaluation lambda, and a lambda called where it is written. Each is called
through the variable bound to it, so the optimizer passed binds its parameter and what the
update lambda returns is the optimizer again. Before, each call was refused FOM107 ("not a
function or class of the given files (a library call ...)"). A second pair of lambdas is
handed to ``train``'s parameters, whose one call site binds each."""
import json

import jax
import jax.numpy as jnp
from flax import optim


def loss(params, batch):
  return jnp.mean((batch['x'] @ params['w'] + params['b'] - batch['y']) ** 2)


def train(update_fn, eval_fn, optimizer, batch, n):
  """modax's ``train(update_fn, validation_fn, optimizer, ...)``: each is a lambda of the caller."""
  losses = []
  for _ in range(n):
    optimizer = update_fn(optimizer, batch)
    losses.append(float(eval_fn(optimizer, batch)))
  return optimizer, losses


def main():
  key = jax.random.PRNGKey(0)
  x = jax.random.normal(key, (16, 3))
  batch = {'x': x, 'y': x @ jnp.array([0.5, -1.0, 2.0]) + 0.3}
  params = {'w': jnp.zeros(3), 'b': jnp.zeros(())}
  optimizer = optim.Momentum(learning_rate=0.05, beta=0.8).create(params)
  update = jax.jit(lambda opt, b: opt.apply_gradient(jax.grad(loss)(opt.target, b)))
  evaluate = lambda opt, b: loss(opt.target, b)
  out = []
  for _ in range(5):
    optimizer = update(optimizer, batch)
    out.append(float(evaluate(optimizer, batch)))
  out += [float(v) for v in (lambda opt: opt.target['w'])(optimizer)]
  adam = optim.Adam(learning_rate=0.1).create(params)
  adam_step = jax.jit(lambda opt, b: opt.apply_gradient(jax.grad(loss)(opt.target, b)))
  adam, losses = train(adam_step, lambda opt, b: loss(opt.target, b), adam, batch, 4)
  out += losses + [float(v) for v in adam.target['w']]
  print(json.dumps(out))


if __name__ == '__main__':
  main()
