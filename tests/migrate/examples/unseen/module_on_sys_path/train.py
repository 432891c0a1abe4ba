# AAIR-lab/saycan's layout: train.py at the top imports ``from model import ...`` and
# ``from constants import *``, modules of the saycan/ folder, which the program puts on
# sys.path (the repository's README runs it with that folder on PYTHONPATH).
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'saycan'))

import flax
import jax
import jax.numpy as jnp
from constants import *  # pylint: disable=wildcard-import
from model import Net, train_step


def main():
  x = jax.random.normal(jax.random.PRNGKey(0), (BATCH, 3))
  params = Net().init(jax.random.PRNGKey(1), x)['params']
  optim = flax.optim.Adam(learning_rate=LEARNING_RATE).create(params)
  losses = []
  for _ in range(4):
    optim, loss = train_step(optim, x)
    losses.append(float(loss))
  leaves = jax.tree_util.tree_leaves(optim.target)
  print(json.dumps(losses + [float(v) for leaf in leaves for v in leaf.ravel()]))


if __name__ == '__main__':
  main()
