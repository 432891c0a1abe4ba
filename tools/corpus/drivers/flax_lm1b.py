"""flax's examples/lm1b of v0.3.x (flax.optim: `optim.Adam(..., weight_decay=config.weight_decay)`
built in `train.train_and_evaluate`, a pmapped `train_step` that sets the learning rate of every
step with `optimizer.apply_gradient(grad, learning_rate=lr)` from
`create_learning_rate_scheduler`, and folds `optimizer.state.step` into the dropout rng).

The statements of `train.train_and_evaluate` that build the model configs, init the
TransformerLM, build the optimizer (`optimizer_def`, `optimizer`), restore the checkpoint (the
program's `if config.restore_checkpoints:` block), replicate it, build the schedule,
`p_train_step` and the dropout rngs run as the program wrote them (or as migrate rewrote them),
with `configs/default.py`'s config shrunk: a 1-layer decoder (emb/qkv 16, mlp 32, 2 heads) over a
vocabulary of 32, sequences of 8, 2 examples per device, float32, weight decay 0.1 (the
default), rate 0.01 with warmup over 2 steps. `steps` pmapped steps (over every device: use
`--devices 2`) on random token ids with padding; then the unreplicated state is saved with the
program's `checkpoints.save_checkpoint` into its workdir (it must be the legacy format, one
msgpack file `checkpoint_<step>`), the statements run again with `restore_checkpoints` on (a
fresh optimizer restored from that file, `start_step` read back), and 2 more steps run.
Emitted: the loss of every step (the metrics' loss over the weights), `start_step`, then the
final params. Needs ml_collections (`--site`).
"""
import os
import tempfile

import _driver

program, steps = _driver.setup('tensorflow', 'tensorflow_datasets', 'clu', 'tensorboard',
                               'sentencepiece', 'tensorflow_text')
import flax.io  # noqa: E402
import jax  # noqa: E402
import numpy as np  # noqa: E402
from flax import jax_utils  # noqa: E402

_driver.plain_flax_io()   # checkpoints on the real file system, not the tensorflow stand-in

from configs import default  # noqa: E402
import train  # noqa: E402

config = default.get_config()
config.per_device_batch_size = 2
config.max_target_length = config.max_eval_target_length = config.max_predict_length = 8
config.num_layers, config.qkv_dim, config.emb_dim, config.mlp_dim = 1, 16, 16, 32
config.num_heads = 2
config.use_bfloat16 = False
config.warmup_steps = 2
config.learning_rate = 0.01
config.restore_checkpoints = False
workdir = tempfile.mkdtemp(prefix='flax_lm1b_')
names = ['train_config', 'eval_config', 'predict_config', 'start_step', 'rng', 'init_rng',
         'inference_rng', 'input_shape', 'm', 'initial_variables', 'optimizer_def', 'optimizer',
         'learning_rate_fn', 'p_train_step', 'dropout_rngs']
VOCAB = 32


def build():
  return _driver.run_statements(train, 'train_and_evaluate', names, stop='hooks',
                                config=config, workdir=workdir, vocab_size=VOCAB)


data = np.random.RandomState(0)
n_dev = jax.local_device_count()


def run(ns, n, losses):
  optimizer = ns['optimizer']
  for _ in range(n):
    shape = (n_dev, config.per_device_batch_size, config.max_target_length)
    inputs = data.randint(1, VOCAB, size=shape).astype(np.int32)
    inputs[..., 6:] = 0   # padding: weights 0
    optimizer, metrics = ns['p_train_step'](optimizer, {'inputs': inputs},
                                            dropout_rng=ns['dropout_rngs'])
    losses.append(metrics['loss'][0] / metrics['denominator'][0])
  return optimizer


losses = []
ns = build()
optimizer = run(ns, steps, losses)
train.checkpoints.save_checkpoint(workdir, jax_utils.unreplicate(optimizer), steps)
files = sorted(os.listdir(workdir))
assert files == [f'checkpoint_{steps}'] and os.path.isfile(os.path.join(workdir, files[0])), (
    f'not the legacy msgpack checkpoint: {files}')
config.restore_checkpoints = True
ns = build()
losses.append(ns['start_step'])
optimizer = run(ns, 2, losses)
_driver.emit(losses, _driver.params_of(jax_utils.unreplicate(optimizer)))
