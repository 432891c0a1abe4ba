"""A training state in a ``flax.struct.dataclass``, its optimizer carried through nested
``lax.scan`` loops (as part of a tuple carry) and a ``lax.fori_loop`` (the whole carry), put
on a device by the program's own ``devices.on_device`` (brax's PPO)."""
import json

import flax
import jax
import jax.numpy as jnp
from flax import optim

import devices


@flax.struct.dataclass
class TrainingState:
  optimizer: optim.Optimizer
  key: jnp.ndarray


def loss_fn(params, batch):
  return jnp.mean((batch['x'] @ params['w'] + params['b'] - batch['y']) ** 2)


def train():
  x = jax.random.normal(jax.random.PRNGKey(1), (16, 3))
  data = {'x': x, 'y': x @ jnp.array([0.5, 1.5, -1.0]) - 0.2}
  optimizer = optim.Momentum(learning_rate=0.05, beta=0.9).create(
      {'w': jnp.zeros(3), 'b': jnp.zeros(())})
  optimizer = devices.on_device(optimizer)
  state = TrainingState(optimizer, jax.random.PRNGKey(2))

  def update(carry, batch):
    optimizer, count = carry
    loss, grad = jax.value_and_grad(loss_fn)(optimizer.target, batch)
    optimizer = optimizer.apply_gradient(grad)
    return (optimizer, count + 1), loss

  def epoch(carry, unused):
    state, steps = carry
    key, perm_key = jax.random.split(state.key)
    perm = jax.random.permutation(perm_key, 16)
    batches = jax.tree_util.tree_map(lambda a: a[perm].reshape((4, 4) + a.shape[1:]), data)
    (optimizer, count), losses = jax.lax.scan(update, (state.optimizer, 0), batches)
    return (state.replace(optimizer=optimizer, key=key), steps + count), losses

  @jax.jit
  def run(state):
    return jax.lax.scan(epoch, (state, 0), None, length=3)

  (state, steps), losses = run(state)

  def full_batch_step(i, optimizer):
    return optimizer.apply_gradient(jax.grad(loss_fn)(optimizer.target, data))

  optimizer = jax.lax.fori_loop(0, 4, full_batch_step, state.optimizer)
  trajectory = [float(v) for v in losses.ravel()] + [float(steps)]
  trajectory += [float(loss_fn(optimizer.target, data))]
  trajectory += [float(v) for leaf in jax.tree_util.tree_leaves(optimizer.target)
                 for v in jnp.ravel(leaf)]
  print(json.dumps(trajectory))


if __name__ == '__main__':
  train()
