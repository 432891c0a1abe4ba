"""One script saves an optimizer whose learning rate it sets per step; another restores it into
an optimizer of its own that never sets one: legacy's two ``Adam`` optimizers share a state
layout whatever their learning rates do, and so must the migrated ones."""
import json
import os
import sys

import jax
import jax.numpy as jnp

import reader
import writer


def main(workdir):
  os.makedirs(workdir, exist_ok=True)
  x = jax.random.normal(jax.random.PRNGKey(0), (8, 3))
  y = jnp.sin(x[:, :1])
  losses = writer.train(workdir, x, y)
  resumed, steps, target = reader.resume(workdir, x, y)
  read = reader.read(workdir)
  final = [float(v) for tree in (target, read) for leaf in jax.tree_util.tree_leaves(tree)
           for v in leaf.ravel()]
  print(json.dumps(losses + resumed + [steps] + final))


if __name__ == '__main__':
  main(sys.argv[1] if len(sys.argv) > 1 else os.path.join('ckpt_shared'))
