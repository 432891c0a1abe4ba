"""SarthakYadav's audax (audio classifiers in Linen and optax, its own ``TrainState_v2`` with a
``dynamic_scale`` field typed ``flax.optim.DynamicScale``): the program's supervised recipe,
``audax.training_utils.train_supervised.train_and_evaluate``, through its own statements
(``_driver.run_statements``, up to ``train_metrics``): the devices, ``mode``, the steps per
epoch, ``get_model_frontend_cls`` and ``create_model`` (``models.Classifier`` around a
``ResNet``), ``create_learning_rate_fn``, ``create_train_state`` (``initialize``'s jitted
``init``, ``optax.adamw`` on the schedule, ``TrainState_v2.create``; ``DynamicScale`` only
for half precision on GPU: None here, as on any CPU) or, for a fine-tuning config,
``create_train_state_from_pretrained``, then ``restore_checkpoint`` (flax's
``checkpoints.restore_checkpoint`` of the work folder), ``jax_utils.replicate``, the cost and
the pmapped ``train_step`` (``value_and_grad``, ``pmean``, ``state.apply_gradients`` with the
batch statistics, the program's metrics and learning rate).

Three runs, as a user runs the recipes:

1. pre-training: ``adamw`` (weight decay 1e-4) on ``warmupcosine`` (one warm-up epoch of 2
   steps, 3 epochs, so the rate rises, then decays, every step), STEPS steps, then the
   program's ``save_checkpoint`` (the first replica, ``checkpoints.save_checkpoint``);
2. resume: the same statements on the same work folder, which restore that checkpoint
   (``step_offset`` = STEPS, asserted), and STEPS more steps on the restored state;
3. fine-tuning: ``model.pretrained`` = that work folder, ``pretrained_fc_only``: the
   program's ``create_train_state_from_pretrained`` (``restore_checkpoint`` with no target,
   the ``encoder`` copied, its parameters frozen, a new ``adamw`` on the ``fc`` layer only,
   ``cosine_decay``), STEPS steps.

Shrunk: ``model_args`` ``stage_sizes`` [1, 1], ``num_filters`` 4 (the recipe's ResNet18 has
[2, 2, 2, 2] and 64), 16x8x1 log-mel-like inputs (``input_shape``), 5 classes, batch 4 on one
device, full precision, no spec-augment, no mixup (the recipe's defaults). Synthetic batches
(seed 0, a new one each step): normal inputs, one-hot labels.

The trajectory: per step of the three runs the loss, accuracy and learning rate the pmapped
step returns; then the final state of each run (params, frozen params, batch statistics,
optimizer state, step). Stand-ins (input pipeline and logging, not on the computation path):
tensorflow, tensorflow_io, tensorflow_datasets, clu, wandb, sklearn, pandas, librosa,
soundfile; ``flax.io`` set to its plain backend (``_driver.plain_flax_io``), whose ``NotFoundError``
is ``FileNotFoundError``.

Both sides also need one change beyond the data: the program passes ``apply`` its keys as a
``flax.core.FrozenDict`` (``initialize``'s ``rngs``, the state's ``aux_rng_keys``), which the
flax of the time took and today's flax refuses (``InvalidRngError: RNGs should be of shape (2,)
or PRNGKey``; not a flax.optim matter, neither migrate nor the package handles it): the
driver gives ``models.Classifier.apply`` the same keys as a dict (the same values).
"""
import tempfile

import _driver

program, steps = _driver.setup('tensorflow', 'tensorflow_io', 'tensorflow_datasets', 'clu',
                               'wandb', 'sklearn', 'pandas', 'librosa', 'soundfile')
import flax  # noqa: E402
import flax.io  # noqa: E402
import jax  # noqa: E402
from flax import jax_utils  # noqa: E402
import ml_collections  # noqa: E402
import numpy as np  # noqa: E402

_driver.plain_flax_io()   # checkpoints on the real file system, not the tensorflow stand-in

from audax import models  # noqa: E402
from audax.training_utils import train_supervised  # noqa: E402
from audax.training_utils import training_utilities  # noqa: E402

module_apply = models.Classifier.apply


def apply_taking_frozen_rngs(self, *args, rngs=None, **kwargs):
  """``Module.apply`` with the program's ``FrozenDict`` of keys given as a dict."""
  if isinstance(rngs, flax.core.FrozenDict):
    rngs = flax.core.unfreeze(rngs)
  return module_apply(self, *args, rngs=rngs, **kwargs)


models.Classifier.apply = apply_taking_frozen_rngs

SHAPE, CLASSES, BATCH = (16, 8, 1), 5, 4
NAMES = ['rng', 'local_batch_size', 'device', 'devices', 'platform', 'mode', 'in_model_spec_aug',
         'p_spec_aug', 'spec_aug_rng', 'num_examples', 'steps_per_epoch', 'num_steps',
         'num_epochs', 'steps_per_eval', 'base_learning_rate', 'model_cls', 'frontend_cls',
         'model', 'learning_rate_fn', 'state', 'step_offset', 'label_smoothing_factor',
         'cost_fn', 'mixup_alpha', 'mixup_func', 'mixup_criterion_func', 'p_train_step']


def make_config(schedule, pretrained=None):
  config = ml_collections.ConfigDict()
  config.model = ml_collections.ConfigDict(dict(
      arch='ResNet18', type='multiclass', num_classes=CLASSES,
      model_args=ml_collections.ConfigDict(dict(stage_sizes=[1, 1], num_filters=4))))
  if pretrained:
    config.model.pretrained = pretrained
    config.model.pretrained_prefix = 'checkpoint_'
    config.model.pretrained_fc_only = True
  config.opt = ml_collections.ConfigDict(dict(
      optimizer='adamw', learning_rate=0.5, weight_decay=1e-4, schedule=schedule,
      warmup_epochs=1))
  config.data = ml_collections.ConfigDict(dict(tr_samples=2 * BATCH, eval_samples=BATCH,
                                               jax_transforms=False))
  config.batch_size, config.half_precision, config.input_shape = BATCH, False, SHAPE
  config.num_epochs, config.num_train_steps, config.steps_per_eval = 3, -1, -1
  return config


def run(config, workdir, data, values, expect_offset):
  ns = _driver.run_statements(train_supervised, 'train_and_evaluate', NAMES,
                              stop='train_metrics', config=config, workdir=workdir, seed=0)
  assert ns['step_offset'] == expect_offset, ns['step_offset']
  state = ns['state']
  for _ in range(steps):
    labels = np.eye(CLASSES, dtype=np.float32)[data.randint(0, CLASSES, BATCH)]
    batch = {'audio': data.normal(size=(1, BATCH) + SHAPE).astype(np.float32),
             'label': labels[None]}
    state, metrics = ns['p_train_step'](state, batch)
    values.extend(float(metrics[k][0]) for k in ('loss', 'accuracy', 'learning_rate'))
  return state


data, values, held = np.random.RandomState(0), [], []
pretrain_dir = tempfile.mkdtemp(prefix='audax-pretrain-')
state = run(make_config('warmupcosine'), pretrain_dir, data, values, 0)
training_utilities.save_checkpoint(state, pretrain_dir)
held.append(jax_utils.unreplicate(state))
state = run(make_config('warmupcosine'), pretrain_dir, data, values, steps)
held.append(jax_utils.unreplicate(state))
state = run(make_config('cosine_decay', pretrain_dir), tempfile.mkdtemp(prefix='audax-ft-'),
            data, values, 0)
held.append(jax_utils.unreplicate(state))
_driver.emit(values, [jax.tree_util.tree_leaves(s) for s in held])
