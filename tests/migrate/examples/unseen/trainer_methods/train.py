"""A trainer class in the style of a 2022 diffusion-distillation codebase: the model object
makes its optimizer def in a method (``self.make_optimizer_def()``, chosen by the config in
``if``/``elif`` branches, a weight decay passed through ``**optimizer_kwargs`` only where the
config sets one), creates it in another method that returns a train-state dataclass
(``state = model.make_init_state()``), checks it is there (``state.optimizer is None``), and
steps it in a pmapped method with a learning rate
computed from the config, skipping an update whose result is not finite (a tree map over the
whole state, the optimizer in it)."""
import functools
import json
from typing import Any

import flax
import jax
import jax.numpy as jnp


@flax.struct.dataclass
class TrainState:
  step: int
  optimizer: flax.optim.Optimizer
  ema_params: Any


class Model:

  def __init__(self, config):
    self.config = config

  def make_init_state(self):
    params = {'w': jnp.full((3, 1), 0.3), 'b': jnp.zeros((1,))}
    optimizer_def = self.make_optimizer_def()
    return TrainState(step=0, optimizer=optimizer_def.create(params),
                      ema_params=jax.tree_util.tree_map(jnp.array, params))

  def loss_fn(self, batch, params):
    x, y = batch
    return jnp.mean((x @ params['w'] + params['b'] - y) ** 2)

  def step_fn(self, state, batch, learning_rate_mult=1.):
    if state.optimizer is None:
      raise ValueError('Optimizer is None')
    loss, grad = jax.value_and_grad(functools.partial(self.loss_fn, batch))(
        state.optimizer.target)
    grad = jax.lax.pmean(grad, axis_name='batch')
    learning_rate = self.config['learning_rate']
    if learning_rate_mult != 1:
      learning_rate *= learning_rate_mult
    new_optimizer = state.optimizer.apply_gradient(grad, learning_rate=learning_rate)
    new_ema = jax.tree_util.tree_map(lambda a, b: 0.9 * a + 0.1 * b, state.ema_params,
                                     new_optimizer.target)
    new_state = state.replace(step=state.step + 1, optimizer=new_optimizer, ema_params=new_ema)
    ok = jnp.all(jnp.asarray([jnp.all(jnp.isfinite(p))
                              for p in jax.tree_util.tree_leaves(new_optimizer)]))
    skipped = state.replace(step=state.step + 1)
    state = jax.tree_util.tree_map(lambda a, b: jnp.where(ok, a, b), new_state, skipped)
    return state, loss

  def make_optimizer_def(self):
    optimizer_kwargs = {}
    if self.config['weight_decay'] > 0.:
      optimizer_kwargs['weight_decay'] = self.config['weight_decay']
    if self.config['optimizer'] == 'adam':
      optimizer_def = flax.optim.Adam(**optimizer_kwargs, beta1=0.9, beta2=0.99)
    elif self.config['optimizer'] == 'momentum':
      optimizer_def = flax.optim.Momentum(**optimizer_kwargs, beta=0.9)
    elif self.config['optimizer'] == 'nesterov':
      optimizer_def = flax.optim.Momentum(**optimizer_kwargs, beta=0.9, nesterov=True)
    else:
      raise NotImplementedError(self.config['optimizer'])
    return optimizer_def


def run(kind, weight_decay):
  model = Model({'optimizer': kind, 'learning_rate': 0.05, 'weight_decay': weight_decay})
  state = flax.jax_utils.replicate(model.make_init_state())
  p_step = jax.pmap(functools.partial(model.step_fn, learning_rate_mult=0.5),
                    axis_name='batch')
  n = jax.local_device_count()
  x = jax.random.normal(jax.random.PRNGKey(0), (n, 8, 3))
  batch = (x, jnp.sin(x[..., :1]))
  losses = []
  for _ in range(6):
    state, loss = p_step(state, batch)
    losses.append(float(loss[0]))
  state = flax.jax_utils.unreplicate(state)
  leaves = jax.tree_util.tree_leaves((state.optimizer.target, state.ema_params))
  return losses + [int(state.step)] + [float(v) for leaf in leaves for v in leaf.ravel()]


print(json.dumps(run('adam', 1e-2) + run('adam', 0.) + run('momentum', 0.) +
                 run('nesterov', 1e-2)))
