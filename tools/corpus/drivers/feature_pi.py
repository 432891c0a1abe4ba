"""DensoITLab's featurePI (particle inference for deep ensembles, Linen WideResNets; after
google-research's sam): two runs of the program's own training code, each in two phases with a
checkpoint between them, as a user stops and resumes ``train.py``.

Per run: the program's command-line flags (``train.FLAGS``), then the statements of
``train.main`` that build the keys (``prng_key``, ``model_key, train_key``), the replica sizes
(``num_devices``, ``local_batch_size``), the model, its parameters and state
(``load_model.get_model``: ``init_with_output`` vmapped over the particles,
``variables.pop("params")``) and the optimizer (``ensemble_training.create_optimizer(params,
0.0)``: ``optim.Momentum(beta=0.9, nesterov=True)`` or ``optim.Adam``, chosen by
``--use_adam``), run as the program wrote them (or as migrate rewrote them). The driver then
calls the program's own ``ensemble_training.train`` twice with that optimizer and state:

* phase 1, ``num_epochs`` = the first half of the steps: no checkpoint folder yet, so it starts
  from scratch, replicates, builds its learning-rate schedule and its pmapped ``train_step`` /
  ``eval_step``, runs its epochs (``train_for_one_epoch``: ``fold_in`` of the key and the
  optimizer's step, ``shard_batch``, ``shard_prng_key``, the pmapped step), evaluates after
  every epoch (``eval_on_dataset``), and ends with its ``save_checkpoint``
  (``dict(optimizer=..., model_state=..., epoch=...)`` through ``flax.training.checkpoints``,
  the first replica's optimizer, the replicas' mean state);
* phase 2, ``num_epochs`` = all the steps: the folder exists, so ``train`` calls the program's
  ``restore_checkpoint`` (the fresh optimizer and state as the template of the same dict),
  resumes at the saved epoch + 1, and trains the rest of the steps from what was restored,
  saving again at the end.

Finally the program's ``restore_checkpoint`` reads the last checkpoint back. The step: the
program's ``train_step`` (``--method`` feature_wgd: the encoder's vjp vmapped over particles,
``lib/optim/feature_wgd.py``'s Wasserstein-gradient update of the features: the likelihood
gradients ``all_gather``-ed over the replicas, their eigen-projection, the RBF kernel with the
median bandwidth, the Cauchy feature prior, L2 decay added; deep_ensembles: ``value_and_grad``
vmapped over particles, with L2), ``pmean`` of the gradient and the batch statistics,
``optimizer.apply_gradient(grad, learning_rate=lr)`` with the rate from the schedule at the
optimizer's step.

The two runs: ``feature_wgd`` (4 particles, projection dimension 2, nesterov Momentum, rate 0.1,
the multistep schedule) and ``deep_ensembles`` (2 particles, Adam, rate 0.01, the cosine
schedule, so the rate changes every step and with the longer run after the restore); weight
decay 5e-4, 2 CPU devices (run it with ``both_ways.py --devices 2``: the pmean and the
all_gather are across two replicas), global batch 8 (4 per device), 10 classes. Epochs are one
step each (``num_training_obs`` = the batch size). The model, shrunk: ``WideResnet16-2`` (the
flag; ``_feature`` appended for feature_wgd, as ``main`` does) made from
``wideresnet.WideResNet`` with ``stage_sizes`` [1, 1] (two stages of one block: the
second strided, its residual average-pooled and zero-padded), ``num_filters`` 4 and
``width_factor`` 1 instead of [2, 2, 2], 16 and 2 (8 features); 8x8x3 images instead of
cifar's 32x32x3.
Synthetic data: a ``dataset_source`` of the program's interface (``batch_size``,
``num_training_obs``, ``get_train``, ``get_test``) giving one batch per epoch of uniform images
and one-hot labels (seed 0, a new batch every epoch) and one fixed test batch, its arrays behind
``_numpy()`` as the program's ``tensorflow_to_numpy`` reads TF tensors.

The trajectory, per run: the ``train_loss`` of every epoch (= step), then per epoch the other
scalars the program writes to its summary writer (the driver's recorder in place of
``flax.metrics.tensorboard.SummaryWriter``; each epoch's logged once, at steps 1..STEPS, or the
driver stops: phase 2 went on from the restored optimizer step), in name order, each followed
by the step it is logged at (the optimizer's step as the program reads it): ``gradient_norm``,
``learning_rate``, ``param_norm``, ``test_brier_score``, ``test_error_rate``, ``test_loss``,
``train_error_rate``; then per run the final parameters, model state and epoch that the
program's ``restore_checkpoint`` reads back from the last checkpoint.

Stand-ins (input pipeline, augmentations, logging; none on the computation path): tensorflow,
tensorflow_datasets, tensorflow_probability, tensorflow_addons, tensorboard; the program's
``tf.io.gfile`` (``exists``/``remove`` of the checkpoint folder) is flax's own file layer
(``flax.io``, the same functions on local paths, set to its plain Python backend by
``_driver.plain_flax_io``, with the plain backend's ``NotFoundError``, ``FileNotFoundError``, which flax.io
takes from the tensorflow stand-in when it is imported, and which ``checkpoints.save_checkpoint``
catches when it lists a folder not made yet); the summary writer records the scalars instead
of writing TF event files.

``train_for_one_epoch`` draws the step's key as ``fold_in(prng_key, optimizer.state.step[0])``
(migrated: ``optimizer.step[0]``): an element of a replicated array, which today's jax keeps on
all the replicas' devices (a committed, replicated array), so the per-device keys that
``common_utils.shard_prng_key`` splits from it are too, and today's pmap refuses them as a
mapped input with more than one device (``ValueError: Sharding passed to jit does not match
the sharding on the respective arg``; both sides; neither migrate nor the package handles it, it
is no flax.optim name): the driver gives both sides ``shard_prng_key`` of the key fetched to the
host first (``jax.device_get``; the same values, on the default device as the jax of the time
put them).
"""
import tempfile

