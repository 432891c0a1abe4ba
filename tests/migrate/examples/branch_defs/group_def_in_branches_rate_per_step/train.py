"""A MultiOptimizer group def chosen in if/else branches, its learning rate set per step for
every group (apply_gradient(g, learning_rate=lr)): each branch's value becomes a function of the
injected learning rate, the multi_transform calls it."""
import json

import jax
import jax.numpy as jnp
from flax import optim


def make(kind, params):
  t = optim.ModelParamTraversal(lambda path, _: 'head' not in path)
  u = optim.ModelParamTraversal(lambda path, _: 'head' in path)
  if kind:
    a = optim.Adam(weight_decay=0.1)
  else:
    a = optim.Momentum(beta=0.8)
  return optim.MultiOptimizer((t, a), (u, optim.GradientDescent())).create(params)


def run(kind):
  params = {'body': jnp.array([1.0, -2.0]), 'head': jnp.array([0.5])}
  opt = make(kind, params)

  @jax.jit
  def step(o, lr):
    g = jax.grad(lambda p: jnp.sum(p['body'] ** 2) + jnp.sum(p['head'] ** 3))(o.target)
    return o.apply_gradient(g, learning_rate=lr)

  out = []
  for i in range(4):
    opt = step(opt, 0.1 / (i + 1))
    out += [float(v) for leaf in jax.tree_util.tree_leaves(opt.target) for v in leaf]
  return out


print(json.dumps(run(True) + run(False)))
