"""lan496's jax-xtal at a01938d5 (CGCNN, a crystal graph network in Linen): the program's own
``train_utils.create_train_state`` (``model.init``, ``variables.pop("params")``,
``create_optimizer``'s ``optim.Adam(learning_rate=...).create(params)`` inside the program's
``TrainState`` dataclass) and its jitted ``train_one_step`` (``optimizer.apply_gradient(grads,
learning_rate=learning_rate_fn(step))`` with an L2 penalty, BatchNorm statistics as the model
state), STEPS steps.

Synthetic data through the program's own ``collate_pool``: four crystals of 3, 5, 2 and 4
atoms, 8 initial atom features, 4 neighbours, 6 bond features, a random target each; the same
batch every step. The learning rate is the program's ``multi_step_lr`` (``main.py``'s partial)
with ``steps_per_epoch=1, milestones=2``: 0.01, then divided by 10 every two steps, so the
per-step learning rate changes inside the run. At this commit ``create_train_state`` ends in
``pdb.set_trace()``; ``pdb.set_trace`` is a no-op here on both sides (not on the computation
path). The trajectory: per step the loss, the MAE and the learning rate the step returns; then
the parameters and the BatchNorm statistics after the last step. Stand-ins (imported by
``jax_xtal/data.py`` for reading structures, not on the optimizer path): pymatgen, joblib,
pandas, tqdm.
"""
import _driver

program, steps = _driver.setup('pymatgen', 'joblib', 'pandas', 'tqdm')
import functools  # noqa: E402
import pdb  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402

pdb.set_trace = lambda *args, **kwargs: None

from jax_xtal import train_utils  # noqa: E402
from jax_xtal.data import collate_pool  # noqa: E402
from jax_xtal.model import CGCNN  # noqa: E402

NEIGHBORS, ATOM_FEATURES, BOND_FEATURES = 4, 8, 6
rng = np.random.RandomState(0)
samples = []
for atoms in (3, 5, 2, 4):
  samples.append({
      'atom_features': rng.normal(size=(atoms, ATOM_FEATURES)).astype(np.float32),
      'bond_features': rng.uniform(size=(atoms, NEIGHBORS, BOND_FEATURES)).astype(np.float32),
      'neighbor_indices': rng.randint(0, atoms, (atoms, NEIGHBORS)),
      'target': rng.normal(size=(1,)).astype(np.float32),
  })
batch = collate_pool(samples)

model = CGCNN(num_atom_features=16, num_convs=2, num_hidden_layers=1, num_hidden_features=16)
state = train_utils.create_train_state(
    rng=jax.random.PRNGKey(0), model=model, max_num_neighbors=NEIGHBORS,
    num_initial_atom_features=ATOM_FEATURES, num_bond_features=BOND_FEATURES,
    learning_rate=0.01, normalizer=train_utils.Normalizer(0.5, 2.0))
learning_rate_fn = functools.partial(
    train_utils.multi_step_lr, steps_per_epoch=1, learning_rate=0.01, milestones=2)

losses = []
for _ in range(steps):
  state, metrics = train_utils.train_one_step(model.apply, batch, state, learning_rate_fn, 1e-4)
  losses.extend([metrics['loss'], metrics['mae'], metrics['learning_rate']])
_driver.emit(losses, [_driver.params_of(state.optimizer), state.model_state])
