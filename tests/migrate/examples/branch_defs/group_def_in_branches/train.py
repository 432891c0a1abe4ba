"""A MultiOptimizer whose group defs are chosen in if/elif branches (by the run's kind), no
override: each branch's value becomes the group's transform, the multi_transform reads it."""
import json

import jax
import jax.numpy as jnp
from flax import optim


def make_optimizer(kind, params):
  body = optim.ModelParamTraversal(lambda path, _: 'head' not in path)
  head = optim.ModelParamTraversal(lambda path, _: 'head' in path)
  if kind == 'adam':
    body_opt = optim.Adam(learning_rate=0.05, weight_decay=0.01)
    head_opt = optim.Adam(learning_rate=0.1)
  elif kind == 'sgd':
    body_opt = optim.Momentum(learning_rate=0.05, beta=0.9, nesterov=True)
    head_opt = optim.Momentum(learning_rate=0.1, beta=0.0)
  opt_def = optim.MultiOptimizer((body, body_opt), (head, head_opt))
  return opt_def.create(params)


def run(kind):
  params = {'body': {'w': jnp.array([1.0, -2.0, 0.5])}, 'head': {'w': jnp.array([0.3, 0.7])}}
  optimizer = make_optimizer(kind, params)

  @jax.jit
  def step(optimizer, x):
    def loss(p):
      return jnp.sum((p['body']['w'] * x - 1.0) ** 2) + jnp.sum(p['head']['w'] ** 2 * x[:2])
    grad = jax.grad(loss)(optimizer.target)
    return optimizer.apply_gradient(grad)

  out = []
  for i in range(4):
    optimizer = step(optimizer, jnp.array([0.3, 0.2, -0.4]) * (i + 1))
    out += [float(v) for v in jax.tree_util.tree_leaves(optimizer.target)[0]]
    out += [float(v) for v in jax.tree_util.tree_leaves(optimizer.target)[1]]
  return out


print(json.dumps(run('adam') + run('sgd')))
