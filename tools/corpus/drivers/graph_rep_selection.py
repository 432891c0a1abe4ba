"""SauravMaheshkar's Graph-Representative-Selection (RS-GNN, representative selection with a
graph network, after google-research's rs_gnn; Linen and jraph): the program's own training
code, as google-research's ``main`` runs it (the program has no main script at this commit):

* ``src.io.utils.create_jraph`` reads a synthetic ``.npz`` graph (CSR adjacency, dense
  attributes, labels) the driver writes, symmetrises it, adds self loops, one-hot labels;
* ``src.nn.engine.train_rsgnn`` with the config of ``src.configs.rsgnn.get_config`` and
  ``get_rsgnn_flags``: ``create_model`` (``RSGNN``: DGI encoder, ``EucCluster``),
  ``create_optimizer(config, init_params)`` (``optim.Adam(learning_rate=...,
  weight_decay=0.0).create``), the jitted ``train_step`` (DGI loss on a corrupted graph plus
  the cluster loss, ``optimizer.apply_gradient``) every epoch, then the representatives;
* ``train_gcn`` on splits whose training nodes are those representatives (as the
  reference's ``main``): ``create_optimizer(config, init_params, config.w_decay)``, so Adam's
  decoupled weight decay (0.05 here, the config's 5e-4 scaled up so that it moves the
  parameters), the jitted ``train_step`` (masked cross-entropy of a two-layer ``GCN``).

Config shrunk: RS-GNN width 16, GCN width 8, learning rate 0.01, STEPS epochs for each model,
``valid_epochs`` 1 (the program's ``BestKeeper`` gets every epoch's result and parameters),
dropout 0.5 and PReLU as in the config. The synthetic graph: 40 nodes, 12 attributes, 3
classes, about 4 edges a node (seed 0); validation and test masks of 10 nodes each among the
others.

The trajectory: per ``BestKeeper.update`` (the program's class, recorded by a subclass that
then calls it: every epoch of both models) the loss or the validation accuracy, then the
representatives' ids, the test accuracy ``train_gcn`` returns, and every parameter the two
``BestKeeper``s saw last (the last epoch's optimizer target, migrated ``params``).
Stand-ins: none (jraph, ml_collections and scipy as installed).
"""
import collections
import os
import tempfile

import _driver

program, steps = _driver.setup()
import jax  # noqa: E402
import numpy as np  # noqa: E402

from src.configs import rsgnn  # noqa: E402
from src.io import utils as io_utils  # noqa: E402
from src.nn import engine  # noqa: E402

NODES, FEATURES, CLASSES = 40, 12, 3
seen = []


class RecordingBestKeeper(engine.BestKeeper):
  """The program's ``BestKeeper``; every update also recorded."""

  def update(self, epoch, result, params, print_to_io=True):
    seen.append((float(result), params))
    super().update(epoch, result, params, print_to_io)


engine.BestKeeper = RecordingBestKeeper

data = np.random.RandomState(0)
senders = data.randint(0, NODES, 4 * NODES)
receivers = data.randint(0, NODES, 4 * NODES)
adjacency = np.zeros((NODES, NODES), np.float32)
adjacency[senders, receivers] = 1.0
rows, cols = np.nonzero(adjacency)
indptr = np.searchsorted(rows, np.arange(NODES + 1))
folder = tempfile.mkdtemp(prefix='rsgnn-') + os.sep
np.savez(folder + 'synthetic.npz', adj_data=np.ones(len(cols), np.float32), adj_indices=cols,
         adj_indptr=indptr, adj_shape=np.array([NODES, NODES]),
         attr_matrix=data.normal(size=(NODES, FEATURES)).astype(np.float32),
         labels=np.arange(NODES) % CLASSES)
graph, labels, num_classes = io_utils.create_jraph(folder, 'synthetic')

config = rsgnn.get_config()
config.rsgnn_hidden_dim, config.gcn_c_hidden_dim = 16, 8
config.rsgnn_epochs = config.gcn_c_epochs = steps
config.valid_epochs, config.learning_rate = 1, 0.01
rsgnn_flags = rsgnn.get_rsgnn_flags(num_classes, config.copy_and_resolve_references())
rng = jax.random.PRNGKey(config.seed)
rng, rsgnn_rng, gcn_rng = jax.random.split(rng, 3)
rep_ids = engine.train_rsgnn(rsgnn_flags, graph, rsgnn_rng)

gcn_flags = config.copy_and_resolve_references()
gcn_flags.hid_dim, gcn_flags.epochs = config.gcn_c_hidden_dim, config.gcn_c_epochs
gcn_flags.num_classes, gcn_flags.w_decay = num_classes, 0.05
others = np.setdiff1d(np.arange(NODES), rep_ids)
masks = [np.zeros(NODES, bool) for _ in range(3)]
masks[0][rep_ids] = True
masks[1][others[:10]] = True
masks[2][others[10:20]] = True
Splits = collections.namedtuple('Splits', ['train', 'valid', 'test'])
accuracy = engine.train_gcn(gcn_flags, graph, labels, gcn_rng, Splits(*masks))

values = [result for result, _ in seen] + list(np.asarray(rep_ids, np.float64)) + [accuracy]
_driver.emit(values, [seen[steps - 1][1], seen[-1][1]])
