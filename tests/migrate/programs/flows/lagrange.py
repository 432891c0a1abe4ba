"""A fit under two constraints, their Lagrange multipliers each with its own optimizer (MPO).

The multipliers' optimizers are bound into the loss by ``functools.partial``, stepped inside it
and come back as the aux of ``jax.grad(..., has_aux=True)``, unpacked into a nested tuple; a
third one goes in as an argument of ``jax.value_and_grad(..., has_aux=True)`` and comes back
as its aux. Two of them pass through the program's own ``devices.on_device``.
"""
import functools
import json

import jax
import jax.numpy as jnp
from flax import optim

import devices


def multiplier(params):
  return jax.nn.softplus(params['log_eta'])


@jax.jit
def multiplier_step(optimizer, violation):
  grad = jax.grad(lambda p: jnp.sum(multiplier(p) * violation))(optimizer.target)
  return optimizer.apply_gradient(grad)


@jax.jit
def m_step(policy_optimizer, mean_optimizer, scale_optimizer, batch):

  def loss_fn(mean_opt, scale_opt, params):
    fit = jnp.mean((batch['x'] @ params['w'] + params['b'] - batch['y']) ** 2)
    mean_kl = jnp.mean(params['w'] ** 2)
    scale_kl = params['b'] ** 2
    mean_opt = multiplier_step(mean_opt, jax.lax.stop_gradient(mean_kl) - 0.5)
    scale_opt = multiplier_step(scale_opt, jax.lax.stop_gradient(scale_kl) - 0.01)
    loss = (fit + jax.lax.stop_gradient(multiplier(mean_opt.target)) * mean_kl
            + jax.lax.stop_gradient(multiplier(scale_opt.target)) * scale_kl)
    return loss, (mean_opt, scale_opt)

  grad, (mean_optimizer, scale_optimizer) = jax.grad(
      functools.partial(loss_fn, mean_optimizer, scale_optimizer), has_aux=True)(
          policy_optimizer.target)
  policy_optimizer = policy_optimizer.apply_gradient(grad)
  return policy_optimizer, mean_optimizer, scale_optimizer


@jax.jit
def temperature_step(policy_optimizer, temperature_optimizer, batch):

  def loss_fn(params, temperature_opt):
    entropy = -jnp.mean(jax.nn.log_sigmoid(batch['x'] @ params['w']))
    temperature_opt = multiplier_step(temperature_opt, jax.lax.stop_gradient(entropy) - 0.7)
    return multiplier(temperature_opt.target) * entropy, temperature_opt

  (loss, temperature_optimizer), grad = jax.value_and_grad(loss_fn, has_aux=True)(
      policy_optimizer.target, temperature_optimizer)
  return policy_optimizer.apply_gradient(grad), temperature_optimizer, loss


def main():
  x = jax.random.normal(jax.random.PRNGKey(0), (32, 3))
  batch = devices.on_device({'x': x, 'y': x @ jnp.array([1.0, -2.0, 0.5]) + 0.3})
  policy_optimizer = devices.on_device(optim.Adam(learning_rate=0.05).create(
      {'w': jnp.zeros(3), 'b': jnp.zeros(())}))
  mean_optimizer = optim.Adam(learning_rate=0.02).create({'log_eta': jnp.zeros(())})
  scale_optimizer = devices.on_device(
      optim.Adam(learning_rate=0.02).create({'log_eta': jnp.zeros(())}))
  temperature_optimizer = optim.Adam(learning_rate=0.01).create({'log_eta': jnp.ones(())})
  trajectory = []
  for _ in range(12):
    policy_optimizer, mean_optimizer, scale_optimizer = m_step(
        policy_optimizer, mean_optimizer, scale_optimizer, batch)
    policy_optimizer, temperature_optimizer, loss = temperature_step(
        policy_optimizer, temperature_optimizer, batch)
    trajectory.append(float(loss))
  for params in (policy_optimizer.target, mean_optimizer.target, scale_optimizer.target,
                 temperature_optimizer.target):
    trajectory += [float(v) for leaf in jax.tree_util.tree_leaves(params) for v in jnp.ravel(leaf)]
  print(json.dumps(trajectory))


if __name__ == '__main__':
  main()
