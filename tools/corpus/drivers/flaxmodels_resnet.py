"""flaxmodels' training/resnet and its copies (`training.TrainState` has a `dynamic_scale` field
annotated with flax.optim's DynamicScale; `main` creates one only on a GPU).

On a CPU the driver creates the DynamicScale through the class the program's own TrainState
annotates the field with (flax.optim's, or what migrate rewrote the annotation to), so that the
loss-scaling path of `training.train_step` runs; a float32 ResNet18 of flaxmodels (folder passed
with `--also`), `optax.adam(1e-3)`, pmapped over one device, random 32x32 images.
"""
import _driver

program, steps = _driver.setup('tensorflow', 'tensorflow_datasets', 'tqdm', 'wandb', 'h5py',
                               'requests', 'regex', 'filelock', 'importlib_metadata', 'tokenizers')
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from flax import jax_utils  # noqa: E402
import optax  # noqa: E402
import flaxmodels as fm  # noqa: E402
import training  # noqa: E402

model = fm.ResNet18(output='log_softmax', pretrained=None, num_classes=10, dtype=jnp.float32)
variables = model.init(jax.random.PRNGKey(0), jnp.ones((1, 32, 32, 3), jnp.float32))
dynamic_scale = _driver.field_type(training.TrainState, 'dynamic_scale')()
state = training.TrainState.create(apply_fn=model.apply, params=variables['params'],
                                   tx=optax.adam(learning_rate=1e-3),
                                   batch_stats=variables['batch_stats'],
                                   dynamic_scale=dynamic_scale, epoch=0)
state = jax_utils.replicate(state)
p_train_step = jax.pmap(training.train_step, axis_name='batch')
rng = np.random.RandomState(0)
losses = []
for _ in range(steps):
  batch = {'image': rng.rand(1, 8, 32, 32, 3).astype(np.float32),
           'label': rng.randint(0, 10, size=(1, 8)).astype(np.int32)}
  state, metrics = p_train_step(state, batch)
  losses.append(metrics['loss'][0])
final = jax.tree_util.tree_map(lambda x: x[0], state)
_driver.emit(losses, (final.params, final.batch_stats))
