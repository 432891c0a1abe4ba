"""Each method's file builds its def and hands it to ``util.create`` (a call of a module's
function named ``create``, not a def's create); the loop steps through ``util.step``."""
import json

import flax
import jax
import jax.numpy as jnp

import util


def main():
  x = jax.random.normal(jax.random.PRNGKey(0), (16, 3))
  y = x @ jnp.array([0.5, -1.0, 2.0])
  opt_def = flax.optim.Adam(learning_rate=0.05, weight_decay=1e-3)
  optimizer = util.create(opt_def, {'w': jnp.zeros(3)})

  def loss_fn(params):
    return jnp.mean((x @ params['w'] - y) ** 2)

  losses = []
  for _ in range(6):
    optimizer, loss = util.step(optimizer, loss_fn)
    losses.append(float(loss))
  print(json.dumps(losses + [float(v) for v in optimizer.target['w']]))


if __name__ == '__main__':
  main()
