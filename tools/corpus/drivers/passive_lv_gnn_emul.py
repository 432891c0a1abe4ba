"""dodaltuin's passive-lv-gnn-emul (a graph network emulator of passive left-ventricle
mechanics, Linen): the program's own ``main.train``, twice, as its README runs it:

* varying geometry (``fixed_geom=False``): the program's ``data_utils.DataLoader`` reads the
  driver's synthetic ``.npy`` files, ``utils.initialise_emulator`` builds the
  ``DeepGraphEmulator`` (encoders, K=2 message-passing steps, theta encoder, one decoder per
  output dimension) and ``model.init``, ``optim.Adam(learning_rate=lr).create(params)``, the
  jitted ``train_step`` (``state.apply_gradient``) over every graph of a shuffled epoch
  (``train_epoch``), ``validate_epoch`` on ``state.target``, and ``utils.save_trained_params``
  (a pickle of the best parameters);
* fixed geometry (``fixed_geom=True``, ``trained_params_dir`` = the first run's folder):
  ``init_fixed_geom_emulator_from_varying`` reads that pickle, precomputes the message passing
  (``sow_latents``), takes the theta encoder's parameters with ``.unfreeze()`` (migrated
  ``flax.core.unfreeze(...)``) and the decoders' into a ``DeepGraphEmulatorFixedGeom``, which
  the same ``train`` optimizes with a new Adam.

STEPS epochs each, learning rate 1e-3 (the flag's 5e-5 scaled up so the parameters move),
``n_shape_coeff`` 2, K 2. Shrunk: ``main.create_config_dict`` re-made with the program's
``utils.create_config_dict`` and MLP widths [16, 16], local embedding 8 (the module's
constants: [128, 128] and 40). Synthetic data (seed 0), written where ``DataLoader`` reads
(``data/<name>/...`` under a temporary working folder): 10 nodes (7 real, 3 virtual), 18
directed edges, 4 node and 3 edge features, 3 global parameters, 3 shape coefficients, 3-d
displacements; 4 training and 3 validation graphs; the normalisation statistics; for the fixed
run a second data set of one geometry (the same nodes and edges in every graph, one row of
shape coefficients, as ``init_fixed_geom_emulator_from_varying`` tiles it), new displacements
and global parameters.

The trajectory: per run and epoch, the ``train_loss`` and ``valid_loss`` the program writes to
its summary writer (a recorder in place of ``flax.metrics.tensorboard.SummaryWriter``); then
per run the parameters of ``trainedNetworkParams.pkl`` (``save_trained_params``: the optimizer
target, migrated ``params``, of the best validation epoch), the fixed run's
``theta_encode_params.pkl`` and ``latent_nodal_values.npy``. Stand-ins: tensorflow and tensorboard
(imported by ``flax.metrics.tensorboard``, whose writer the recorder replaces).
"""
import os
import pickle
import tempfile

import _driver

program, steps = _driver.setup('tensorflow', 'tensorboard')
import functools  # noqa: E402

import numpy as np  # noqa: E402

import main  # noqa: E402
import utils  # noqa: E402

NAME, GRAPHS = 'synthetic', {'train': 4, 'validation': 3}
REAL, VIRTUAL, EDGES, SHAPE, THETA, OUT = 7, 3, 18, 3, 3, 3


class SummaryWriter:
  """Records the scalars the program logs."""
  logged = []

  def __init__(self, log_dir):
    del log_dir

  def scalar(self, name, value, step):
    SummaryWriter.logged.append((name, int(step), float(np.asarray(value))))

  def hparams(self, hparams):
    del hparams

  def flush(self):
    pass


def write_data(root, name, fixed):
  """The files ``DataLoader`` reads; ``fixed``: one geometry (one row of shape coefficients,
  the same nodes and edges in every graph), as the fixed-geometry data are."""
  data = np.random.RandomState(1 if fixed else 0)
  base = os.path.join(root, 'data', name)
  for sub in ('topologyData', 'normalisationStatistics', 'processedData/train',
              'processedData/validation'):
    os.makedirs(os.path.join(base, sub))
  nodes = REAL + VIRTUAL
  senders = data.randint(0, nodes, EDGES)
  receivers = (senders + 1 + data.randint(0, nodes - 1, EDGES)) % nodes
  np.save(f'{base}/topologyData/sparse-topology.npy', np.stack([senders, receivers], 1))
  np.save(f'{base}/topologyData/node-layer-labels.npy', np.array([0] * REAL + [1] * VIRTUAL))
  stats = f'{base}/normalisationStatistics'
  np.save(f'{stats}/real-node-displacement-mean.npy', data.normal(size=OUT) * 0.1)
  np.save(f'{stats}/real-node-displacement-std.npy', 1 + data.uniform(size=OUT))
  np.save(f'{stats}/global-features-mean.npy', data.normal(size=THETA))
  np.save(f'{stats}/global-features-std.npy', 1 + data.uniform(size=THETA))
  geometry = [data.normal(size=(1, nodes, 4)), data.normal(size=(1, EDGES, 3)),
              data.normal(size=(1, REAL, 3)), data.normal(size=(1, SHAPE))]
  for kind, count in GRAPHS.items():
    folder = f'{base}/processedData/{kind}'
    per_graph = [np.repeat(a, count, 0) for a in geometry] if fixed else [
        data.normal(size=(count,) + a.shape[1:]) for a in geometry]
    nodes_, edges, coords, shape = per_graph
    np.save(f'{folder}/augmented-node-features.npy', nodes_)
    np.save(f'{folder}/edge-features.npy', edges)
    np.save(f'{folder}/real-node-coords.npy', coords)
    np.save(f'{folder}/shape-coeffs.npy', shape[:1] if fixed else shape)
    np.save(f'{folder}/real-node-displacement.npy', data.normal(size=(count, REAL, OUT)))
    np.save(f'{folder}/global-features.npy', data.normal(size=(count, THETA)))


main.tensorboard.SummaryWriter = SummaryWriter
main.create_config_dict = functools.partial(utils.create_config_dict, local_embed_dim=8,
                                            mlp_features=[16, 16], rng_seed=main.RNG_SEED)
os.chdir(tempfile.mkdtemp(prefix='passive-lv-'))
write_data('.', NAME, False)
write_data('.', NAME + '_fixed', True)
values, held = [], []
trained_params_dir = 'None'
for fixed_geom, name in ((False, NAME), (True, NAME + '_fixed')):
  SummaryWriter.logged = []
  main.train(name, 2, 2, steps, 1e-3, trained_params_dir, fixed_geom, '')
  logged = {(name, step): value for name, step, value in SummaryWriter.logged}
  assert len(logged) == 2 * steps, SummaryWriter.logged
  values.extend(logged[name, epoch] for epoch in range(steps)
                for name in ('train_loss', 'valid_loss'))
  folder = main.create_savedir(name, 2, 2, steps, 1e-3, '')
  with open(folder + 'trainedNetworkParams.pkl', 'rb') as fp:
    held.append(pickle.load(fp))
  trained_params_dir = folder
with open(trained_params_dir + 'theta_encode_params.pkl', 'rb') as fp:
  held.append(pickle.load(fp))
held.append(np.load(trained_params_dir + 'latent_nodal_values.npy'))
_driver.emit(values, held)
