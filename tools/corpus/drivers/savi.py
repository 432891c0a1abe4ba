"""google-research's slot-attention-video at ba8f15ee (`savi`: SAVi, slot attention for video,
in Linen): the statements of `savi.lib.trainer.train_and_evaluate` that build the rng, the model
(`utils.build_model_from_config`), the schedule (`optax.warmup_cosine_decay_schedule`), the
optimizer definition (`flax.optim.Adam(learning_rate=config.learning_rate)`), the metrics
collection, the program's `init_model` and its `optimizer_def.create(initial_params)` inside
`utils.TrainState(step=1, ...)`, the loss (`losses.compute_full_loss`), the checkpoint restore,
the replicated state and the pmapped `train_step` (axis "batch", donated arguments, the model,
loss, schedule and metrics class static) run as the program wrote them (or as migrate rewrote
them); the driver then calls `p_train_step` and replaces the state's fields as the training loop
does. The step: `value_and_grad` of the model, `pmean` of the gradient, the program's
`utils.clip_grads` to `max_grad_norm`, `opt.apply_gradient(grad, learning_rate=
learning_rate_fn(step - 1))`, then the clu metrics (loss, ARI, ARI without background).

Two CPU devices (run it with `both_ways.py --devices 2`), so the pmean is across two
replicas. The config is the program's
`configs/movi/savi_conditional_small.py`, shrunk: 16x16 frames, 3 frames, 2 examples per device,
3 instances (4 slots with the background), an 8-wide two-layer encoder CNN, slots and attention
16 wide, a two-layer decoder CNN from 8x8 (one transposed stride-2 layer); `warmup_steps` 2,
`num_train_steps` = the steps and `learning_rate` 1e-3 (so the rate changes every step: warmup,
then cosine decay); `max_grad_norm` 0.05 as the program has it (the clipping is active).
Synthetic data: random video, flow, boxes, segmentations, a padding mask of ones and a mask of
trues, a new batch every step. The trajectory: per step the loss and the two ARIs (the clu
metrics the step returns, computed), then every final parameter, the model's state variables and
the step counter. Stand-ins (data loading, logging, plotting; none on the computation path):
tensorflow, tensorflow_datasets, skimage, matplotlib, and clu's checkpoint, metric_writers,
parameter_overview, periodic_actions, deterministic_data, preprocess_spec and platform modules
(`clu.metrics` itself is clu 0.0.12's, from `--site`); the checkpoint is one whose restore hands
the state back, as for an empty folder. `misc.GRU` calls `nn.GRUCell()` without `features`,
which today's flax refuses (`missing 1 required positional argument: 'features'`, on both sides;
neither migrate nor the package handles it, it is no flax.optim name): the driver gives both sides
a `flax.linen.GRUCell` whose `features` defaults (`__call__` takes the width from the carry, as
flax 0.5.3's did; the same gates and initializers). Needs ml_collections, clu 0.0.12 and wrapt
(`--site`).
"""
import sys
import tempfile
import types

import _driver  # noqa: E402

program, steps = _driver.setup('tensorflow', 'tensorflow_datasets', 'skimage', 'matplotlib')
for name in ('checkpoint', 'metric_writers', 'parameter_overview', 'periodic_actions',
             'deterministic_data', 'preprocess_spec', 'platform'):
  # pylint: disable-next=protected-access
  sys.modules['clu.' + name] = _driver._StandIn(name='clu.' + name)
import flax.linen  # noqa: E402
import jax  # noqa: E402
import numpy as np  # noqa: E402

assert jax.device_count() == 2, 'run it with both_ways.py --devices 2'


class GRUCell(flax.linen.GRUCell):
  """flax 0.5.3's `GRUCell()`, which had no `features` (today's requires it; its `__call__`
  still reads the width from the carry, only `initialize_carry` uses `features`)."""
  features: int = -1


flax.linen.GRUCell = GRUCell
from savi.configs.movi import savi_conditional_small  # noqa: E402
from savi.lib import trainer  # noqa: E402

