"""A dict of optimizers (an actor and a critic) through a checkpoint: saved, restored into a
fresh dict, trained on; each stepped as ``optimizers['actor'].apply_gradient(...)``. The dict
is written both ways: a literal (``create``) and the builtin's keywords (``step``)."""
import json
import os
import sys

import jax
import jax.numpy as jnp
from flax import optim
from flax.training import checkpoints


def loss_fn(params, x, y):
  return jnp.mean((x @ params['w'] + params['b'] - y) ** 2)


@jax.jit
def step(optimizers, x, y):
  actor_loss, grad = jax.value_and_grad(loss_fn)(optimizers['actor'].target, x, y)
  actor = optimizers['actor'].apply_gradient(grad)
  critic_loss, grad = jax.value_and_grad(loss_fn)(optimizers['critic'].target, x, -y)
  critic = optimizers['critic'].apply_gradient(grad)
  return dict(actor=actor, critic=critic), actor_loss, critic_loss


def create(params):
  return {'actor': optim.Adam(learning_rate=0.05, beta1=0.8).create(params),
          'critic': optim.Momentum(learning_rate=0.1, beta=0.7).create(params)}


def main(workdir):
  x = jax.random.normal(jax.random.PRNGKey(0), (8, 3))
  y = jnp.sin(x[:, :1])
  params = {'w': jnp.full((3, 1), 0.3), 'b': jnp.zeros((1,))}
  optimizers = create(params)
  losses = []
  for i in range(5):
    optimizers, actor_loss, critic_loss = step(optimizers, x, y)
    losses += [float(actor_loss), float(critic_loss)]
  checkpoints.save_checkpoint(workdir, optimizers, 5)
  optimizers = checkpoints.restore_checkpoint(workdir, create(params))
  optimizers['critic'] = optimizers['critic'].replace(
      target=jax.tree_util.tree_map(lambda p: p * 0.5, optimizers['critic'].target))
  for i in range(5):
    optimizers, actor_loss, critic_loss = step(optimizers, x, y)
    losses += [float(actor_loss), float(critic_loss)]
  steps = [int(optimizers['actor'].state.step), int(optimizers['critic'].state.step)]
  final = [float(v) for target in (optimizers['actor'].target, optimizers['critic'].target)
           for leaf in jax.tree_util.tree_leaves(target) for v in leaf.ravel()]
  print(json.dumps(losses + steps + final))


if __name__ == '__main__':
  main(sys.argv[1] if len(sys.argv) > 1 else os.path.join('ckpt_dict'))
