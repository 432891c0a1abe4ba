"""google-research/language's `gscan/xattn_model` (a cross-attention transformer for grounded
SCAN: `train_utils.create_train_state` builds `MultiOptimizer((traversal, Adam(weight_decay=wd)),
(traversal, Adam(weight_decay=0)))` over `ModelParamTraversal(lambda path, _: ...)` filters of the
config's `no_weight_decay` names and keeps it in a `TrainState` dataclass; the pmapped
`train.train_step` clips the gradient and calls `state.optimizer.apply_gradient(grad,
learning_rate=lr)` with `lr = learning_rate_fn(state.step + 1)`, a warmup then step schedule).

The statements of `train.train_and_evaluate` that build the rng, the schedule, the model, the
state (through the program's `create_train_state`), the checkpoint restore, the replicated state,
the pmapped step and the per-device rngs run as the program wrote them (or as migrate rewrote
them); the driver then calls the step as the training loop does. The config is the program's
`configs/compositional.py` with the model of its own `test_utils.get_model_test_config()` (one
layer of each kind, 16 wide, vocabulary 10), a 4x4x15 grid, sequences of 6 and 8 tokens, batch 4,
`num_train_steps` = the steps and `warmup_proportion` 0.34 (so that a few steps see the warmup
and both step boundaries). Per step the loss (metrics' `loss` / `weight_sum`) and the rate, then
every final parameter. clu (checkpoints: its `MultihostCheckpoint` is replaced by one whose
restore hands the state back, as for an empty folder), tensorflow and tensorflow_datasets are
stand-ins (the data is random); the program's modules import each other as
`language.gscan.xattn_model.*`, which the driver maps to the copy. Needs ml_collections (`--site`).
"""
import sys
import tempfile
import types

import _driver

program, steps = _driver.setup('tensorflow', 'tensorflow_datasets', 'clu')
for name, path in (('language', []), ('language.gscan', []),
                   ('language.gscan.xattn_model', [str(program)])):
  sys.modules[name] = types.ModuleType(name)
  sys.modules[name].__path__ = path
import jax  # noqa: E402
import numpy as np  # noqa: E402
from language.gscan.xattn_model import test_utils  # noqa: E402
from language.gscan.xattn_model import train  # noqa: E402
from language.gscan.xattn_model.configs import compositional  # noqa: E402


class _Checkpoint:
  """clu's `MultihostCheckpoint` of a folder that holds no checkpoint yet."""

  def __init__(self, *_, **__):
    pass

  def restore_or_initialize(self, state):
    return state


config = compositional.get_config()
config.model = test_utils.get_model_test_config()
config.dataset.grid_size = 4
config.dataset.img_dim = 15
config.num_train_steps = steps
config.warmup_proportion = 0.34
seq, target_seq, batch_size = 6, 8, 4
inputs = {'token': np.ones((seq,), np.int32), 'txt_mask': np.ones((seq,), np.int32),
          'target_token': np.ones((target_seq,), np.int32),
          'target_txt_mask': np.ones((target_seq,), np.int32),
          'image': np.ones((4, 4, 15), np.float32)}
inputs = {k: v[None] for k, v in inputs.items()}

ns = _driver.run_statements(
    train, 'train_and_evaluate',
    ['rng', 'num_train_steps', 'learning_rate_fn', 'eval_config', 'train_config', 'model',
     'state', 'checkpoint_dir', 'ckpt', 'initial_step', 'p_train_step', 'train_rngs'],
    stop='train_metrics', config=config, workdir=tempfile.mkdtemp(), inputs=inputs,
    checkpoint=types.SimpleNamespace(MultihostCheckpoint=_Checkpoint))
state, train_rngs = ns['state'], ns['train_rngs']
data = np.random.RandomState(0)
values = []
for step in range(ns['initial_step'], steps + 1):
  txt_mask = (np.arange(seq) < data.randint(3, seq + 1, size=(batch_size, 1))).astype(np.int32)
  target_mask = (np.arange(target_seq) < data.randint(
      4, target_seq + 1, size=(batch_size, 1))).astype(np.int32)
  batch = {'token': data.randint(1, 10, size=(batch_size, seq)) * txt_mask,
           'txt_mask': txt_mask,
           'target_token': data.randint(1, 10, size=(batch_size, target_seq)) * target_mask,
           'target_txt_mask': target_mask,
           'image': data.rand(batch_size, 4, 4, 15).astype(np.float32)}
  batch = {k: v[None] for k, v in batch.items()}
  state, metrics = ns['p_train_step'](batch=batch, rng=train_rngs, state=state)
  values += [metrics['loss'][0] / metrics['weight_sum'][0], metrics['learning_rate'][0]]
final = jax.tree_util.tree_map(lambda x: x[0], state)
_driver.emit(values + [final.step], _driver.params_of(final.optimizer))
