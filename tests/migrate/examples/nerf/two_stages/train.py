"""A notebook-style script in two stages (MobileNeRF's stage2.py): each stage defines its
``train_step`` and binds ``train_pstep = jax.pmap(train_step, ...)`` again at module level,
creates ``Adam(**adam_kwargs)`` without a learning rate and sets one at every step. Each call of
``train_pstep`` runs the step its stage bound last; the stages' steps differ (the second scales
its loss), so a call that ran the other stage's step would print other numbers."""
import json

import flax
import jax
import jax.numpy as jnp

adam_kwargs = {
    'beta1': 0.9,
    'beta2': 0.99,
    'eps': 1e-15,
}

n = jax.local_device_count()
x = jax.random.normal(jax.random.PRNGKey(0), (n, 8, 3))
y = jnp.sin(x[..., :1])
params = {'w': jnp.full((3, 1), 0.3), 'b': jnp.zeros((1,))}
losses = []


def train_step(state, x, y, lr):
  def loss_fn(p):
    return jnp.mean((x @ p['w'] + p['b'] - y) ** 2)
  loss, grad = jax.value_and_grad(loss_fn)(state.target)
  grad = jax.lax.pmean(grad, axis_name='batch')
  state = state.apply_gradient(grad, learning_rate=lr)
  return state, loss

train_pstep = jax.pmap(train_step, axis_name='batch', in_axes=(0, 0, 0, None))
state = flax.optim.Adam(**adam_kwargs).create(params)
state = flax.jax_utils.replicate(state)
for i in range(6):
  lr = 0.05 if i < 3 else 0.02
  state, loss = train_pstep(state, x, y, lr)
  losses.append(float(loss[0]))
params = flax.jax_utils.unreplicate(state).target


def train_step(state, x, y, lr):
  def loss_fn(p):
    return 3.0 * jnp.mean(jnp.abs(x @ p['w'] + p['b'] - y))
  loss, grad = jax.value_and_grad(loss_fn)(state.target)
  grad = jax.lax.pmean(grad, axis_name='batch')
  state = state.apply_gradient(grad, learning_rate=lr)
  return state, loss

train_pstep = jax.pmap(train_step, axis_name='batch', in_axes=(0, 0, 0, None))
state = flax.optim.Adam(**adam_kwargs).create(params)
state = flax.jax_utils.replicate(state)
for i in range(6):
  lr = 0.01 * (i + 1)
  state, loss = train_pstep(state, x, y, lr)
  losses.append(float(loss[0]))
state = flax.jax_utils.unreplicate(state)
final = [float(v) for leaf in jax.tree_util.tree_leaves(state.target) for v in leaf.ravel()]
print(json.dumps(losses + [int(state.state.step)] + final))
