"""tests/legacy_scripts/migrate/adam_weight_decay.py migrated BY HAND to optax + TrainState.

Written from docs/optimizers.md (`Adam(lr, b1, b2, eps, weight_decay=wd)` is
`optax.adamw(lr, b1=b1, b2=b2, eps=eps, weight_decay=wd)`, bit-exact; `.target` is `.params`,
`apply_gradient(g)` is `apply_gradients(grads=g)`), not by the migrate tool: the harness's own
test runs it against the legacy script (tests/migrate/test_migrate_equivalence_corpus.py).

Usage: python adam_weight_decay.py
Prints (last line) a JSON list: the 20 losses, then every final parameter.
"""
import json

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import linen as nn
from flax.training import train_state

NUM_STEPS = 20


class Classifier(nn.Module):

  @nn.compact
  def __call__(self, x):
    x = nn.Dense(8)(x)
    x = nn.relu(x)
    return nn.Dense(3)(x)


def get_batch(step):
  rng = np.random.RandomState(100 + step)
  x = rng.normal(size=(32, 6)).astype(np.float32)
  labels = (np.argmax(x[:, :3] + 0.5 * x[:, 3:], axis=1)).astype(np.int32)
  return {'x': x, 'labels': labels}


def init_params(model, *inputs, **kwargs):
  """The model's params, with fixed values drawn by numpy (as from a pretrained checkpoint)."""
  params = model.init(jax.random.PRNGKey(0), *inputs, **kwargs)['params']
  rng = np.random.RandomState(0)
  return jax.tree_util.tree_map(
      lambda p: jnp.asarray(rng.normal(scale=0.4, size=p.shape), jnp.float32), params)


def loss_fn(params, batch):
  logits = Classifier().apply({'params': params}, batch['x'])
  log_probs = jax.nn.log_softmax(logits)
  return -jnp.mean(jnp.take_along_axis(log_probs, batch['labels'][:, None], axis=1))


@jax.jit
def train_step(optimizer, batch):
  loss, grads = jax.value_and_grad(loss_fn)(optimizer.params, batch)
  return optimizer.apply_gradients(grads=grads), loss


def main():
  params = init_params(Classifier(), jnp.ones((1, 6), jnp.float32))
  optimizer_def = optax.adamw(learning_rate=0.02, b1=0.8, b2=0.999, eps=1e-8, weight_decay=0.05)
  optimizer = train_state.TrainState.create(apply_fn=None, params=params, tx=optimizer_def)
  losses = []
  for step in range(NUM_STEPS):
    optimizer, loss = train_step(optimizer, get_batch(step))
    losses.append(float(loss))
  leaves = jax.tree_util.tree_leaves(optimizer.params)
  print(json.dumps(losses + [float(v) for leaf in leaves for v in np.ravel(leaf)]))


if __name__ == '__main__':
  main()
