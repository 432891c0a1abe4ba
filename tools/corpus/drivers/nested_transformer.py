"""google-research's nested-transformer (`train.create_train_state` builds
`MultiOptimizer((traversal, Adam(weight_decay=wd)), (traversal of pos_embedding, Adam(weight_decay=0)))`
from the config's `optim_wd_ignore`; the pmapped `train.train_step` passes
`learning_rate=learning_rate_fn(state.step + 1)` to `apply_gradient` each step).

The program's own `create_train_state`, `utils.get_learning_rate` (warmup, then cosine) and
`train_step` (grad clipping on), as `train_and_evaluate` partials it, on a NesT of 3 blocks of one
layer (16 wide, 16x16 random images), pmapped over one device. clu is not installed: its metric
collection in `train_step` is replaced by the loss (`train.TrainMetrics`), nothing else of clu is
called on the way to a loss. Needs ml_collections (`--site`).
"""
import functools

import _driver

program, steps = _driver.setup('tensorflow', 'tensorflow_datasets', 'tensorflow_addons', 'clu')
import jax  # noqa: E402
import ml_collections  # noqa: E402
import numpy as np  # noqa: E402
from flax import jax_utils  # noqa: E402
import train  # noqa: E402
from libml import utils  # noqa: E402


class _Loss:
  """Stands for clu's metric collection: the step's metrics are its loss."""

  @staticmethod
  def gather_from_model_output(loss, **_):
    return loss


train.TrainMetrics = _Loss
config = ml_collections.ConfigDict(dict(
    model_name='nest_tiny_s16_32', optim='adamw', optim_wd_ignore=['pos_embedding'],
    weight_decay=0.05, grad_clip_max_norm=1.0,
    nest=dict(num_layers_per_block=[1, 1, 1], embedding_dim=16, num_heads=2,
              stochastic_depth_drop=0.0)))
model, state = train.create_train_state(config, jax.random.PRNGKey(0), input_shape=(2, 16, 16, 3),
                                        num_classes=10)
learning_rate_fn = functools.partial(utils.get_learning_rate, base_learning_rate=1e-3,
                                     steps_per_epoch=2, num_epochs=10, warmup_epochs=1,
                                     schedule='cosine')
state = jax_utils.replicate(state)
p_train_step = jax.pmap(
    functools.partial(train.train_step, model=model, learning_rate_fn=learning_rate_fn,
                      weight_decay=0, grad_clip_max_norm=config.grad_clip_max_norm),
    axis_name='batch')
rng = np.random.RandomState(0)
losses = []
for step in range(steps):
  batch = {'image': rng.rand(1, 4, 16, 16, 3).astype(np.float32),
           'label': rng.randint(0, 10, size=(1, 4)).astype(np.int32)}
  dropout = jax.random.split(jax.random.PRNGKey(step), 1)
  state, loss = p_train_step(state=state, batch=batch, rng=dropout)
  losses.append(loss[0])
final = jax_utils.unreplicate(state)
_driver.emit(losses, (_driver.params_of(final.optimizer), final.model_state))
