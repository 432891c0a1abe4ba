import json

import jax
import jax.numpy as jnp
from flax import optim

from model import ActorCritic, Model


def linear(params, x):
  return x @ params['w'] + params['b']


def loss_of(model, x, y):
  def loss_fn(params):
    loss = jnp.mean((model.fn(params, x) - y) ** 2)
    return loss, {'loss': loss}
  return loss_fn


def target_update(models, tau, period):
  params = models.critic.optimizer.target
  new_target = jax.tree_util.tree_map(lambda p, tp: p * tau + tp * (1 - tau), params,
                                      models.target_critic.params)
  step = models.critic.optimizer.state.step
  new_target = jax.lax.cond(step % period == 0, lambda _: new_target,
                            lambda _: models.target_critic.params, operand=None)
  return models.target_critic.replace(params=new_target)


@jax.jit
def update(models, x, y):
  actor, actor_info = models.actor.apply_gradient(loss_of(models.actor, x, y))
  critic, critic_info = models.critic.apply_gradient(loss_of(models.critic, x, -y))
  models = models.replace(actor=actor, critic=critic)
  models = models.replace(target_critic=target_update(models, 0.5, 2))
  return models, actor_info['loss'], critic_info['loss']


def main(entropy=None):
  if entropy is None:
    entropy = -0.5
  key = jax.random.PRNGKey(0)
  x = jax.random.normal(key, (8, 3))
  y = jnp.sin(x[:, :1])
  params = {'w': jnp.full((3, 1), 0.3), 'b': jnp.zeros((1,))}
  actor = Model(linear, params).with_optimizer(optim.Adam(learning_rate=0.05, beta1=0.8))
  critic = Model(linear, params).with_optimizer(optim.Momentum(learning_rate=0.1, beta=0.7))
  models = ActorCritic(actor=actor, critic=critic, target_critic=Model(linear, params), temp=None)
  losses = []
  for _ in range(6):
    models, actor_loss, critic_loss = update(models, x, y)
    losses += [float(actor_loss), float(critic_loss)]
  frozen = models.actor.frozen()
  final = [float(v) for tree in (frozen.params, models.critic.optimizer.target,
                                 models.target_critic.params)
           for leaf in jax.tree_util.tree_leaves(tree) for v in leaf.ravel()]
  print(json.dumps(losses + [int(models.critic.optimizer.state.step), entropy] + final))


if __name__ == '__main__':
  main()
