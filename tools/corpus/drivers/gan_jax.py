"""giganttheo's GAN-JAX (``src/``): each GAN's ``train`` method creates
``flax.optim.Adam(0.0002, 0.5, 0.999).create(...)`` for its two networks and steps them with the
module's jitted ``train_step`` (``apply_gradient`` inside it; WGAN's critic five times per step,
its gradient penalty a ``vmap`` of a ``grad``), beside BatchNorm statistics.

For ``models.vanilla_gan.VanillaGan`` and ``models.wgan.WGan``: the program's own ``train``
(``key = PRNGKey(41)`` as ``main.py`` passes it, ``verbose=0``), fed an iterator of random
8x28x28x1 images in [-1, 1] that ends the run after STEPS steps (it raises after the first batch,
which ``train`` reads for the shape, and STEPS more). ``train`` keeps its losses and optimizers
local, so the module's ``train_step`` is wrapped to record what it returns (the wrapper calls
it unchanged). The trajectory: per step the generator's and the discriminator's / critic's
loss; then, for each GAN, both networks' parameters and both BatchNorm statistics after the
last step. Stand-ins (not on the optimizer path): tensorflow, tensorflow_datasets (``data/``),
matplotlib and IPython (``utils.plot``, not reached with ``verbose=0``).
"""
import _driver

program, steps = _driver.setup('tensorflow', 'tensorflow_datasets', 'matplotlib', 'IPython',
                               source_dirs=('src',))
import jax  # noqa: E402
import numpy as np  # noqa: E402

from models import vanilla_gan, wgan  # noqa: E402


class Done(Exception):
  pass


def batches(n):
  rng = np.random.RandomState(0)
  for _ in range(n + 1):
    yield rng.uniform(-1, 1, (8, 28, 28, 1)).astype(np.float32)
  raise Done


losses, held = [], []
for module, cls in ((vanilla_gan, vanilla_gan.VanillaGan), (wgan, wgan.WGan)):
  step, last = module.train_step, []

  def recording(*args, step=step, last=last):
    out = step(*args)
    loss = out[0]
    losses.extend(loss[k] for k in sorted(loss))
    last[:] = out[1:5]
    return out

  module.train_step = recording
  try:
    cls().train(batches(steps), 10 ** 6, jax.random.PRNGKey(seed=41), verbose=0)
  except Done:
    pass
  vars_a, vars_b, optim_a, optim_b = last
  held.extend([_driver.params_of(optim_a), _driver.params_of(optim_b),
               vars_a['batch_stats'], vars_b['batch_stats']])
_driver.emit(losses, held)
