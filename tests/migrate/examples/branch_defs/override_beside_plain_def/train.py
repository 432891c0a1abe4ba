"""An optimizer created from a def chosen by the run (Adam or Momentum, plain or frozen through
a MultiOptimizer whose group defs are chosen in branches too); a pmapped step overrides the
groups' learning rates per call (hyper_params=[hp[0].replace(learning_rate=lr),
hp[1].replace(learning_rate=0)]) or sets one for all (learning_rate=lr). Overriding the groups
of the def without groups raises TypeError (legacy: hp[0] of a dataclass)."""
import functools
import json

import jax
import jax.numpy as jnp
from flax import jax_utils
from flax import optim


def create_optimizer(kind, freeze, params):
  if kind == 'adam':
    opt_def = optim.Adam(weight_decay=0.01)
  elif kind == 'sgd':
    opt_def = optim.Momentum(beta=0.9, nesterov=True)
  else:
    raise NotImplementedError(kind)
  if not freeze:
    optimizer = opt_def.create(params)
  else:
    p_normal = optim.ModelParamTraversal(lambda path, _: 'head' not in path)
    p_freeze = optim.ModelParamTraversal(lambda path, _: 'head' in path)
    if kind == 'adam':
      p_normal_opt = optim.Adam(weight_decay=0.01)
      p_freeze_opt = optim.Adam(weight_decay=0)
    elif kind == 'sgd':
      p_normal_opt = optim.Momentum(beta=0.9, nesterov=True)
      p_freeze_opt = optim.Momentum(beta=0, nesterov=False)
    opt_def = optim.MultiOptimizer((p_normal, p_normal_opt), (p_freeze, p_freeze_opt))
    optimizer = opt_def.create(params)
  return optimizer


def train_step(optimizer, x, lr, freeze):
  def loss(p):
    return jnp.sum((p['body']['w'] * x - 1.0) ** 2) + jnp.sum(p['head']['w'] ** 2 * x[:2])
  grad = jax.grad(loss)(optimizer.target)
  grad = jax.lax.pmean(grad, axis_name='batch')
  if freeze:
    hparams = optimizer.optimizer_def.hyper_params
    new_optimizer = optimizer.apply_gradient(
        grad,
        hyper_params=[
            hparams[0].replace(learning_rate=lr),
            hparams[1].replace(learning_rate=0),
        ])
  else:
    new_optimizer = optimizer.apply_gradient(grad, learning_rate=lr)
  return new_optimizer


def run(kind, freeze, step_freeze):
  params = {'body': {'w': jnp.array([1.0, -2.0, 0.5])}, 'head': {'w': jnp.array([0.3, 0.7])}}
  optimizer = jax_utils.replicate(create_optimizer(kind, freeze, params))
  p_step = jax.pmap(functools.partial(train_step, freeze=step_freeze), axis_name='batch')
  n = jax.local_device_count()
  out = []
  for i in range(4):
    x = jnp.array([0.3, 0.2, -0.4]) * (i + 1)
    lr = 0.1 / (i + 1)
    try:
      optimizer = p_step(optimizer, jnp.broadcast_to(x, (n,) + x.shape), jnp.full((n,), lr))
    except TypeError:
      print(f'{kind} freeze={freeze} step_freeze={step_freeze}: raised TypeError at call {i}')
      return out
    target = jax_utils.unreplicate(optimizer).target
    out += [float(v) for v in target['body']['w']] + [float(v) for v in target['head']['w']]
  return out


RUNS = [('adam', True, True), ('sgd', True, True), ('adam', False, False), ('sgd', True, False),
        ('adam', False, True), ('sgd', False, True)]
print(json.dumps([v for args in RUNS for v in run(*args)]))
