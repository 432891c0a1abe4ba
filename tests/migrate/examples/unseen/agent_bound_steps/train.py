"""An agent class in the style of 2021 TD3 code: two optimizers held in fields of the agent,
each step a method bound to a field of the instance in ``__init__`` (``self.critic_step =
jax.jit(self._critic_step)``, or the plain method where ``jit`` is off) and called through it,
the optimizer passed in and the new one stored back."""
import json

import flax
import jax
import jax.numpy as jnp
from flax import optim


class Agent:

  def __init__(self, jit=True):
    self.actor_optimizer = optim.Adam(learning_rate=3e-2).create({'w': jnp.full((3, 2), 0.2)})
    self.critic_optimizer = optim.Adam(learning_rate=1e-2).create({'q': jnp.full((5, 1), 0.1)})
    if jit:
      self.actor_step = jax.jit(self._actor_step)
      self.critic_step = jax.jit(self._critic_step)
    else:
      self.actor_step = self._actor_step
      self.critic_step = self._critic_step

  def _critic_step(self, critic_optimizer, state, action, target):
    def loss_fn(params):
      q = jnp.concatenate([state, action], -1) @ params['q']
      return jnp.mean((q - target) ** 2)
    loss, grad = jax.value_and_grad(loss_fn)(critic_optimizer.target)
    return critic_optimizer.apply_gradient(grad), loss

  def _actor_step(self, actor_optimizer, critic_params, state):
    def loss_fn(params):
      action = jnp.tanh(state @ params['w'])
      return -jnp.mean(jnp.concatenate([state, action], -1) @ critic_params['q'])
    loss, grad = jax.value_and_grad(loss_fn)(actor_optimizer.target)
    return actor_optimizer.apply_gradient(grad), loss

  def train(self, state, action, target):
    self.critic_optimizer, critic_loss = self.critic_step(self.critic_optimizer, state, action,
                                                          target)
    self.actor_optimizer, actor_loss = self.actor_step(
        self.actor_optimizer, self.critic_optimizer.target, state)
    return [float(critic_loss), float(actor_loss)]


def run(jit):
  agent = Agent(jit=jit)
  rng = jax.random.PRNGKey(0)
  losses = []
  for _ in range(5):
    rng, k1, k2 = jax.random.split(rng, 3)
    state = jax.random.normal(k1, (8, 3))
    action = jnp.tanh(jax.random.normal(k2, (8, 2)))
    losses += agent.train(state, action, jnp.sum(state, -1, keepdims=True))
  leaves = jax.tree_util.tree_leaves((agent.actor_optimizer.target, agent.critic_optimizer.target))
  return losses + [float(v) for leaf in leaves for v in leaf.ravel()]


print(json.dumps(run(True) + run(False)))
