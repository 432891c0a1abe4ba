"""PAIR-code's jax-recommenders at 1eed8118 (`recommenders/cfdnn`, a collaborative-filtering
DNN on MovieLens in Linen): the statements of `train_movielens_cfdnn.train_and_evaluate` that
build the rng, the model (`model_cfdnn.CfDnn`), its variables (`model.init` on the first
training batch), the optimizer (`optim.Adam(learning_rate=config.learning_rate).create(
variables['params'])`) and the program's `TrainState(step=0, optimizer=optimizer)`, then
`checkpoints.restore_checkpoint(config.workdir, state)` of an empty folder (flax's own, which
hands the state back), run as the program wrote them (or as migrate rewrote them); then STEPS
calls of the program's own `train_step(model, state, batch)` (`value_and_grad` of its
`eval_step`, `state.optimizer.apply_gradient(grad)`), not jitted: the program calls it eagerly.

The config is the program's `config_movielens_cfdnn.get_config()` with `features_dim` 8 and
`layers` [16, 8] (the DNN path, not only the dot product), learning rate 0.003 (the program has
no schedule). Synthetic data: 20 items, 15 users, batches of 8 random (item, user, rating in
1..5) triples, a new batch every step. The trajectory: the loss of every step, then every final
parameter. Stand-ins (data loading, metrics and logging, none on the computation path):
tensorflow, tensorflow_datasets, pandas (MovieLens loading), clu (metric writers, the parameter
overview, the work unit); `tfds.as_numpy` in the cut statements gets the driver's batch list;
`flax.io` is imported before the stand-ins, so that `restore_checkpoint` does not take the
tensorflow stand-in for `tf.io.gfile` (which would make the empty folder look like a checkpoint).
The program's modules import each other as `jax_recommenders.*`, which the driver maps to the
copy. Needs ml_collections (`--site`).
"""
import sys
import tempfile
import types

import _driver
import flax.io  # noqa: F401  before the tensorflow stand-in: its file functions stay the real ones

program, steps = _driver.setup('tensorflow', 'tensorflow_datasets', 'pandas', 'clu')
sys.modules['jax_recommenders'] = types.ModuleType('jax_recommenders')
sys.modules['jax_recommenders'].__path__ = [str(program)]
import numpy as np  # noqa: E402
from jax_recommenders.recommenders.cfdnn import config_movielens_cfdnn  # noqa: E402
from jax_recommenders.recommenders.cfdnn import train_movielens_cfdnn as train  # noqa: E402

ITEMS, USERS, BATCH = 20, 15, 8
data = np.random.RandomState(0)


def batch_of(data):
  return {'item_id': data.randint(0, ITEMS, size=(BATCH,)),
          'user_id': data.randint(0, USERS, size=(BATCH,)),
          'user_rating': data.randint(1, 6, size=(BATCH,)).astype(np.float32)}


config = config_movielens_cfdnn.get_config()
config.features_dim = 8
config.layers = [16, 8]
config.workdir = tempfile.mkdtemp()
first = batch_of(data)
ns = _driver.run_statements(
    train, 'train_and_evaluate', ['rng', 'model', 'variables', 'optimizer', 'state'],
    stop='epochs_done_count', config=config,
    datasets=types.SimpleNamespace(items=list(range(ITEMS)), users=list(range(USERS))),
    batched_train_ds=[first], tfds=types.SimpleNamespace(as_numpy=lambda ds: ds))
model, state = ns['model'], ns['state']
losses = []
for step in range(steps):
  batch = first if step == 0 else batch_of(data)
  state, loss = train.train_step(model, state, batch)
  losses.append(loss)
_driver.emit(losses + [state.step], _driver.params_of(state.optimizer))
