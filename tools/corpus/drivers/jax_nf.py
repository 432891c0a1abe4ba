"""shayan-kousha/jax-nf at 25d9013a (RealNVP normalizing flow in Linen): the statements of
``example/real_nvp.py``'s ``train_real_nvp`` before its epoch loop, cut out of the program's
source and run as the program wrote them (or as migrate rewrote them): the program's
``MNIST`` loader (``dataset(logit=True, dequantize=True)``), the ``affineCoupling`` bijections
of ``translate_log_scale`` layers, ``create_flows``, ``optim.Adam(learning_rate=learning_rate)``
and ``optimizer_def.create(params)``, and the jitted ``loss_fn`` and ``train_step``
(``value_and_grad`` of the flow's negative log-likelihood at ``optimizer.target``, then
``optimizer.apply_gradient(grad)``). Then the program's loop body, STEPS epochs of 3 batches:
``train_step(optimizer, np.round(train_data, 4))`` on the program's batch slices, and after
each epoch ``loss_fn`` on the validation split and ``sample(params, 25)``, as the program's
``e % 5 == 0`` block does.

Sizes shrunk the same way on both sides by replacing two constants of the cut statements
(``hidden_nodes = 1024`` -> 32, ``num_layers = 10`` -> 4); ``learning_rate = 1e-4`` and
``batch_size = 100`` are the program's. Adam's rate has no schedule in this program (constant).

Synthetic data through the program's own loader: ``dataloader.mnist.root`` points to a
temporary folder holding ``mnist/mnist.pkl.gz``, a pickle of (train, validation, test) splits
of random pixels k / 256 (k in 0..255, as MNIST's; seed 0): 300, 50 and 10 images of 8x8 (64 dimensions) with random
labels, dequantised and logit-transformed by the program's ``MNIST.Data``. The trajectory:
every step's loss, then per epoch the validation loss and the 25 samples, then the final
parameters. Stand-ins: matplotlib (``disp_imdata`` and ``plt.savefig`` plots, not run).
"""
import _driver

program, steps = _driver.setup('matplotlib')
import ast  # noqa: E402
import gzip  # noqa: E402
import pathlib  # noqa: E402
import pickle  # noqa: E402
import tempfile  # noqa: E402

import numpy as onp  # noqa: E402

import dataloader.mnist  # noqa: E402
from example import real_nvp  # noqa: E402

SHRUNK = {'hidden_nodes': 32, 'num_layers': 4}

root = pathlib.Path(tempfile.mkdtemp(prefix='jax-nf-'))
(root / 'mnist').mkdir()
rng = onp.random.RandomState(0)
splits = tuple(((rng.randint(0, 256, (n, 64)) / 256).astype(onp.float32), rng.randint(0, 10, n))
               for n in (300, 50, 10))
with gzip.open(root / 'mnist' / 'mnist.pkl.gz', 'wb') as f:
  pickle.dump(splits, f)
dataloader.mnist.root = str(root) + '/'

# The statements of train_real_nvp before its first loop, the two size constants replaced.
source = pathlib.Path(real_nvp.__file__).read_text()
function = next(n for n in ast.parse(source).body
                if isinstance(n, ast.FunctionDef) and n.name == 'train_real_nvp')
body = []
for stmt in function.body:
  if isinstance(stmt, ast.For):
    break
  if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
      and isinstance(stmt.targets[0], ast.Name) and stmt.targets[0].id in SHRUNK):
    stmt.value = ast.Constant(SHRUNK[stmt.targets[0].id])
  body.append(stmt)
assert any(isinstance(s, ast.FunctionDef) and s.name == 'train_step' for s in body)
namespace = dict(vars(real_nvp), dataset=real_nvp.datasets['mnist'], monitor_every=10)
exec(compile(ast.fix_missing_locations(ast.Module(body=body, type_ignores=[])),
             real_nvp.__file__, 'exec'), namespace)

data, optimizer = namespace['data'], namespace['optimizer']
batch_size, num_training_data = namespace['batch_size'], namespace['num_training_data']
train_step, loss_fn, sample = namespace['train_step'], namespace['loss_fn'], namespace['sample']
jnp = real_nvp.np
losses = []
for e in range(steps):
  for batch in range(int(num_training_data / batch_size)):
    train_data = data.trn.x[batch * batch_size:(batch + 1) * batch_size]
    optimizer, loss_val = train_step(optimizer, jnp.round(train_data, 4))
    losses.append(loss_val)
  params = _driver.params_of(optimizer)
  losses.append(loss_fn(params, data.val.x))
  losses.extend(onp.ravel(onp.asarray(sample(params, 25))))
_driver.emit(losses, _driver.params_of(optimizer))