DEVICES, PER_DEVICE, FRAMES, SIZE, INSTANCES = jax.local_device_count(), 2, 3, 16, 3
assert DEVICES == 2, DEVICES


class _Checkpoint:
  """clu's `MultihostCheckpoint` of a folder that holds no checkpoint yet."""

  def __init__(self, *_, **__):
    pass

  def restore_or_initialize(self, state):
    return state


config = savi_conditional_small.get_config()
config.batch_size = DEVICES * PER_DEVICE
config.num_train_steps = steps
config.learning_rate = 1e-3
config.warmup_steps = 2
config.max_instances = INSTANCES
config.num_slots = INSTANCES + 1
m = config.model
m.encoder.backbone.features = [8, 8]
m.encoder.backbone.kernel_size = [(3, 3), (3, 3)]
m.encoder.backbone.strides = [(1, 1), (1, 1)]
m.encoder.backbone.layer_transpose = [False, False]
m.encoder.pos_emb.output_transform.hidden_size = 16
m.corrector.qkv_size = 16
m.predictor.num_heads = 2
m.predictor.qkv_size = 16
m.predictor.mlp_size = 32
m.initializer.embedding_transform.hidden_size = 16
m.initializer.embedding_transform.output_size = 16
m.decoder.backbone.features = [16, 16]
m.decoder.backbone.kernel_size = [(3, 3), (3, 3)]
m.decoder.backbone.strides = [(2, 2), (1, 1)]
m.decoder.backbone.layer_transpose = [True, False]

shapes = {'video': (FRAMES, SIZE, SIZE, 3), 'boxes': (FRAMES, INSTANCES, 4)}
train_ds = types.SimpleNamespace(element_spec={
    k: types.SimpleNamespace(shape=(DEVICES, PER_DEVICE) + v) for k, v in shapes.items()})

ns = _driver.run_statements(
    trainer, 'train_and_evaluate',
    ['rng', 'model', 'learning_rate_fn', 'optimizer_def', 'train_metrics_cls', 'state_vars',
     'initial_params', 'optimizer', 'state', 'loss_fn', 'checkpoint_dir', 'ckpt', 'initial_step',
     'p_train_step'],
    stop='train_metrics', config=config, workdir=tempfile.mkdtemp(), train_ds=train_ds,
    checkpoint=types.SimpleNamespace(MultihostCheckpoint=_Checkpoint))
model, state, p_train_step = ns['model'], ns['state'], ns['p_train_step']

data = np.random.RandomState(0)
lead = (DEVICES, PER_DEVICE, FRAMES)
values = []
for step in range(ns['initial_step'], config.num_train_steps + 1):
  corners = np.sort(data.rand(*lead, INSTANCES, 2, 2), axis=-2).astype(np.float32)
  batch = {
      'video': data.rand(*lead, SIZE, SIZE, 3).astype(np.float32),
      'flow': data.rand(*lead, SIZE, SIZE, 3).astype(np.float32),
      'boxes': corners.reshape(*lead, INSTANCES, 4),
      'segmentations': data.randint(0, INSTANCES + 1, size=(*lead, SIZE, SIZE)).astype(np.int32),
      'padding_mask': np.ones((*lead, SIZE, SIZE), np.int32),
      'mask': np.ones((DEVICES, PER_DEVICE), bool),
  }
  opt, state_vars, rng, metrics_update, p_step = p_train_step(
      model, state.rng, state.step, state.variables,
      state.optimizer, batch, ns['loss_fn'], ns['learning_rate_fn'],
      ns['train_metrics_cls'],
      config.num_slots,
      config.max_instances + 1,  # Incl. background.
      config.get('conditioning_key'),
      config.get('max_grad_norm'))
  state = state.replace(optimizer=opt, step=p_step, variables=state_vars, rng=rng)
  result = jax.tree_util.tree_map(np.asarray, ns['flax'].jax_utils.unreplicate(
      metrics_update).compute())
  values += [result['loss'], result['ari'], result['ari_nobg']]
final = ns['flax'].jax_utils.unreplicate(state)
_driver.emit(values + [final.step], [_driver.params_of(final.optimizer), final.variables])
