import json

import jax
import jax.numpy as jnp

from learner import Learner

# Each key set a caller may pass (None: the learner's own default), then two that legacy refused:
# an unknown key (TypeError where the def is made) and no learning rate (an error by the first
# update: legacy's AssertionError there, the migrated def's TypeError where it is made).
KEY_SETS = (None, {'learning_rate': 0.05, 'weight_decay': 0.1}, {'learning_rate': 0.02},
            {'learning_rate': 0.01, 'beta1': 0.5, 'eps': 1e-3})


def main():
  x = jax.random.normal(jax.random.PRNGKey(0), (8, 3))
  y = jnp.sin(x[:, :1])
  params = {'w': jnp.full((3, 1), 0.3), 'b': jnp.zeros((1,))}
  out = []
  for kwargs in KEY_SETS:
    learner = Learner(params) if kwargs is None else Learner(params, kwargs)
    out += [learner.step(x, y) for _ in range(6)]
    out += [float(v) for leaf in jax.tree_util.tree_leaves(learner.model.optimizer.target)
            for v in leaf.ravel()]
  try:
    Learner(params, {'learning_rate': 0.1, 'momentum': 0.9})
    out.append(0.0)
  except TypeError:
    out.append(1.0)
  try:
    Learner(params, {'weight_decay': 0.1}).step(x, y)
    out.append(0.0)
  except (TypeError, AssertionError):
    out.append(1.0)
  print(json.dumps(out))


if __name__ == '__main__':
  main()