import _driver

program, steps = _driver.setup('tensorflow', 'tensorflow_datasets', 'tensorflow_probability',
                               'tensorflow_addons', 'tensorboard')
import functools  # noqa: E402
import os  # noqa: E402

import flax.io  # noqa: E402
from flax.training import common_utils  # noqa: E402
import jax  # noqa: E402
import numpy as np  # noqa: E402

_driver.plain_flax_io()   # checkpoints on the real file system, not the tensorflow stand-in
assert jax.device_count() == 2, 'run it with both_ways.py --devices 2'
shard_prng_key = common_utils.shard_prng_key
common_utils.shard_prng_key = lambda prng_key: shard_prng_key(jax.device_get(prng_key))

import train  # noqa: E402
from lib.models import wideresnet  # noqa: E402
from lib.training_utils import ensemble_training  # noqa: E402

ensemble_training.gfile = flax.io
wideresnet.WideResNet16_2 = functools.partial(
    wideresnet.WideResNet, stage_sizes=[1, 1], num_filters=4, width_factor=1)

BATCH, SIZE, CHANNELS, CLASSES = 8, 8, 3, 10
RUNS = {
    'feature_wgd': ['--method=feature_wgd', '--num_particles=4', '--projection_dim=2',
                    '--nouse_adam', '--learning_rate=0.1', '--lr_schedule=multistep'],
    'deep_ensembles': ['--method=deep_ensembles', '--num_particles=2', '--use_adam',
                       '--learning_rate=0.01', '--lr_schedule=cosine'],
}


class Tensor:
  """What the program's ``tensorflow_to_numpy`` reads of a TF tensor: ``_numpy()``."""

  def __init__(self, array):
    self.array = array

  def _numpy(self):
    return self.array


class DatasetSource:
  """The program's ``DatasetSource`` interface on synthetic data: one batch per epoch."""

  def __init__(self, seed):
    self.batch_size = BATCH
    self.num_training_obs = BATCH
    self.data = np.random.RandomState(seed)
    self.test = self.batch()

  def batch(self):
    labels = self.data.randint(0, CLASSES, BATCH)
    return {'image': Tensor(self.data.uniform(0, 1, (BATCH, SIZE, SIZE, CHANNELS))
                            .astype(np.float32)),
            'label': Tensor(np.eye(CLASSES, dtype=np.float32)[labels])}

  def get_train(self, use_augmentations):
    del use_augmentations
    yield self.batch()

  def get_test(self):
    yield self.test


class SummaryWriter:
  """Records what the program logs: ``(name, step, value)`` in the order it is logged."""
  logged = []

  def __init__(self, log_dir):
    del log_dir

  def scalar(self, name, value, step):
    SummaryWriter.logged.append((name, int(step), float(np.asarray(value))))

  def flush(self):
    pass


ensemble_training.tensorboard.SummaryWriter = SummaryWriter


def run(name, values, held):
  train.FLAGS(['train', '--dataset=cifar10', '--model_name=WideResnet16-2',
               f'--batch_size={BATCH}', '--weight_decay=0.0005', '--run_seed=0',
               '--use_learning_rate_schedule', *RUNS[name]])
  if 'feature' in train.FLAGS.method:   # as train.main does
    train.FLAGS.model_name += '_feature'
  ns = _driver.run_statements(
      train, 'main', ['num_devices', 'local_batch_size', 'prng_key', 'model_key', 'train_key',
                      'model', 'params', 'state', 'optimizer'],
      image_size=SIZE, num_channels=CHANNELS, num_classes=CLASSES, low_res=True)
  model, optimizer, state = ns['model'], ns['optimizer'], ns['state']
  training_dir = tempfile.mkdtemp(prefix=f'feature_pi-{name}-')
  checkpoint_dir = os.path.join(training_dir, 'checkpoints')
  dataset_source = DatasetSource(0)
  SummaryWriter.logged = []
  for num_epochs in ((steps + 1) // 2, steps):
    ensemble_training.train(model, optimizer, state, dataset_source, training_dir, num_epochs,
                            ns['train_key'])
  logged = {(metric, step): value for metric, step, value in SummaryWriter.logged}
  # Each epoch logged once, at steps 1..STEPS: phase 2 went on from the restored step.
  assert len(logged) == len(SummaryWriter.logged), SummaryWriter.logged
  assert sorted({step for _, step in logged}) == list(range(1, steps + 1)), logged
  values.extend(logged['train_loss', step] for step in range(1, steps + 1))
  for step in range(1, steps + 1):
    for key in sorted(k for k in logged if k[1] == step and k[0] != 'train_loss'):
      values.extend([logged[key], step])
  final, final_state, epoch = ensemble_training.restore_checkpoint(optimizer, state,
                                                                   checkpoint_dir)
  assert int(epoch) == steps - 1, epoch
  held.extend([_driver.params_of(final), final_state, np.asarray(epoch, np.float64)])


values, held = [], []
for run_name in RUNS:
  run(run_name, values, held)
_driver.emit(values, held)
