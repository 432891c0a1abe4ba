import json

import jax
import jax.numpy as jnp
from flax import optim

from model import Model, make_optimizer


def linear(params, x):
  return x @ params['w'] + params['b']


def loss_of(model, x, y):
  def loss_fn(params):
    loss = jnp.mean((linear(params, x) - y) ** 2)
    return loss, {'loss': loss}
  return loss_fn


@jax.jit
def update(actor, critic, x, y):
  actor, actor_info = actor.apply_gradient(loss_of(actor, x, y))
  critic, critic_info = critic.apply_gradient(loss_of(critic, x, -y))
  return actor, critic, actor_info['loss'], critic_info['loss']


@jax.jit
def probe_step(probe, x, y):
  loss, grad = jax.value_and_grad(lambda p: jnp.mean((linear(p, x) - y) ** 2))(probe.target)
  return probe.apply_gradient(grad), loss


def main():
  key = jax.random.PRNGKey(0)
  x = jax.random.normal(key, (8, 3))
  y = jnp.sin(x[:, :1])
  params = {'w': jnp.full((3, 1), 0.3), 'b': jnp.zeros((1,))}
  actor = Model(linear, params).with_optimizer(optim.Adam(learning_rate=0.05, beta1=0.8))
  critic = Model(linear, params)
  critic = critic.with_optimizer(optim.Momentum(learning_rate=0.1, beta=0.7))
  probe_def = optim.RMSProp(learning_rate=0.02)
  probe = make_optimizer(probe_def, params)
  losses = []
  for _ in range(8):
    actor, critic, actor_loss, critic_loss = update(actor, critic, x, y)
    probe, probe_loss = probe_step(probe, x, y)
    losses += [float(actor_loss), float(critic_loss), float(probe_loss)]
  steps = [int(actor.optimizer.state.step), int(probe.state.step)]
  final = [float(v) for m in (actor, critic) for leaf in jax.tree_util.tree_leaves(m.optimizer.target)
           for v in leaf.ravel()]
  print(json.dumps(losses + steps + final + [float(v) for v in probe.target['w'].ravel()]))


if __name__ == '__main__':
  main()
