"""sbl1996's hax at b202d336, its flax.optim script ``snippets/test_train.py`` (a pre-activation
ResNet on CIFAR-10, pmapped, batch statistics, dropout): ``optim.Momentum(beta=0.9,
nesterov=True).create(params)`` with no learning rate, in the script's own ``TrainState``
dataclass (an ``optim.Optimizer`` field, migrated ``train_state.TrainState``) beside the batch
statistics, replicated; the pmapped ``train_step`` reads ``optimizer.state.step`` (migrated
``optimizer.step``), takes the learning rate of that step from ``cosine_lr`` (hax's optax
schedule) and passes it to ``apply_gradient(grad, learning_rate=lr)`` (migrated: the injected
``learning_rate`` hyperparameter set, then ``apply_gradients``).

The script has no functions to call for its set-up: everything is top-level code that loads
CIFAR-10 with tensorflow and trains 200 epochs. The driver executes the script's top-level
statements in order, as the program wrote them (or as migrate rewrote them), in a namespace of
its own, except the ones that read data or run the loops (``make_cifar10_dataset``,
``prefetch_to_device`` of the tf iterators, the epoch loop), and replaces, after the statement
that assigns them, three values: ``shape`` (8, 8, 3) for the script's (32, 32, 3),
``batch_size`` 8 and ``epochs`` 2 (so the cosine rate falls from 0.1 over 2 x
``steps_per_epoch`` = 2 x STEPS steps, and changes every step). ``steps_per_epoch`` = STEPS and
``test_steps`` = 1 are given for the data set's. The model is the script's ``ResNet(depth=10,
k=2, dropout=0.3)`` as the library at this commit spells it: the script predates hax's
``ResNet`` taking a ``block`` and ``channels`` (``ResNet(..., k=2)`` fails on both sides with
"unexpected keyword argument 'k'"), so the driver gives ``model`` =
``ResNet(depth=10, block=BasicBlock, channels=(16, 32, 64, 128), dropout=0.3,
num_classes=10)`` (hax's own widening, as in its ``wrn_28_10``, with k=2) for that statement;
``initialize_variables`` is the script's.

Then STEPS calls of the script's ``p_train_step`` (2 simulated devices: run with ``--devices
2``; per device 4 images) on synthetic batches (seed 0: normal images, one-hot labels of 10
classes), with the script's ``dropout_rngs``, then one ``p_eval_step`` on a new batch. The
script's ``sync_batch_stats`` is not called: it averages the module-level ``model_state`` (the
initial, unreplicated statistics), not the state's, and fails on 2 devices on both sides.

The trajectory: per step the loss, accuracy and learning rate ``p_train_step`` returns (device
0), then the eval loss and accuracy, then the final parameters and batch statistics
(unreplicated). Stand-ins: tensorflow, hanser (the script's data library). ``--site``: toolz.

One change on both sides, not a flax.optim matter: hax's ``hax/optim/sgd.py`` (imported by
``hax.optim``, not used by the script) imports ``optax._src.alias._scale_by_learning_rate``,
which today's optax does not have; the driver gives it ``optax.scale_by_learning_rate``.
"""
import ast

import _driver

program, steps = _driver.setup('tensorflow', 'hanser')
import jax  # noqa: E402
from flax import jax_utils  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from optax._src import alias  # noqa: E402

if not hasattr(alias, '_scale_by_learning_rate'):
  alias._scale_by_learning_rate = optax.scale_by_learning_rate

SCRIPT = program / 'snippets' / 'test_train.py'
SKIP = {'ds_train', 'train_iter', 'eval_iter', 'model'}
REPLACE = {'shape': (8, 8, 3), 'batch_size': 8, 'epochs': 2}
CLASSES, DEVICES = 10, jax.local_device_count()


def script_namespace(path, given):
  """The script's top-level statements, in order, as written, in a fresh namespace: not the
  loops nor those that assign a name of SKIP; after one that assigns a name of REPLACE, that
  name takes the driver's value."""
  source = path.read_text()
  namespace = {'__name__': 'test_train', '__file__': str(path), **given}
  for stmt in ast.parse(source).body:
    if isinstance(stmt, (ast.For, ast.While)):
      continue
    stored = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)
              and isinstance(n.ctx, ast.Store)}
    if stored & SKIP:
      continue
    exec(compile(ast.Module(body=[stmt], type_ignores=[]), str(path), 'exec'), namespace)
    namespace.update({k: v for k, v in REPLACE.items() if k in stored})
  return namespace


from hax.models.cifar import preactresnet  # noqa: E402

MODEL = preactresnet.ResNet(depth=10, block=preactresnet.BasicBlock,
                            channels=(16, 32, 64, 128), dropout=0.3, num_classes=CLASSES)
ns = script_namespace(SCRIPT, {'steps_per_epoch': steps, 'test_steps': 1, 'model': MODEL})
data = np.random.RandomState(0)
per_device = ns['batch_size'] // DEVICES


def batch():
  images = data.normal(size=(DEVICES, per_device) + ns['shape']).astype(np.float32)
  labels = np.eye(CLASSES, dtype=np.float32)[data.randint(0, CLASSES, (DEVICES, per_device))]
  return images, labels


state, dropout_rngs, values = ns['state'], ns['dropout_rngs'], []
for _ in range(steps):
  state, metrics, dropout_rngs = ns['p_train_step'](state, batch(), dropout_rng=dropout_rngs)
  values.extend(float(metrics[k][0]) for k in ('loss', 'accuracy', 'learning_rate'))
metrics = ns['p_eval_step'](state, batch())
values.extend(float(metrics[k][0]) for k in ('loss', 'accuracy'))
final = jax_utils.unreplicate(state)
_driver.emit(values, [_driver.params_of(final.optimizer), final.model_state])
