"""The training script (see checkpoint_utils.py): a def built from a flag, the optimizer
created, handed to the loader, and read back from the dataclass the loader returns."""
import json

from absl import flags
import flax
import jax
import jax.numpy as jnp

import checkpoint_utils


flags.DEFINE_string('optimizer', 'momentum', 'the optimizer, by name (a string)')
flags.DEFINE_float('learning_rate', 0.05, 'the learning rate')
FLAGS = flags.FLAGS


def main():
  FLAGS(['train'])   # the flags' defaults, as app.run parses them
  params = {'w': jnp.linspace(-1.0, 1.0, 6).reshape(3, 2), 'b': jnp.zeros(2)}
  opt_def = flax.optim.Momentum(learning_rate=FLAGS.learning_rate, beta=0.9, nesterov=True)
  opt = opt_def.create(params)
  checkpoint_data = checkpoint_utils.maybe_load_checkpoint(jax.random.PRNGKey(0), opt)
  opt = checkpoint_data.optimizer
  hparams = {'optimizer': FLAGS.optimizer}
  assert hparams['optimizer'] == FLAGS.optimizer

  @jax.jit
  def update_fn(opt, x):
    def loss_fn(p):
      return jnp.mean((jnp.tanh(x @ p['w'] + p['b']) - 0.5) ** 2)
    loss, grad = jax.value_and_grad(loss_fn)(opt.target)
    return opt.apply_gradient(grad), loss

  x = jnp.cos(jnp.arange(24.0).reshape(8, 3))
  losses = []
  for _ in range(6):
    opt, loss = update_fn(opt, x)
    losses.append(float(loss))
  print(json.dumps(losses + [float(v) for leaf in jax.tree_util.tree_leaves(opt.target)
                             for v in jnp.ravel(leaf)]))


if __name__ == '__main__':
  main()
