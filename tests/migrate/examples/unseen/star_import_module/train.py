"""A demo script of SayCan's shape (atokagzx/SayCan_experimental's ``demo.py``): ``from main
import *`` gives it ``flax``, ``jax``, ``jnp`` and main's functions, and it builds an optimizer
of its own with ``flax.optim.Momentum`` and saves a state dict with ``flax.serialization``.
Before, its ``flax.optim`` uses had no record (left legacy, exit 0 "nothing to migrate") and
the rewrite of main.py deleted the ``import flax`` this file reads through the star import
(NameError once migrated)."""
import json

from main import *


def main():
  x = jax.random.normal(jax.random.PRNGKey(0), (8, 3))
  y = jnp.sin(x[:, :1])
  params = {'w': jnp.full((3, 1), 0.3), 'b': jnp.zeros((1,))}
  optimizer = make_optimizer(params)
  other = flax.optim.Momentum(learning_rate=0.1, beta=0.7).create(params)
  losses = []
  for _ in range(4):
    optimizer, loss = train_step(optimizer, x, y)
    other, other_loss = train_step(other, x, -y)
    losses += [float(loss), float(other_loss)]
  state = flax.serialization.to_state_dict(optimizer.target)
  final = [float(v) for tree in (state, other.target)
           for leaf in jax.tree_util.tree_leaves(tree) for v in leaf.ravel()]
  print(json.dumps(losses + final))


if __name__ == '__main__':
  main()
