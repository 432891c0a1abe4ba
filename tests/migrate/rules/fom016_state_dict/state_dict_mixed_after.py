"""One helper reads ``state_dict()`` of an Adam and of a Momentum (NeSF's train state field
holds an Adam in training and a Momentum in a test): one object of two kinds of def, each read
logged with its own legacy keys."""
import json

import jax
import jax.numpy as jnp
import numpy as np
from flax import traverse_util
import flax
import optax
from flax.training import train_state


def loss_fn(params, x, y):
  return jnp.mean((x @ params['w'] + params['b'] - y) ** 2)


@jax.jit
def train_step(optimizer, x, y):
  loss, grad = jax.value_and_grad(loss_fn)(optimizer.params, x, y)
  return optimizer.apply_gradients(grads=grad), loss


def histograms(optimizer):
  flat = traverse_util.flatten_dict(flax.serialization.to_state_dict({'target': optimizer.params, 'state': {'step': jax.numpy.asarray(optimizer.step, jax.numpy.int32), 'param_states': jax.tree_util.tree_map(lambda grad_ema, grad_sq_ema: {'grad_ema': grad_ema, 'grad_sq_ema': grad_sq_ema}, optax.tree.get(optimizer.opt_state, 'mu'), optax.tree.get(optimizer.opt_state, 'nu')) if optax.tree.get(optimizer.opt_state, 'mu') is not None else jax.tree_util.tree_map(lambda momentum: {'momentum': momentum}, optax.tree.get(optimizer.opt_state, 'trace'))}}))
  return {'/'.join(k): [float(v) for v in jnp.ravel(jnp.asarray(w))] for k, w in flat.items()}


def main():
  x = jax.random.normal(jax.random.PRNGKey(1), (8, 3))
  y = jnp.cos(x[:, :1])
  params = {'w': jnp.full((3, 1), 0.3), 'b': jnp.zeros((1,))}
  adam = train_state.TrainState.create(apply_fn=None, params=params, tx=optax.adam(learning_rate=0.02, b1=0.9, b2=0.999, eps=1e-08))
  momentum = train_state.TrainState.create(apply_fn=None, params=params, tx=optax.sgd(learning_rate=0.05, momentum=0.7, nesterov=False))
  # the step's leaf, before any step and after jitted ones: legacy's is an int32 array
  steps = [np.asarray(flax.serialization.to_state_dict({'target': adam.params, 'state': {'step': jax.numpy.asarray(adam.step, jax.numpy.int32), 'param_states': jax.tree_util.tree_map(lambda grad_ema, grad_sq_ema: {'grad_ema': grad_ema, 'grad_sq_ema': grad_sq_ema}, optax.tree.get(adam.opt_state, 'mu'), optax.tree.get(adam.opt_state, 'nu')) if optax.tree.get(adam.opt_state, 'mu') is not None else jax.tree_util.tree_map(lambda momentum: {'momentum': momentum}, optax.tree.get(adam.opt_state, 'trace'))}})['state']['step']).dtype.name]
  values = []
  for _ in range(3):
    adam, loss = train_step(adam, x, y)
    momentum, loss2 = train_step(momentum, x, y)
    values += [float(loss), float(loss2)]
  logged = [histograms(adam), histograms(momentum)]
  steps.append(np.asarray(flax.serialization.to_state_dict({'target': adam.params, 'state': {'step': jax.numpy.asarray(adam.step, jax.numpy.int32), 'param_states': jax.tree_util.tree_map(lambda grad_ema, grad_sq_ema: {'grad_ema': grad_ema, 'grad_sq_ema': grad_sq_ema}, optax.tree.get(adam.opt_state, 'mu'), optax.tree.get(adam.opt_state, 'nu')) if optax.tree.get(adam.opt_state, 'mu') is not None else jax.tree_util.tree_map(lambda momentum: {'momentum': momentum}, optax.tree.get(adam.opt_state, 'trace'))}})['state']['step']).dtype.name)
  print(json.dumps([sorted(h) for h in logged] + [steps]))
  print(json.dumps(values + [v for h in logged for key in sorted(h) for v in h[key]]))


if __name__ == '__main__':
  main()
