"""google-deepmind's jraph, its OGB example ``jraph/ogb_examples/train_flax.py`` (a Linen
``GraphNetwork`` classifying molecules, ogbg-molhiv): the program's own ``train`` (the
program's ``data_utils.DataReader`` on the driver's files, ``net.init``,
``optim.Adam(learning_rate=1e-4).create(params)``, ``jax.device_put``, then per step
``pad_graph_to_nearest_power_of_two`` and the program's ``train_step``: ``value_and_grad`` of
the masked cross-entropy, ``optimizer.apply_gradient``, run eagerly as the program runs it, no
jit; at the end the pickle of ``optimizer.target``, migrated ``params``), then its
``evaluate`` (the jitted loss of the pickled parameters over every graph of a split). The jraph
imported is the program's own (the repository's ``jraph`` package, migrated with it).

Synthetic data (seed 0), written as the OGB files ``DataReader`` reads (gzipped CSV): 12
molecules of 3 to 9 atoms, 9 node and 3 edge features (integers, as OGB's), about one bond an
atom stored one way (the reader adds the reverse), binary labels; the training split is 8 of
them, the evaluation split all 12. Batch size 2 (``jraph.batch``), STEPS steps
(``num_training_steps``), so the padded shapes change from step to step.

The trajectory: per step the loss and accuracy ``train_step`` returns (recorded by a wrapper
of the program's function, which ``train`` calls by its module name), then the loss and
accuracy of ``evaluate``, then the pickled parameters. Stand-ins: pandas (not installed; the
driver gives ``data_utils.pd`` a ``read_csv`` for these CSV files: a frame with ``values``,
``astype`` and integer columns, ints kept as int64 as pandas infers).
"""
import gzip
import os
import pickle
import tempfile

import _driver

program, steps = _driver.setup('pandas')
import numpy as np  # noqa: E402

from jraph.ogb_examples import data_utils  # noqa: E402
from jraph.ogb_examples import train_flax  # noqa: E402

GRAPHS, NODE_FEATURES, EDGE_FEATURES, TRAIN = 12, 9, 3, 8


class Frame:
  """What the reader uses of a pandas DataFrame."""

  def __init__(self, values):
    self.values = values

  def astype(self, dtype):
    return Frame(self.values.astype(dtype))

  def __getitem__(self, column):
    return self.values[:, column]


def read_csv(fp, compression=None, header=None, index_col=None):
  del header
  if index_col is not None:   # master.csv: the dataset's description, only stored
    return {'ogbg-molhiv': None}
  text = gzip.decompress(fp.read()).decode() if compression == 'gzip' else fp.read()
  rows = [line.split(',') for line in text.split()]
  try:
    return Frame(np.array(rows, np.int64))
  except ValueError:
    return Frame(np.array(rows, np.float64))


def write_csv(path, array):
  with gzip.open(path, 'wt') as f:
    for row in np.asarray(array).reshape(len(array), -1):
      f.write(','.join(str(v) for v in row) + '\n')


data_utils.pd.read_csv = read_csv
data = np.random.RandomState(0)
folder = tempfile.mkdtemp(prefix='jraph-ogb-')
n_node = data.randint(3, 10, GRAPHS)
n_edge = n_node - 1 + data.randint(0, 2, GRAPHS)
senders, receivers = [], []
for n, e in zip(n_node, n_edge):
  senders.append(data.randint(0, n, e))
  receivers.append((senders[-1] + 1 + data.randint(0, n - 1, e)) % n)
write_csv(f'{folder}/edge.csv.gz', np.stack([np.concatenate(senders),
                                             np.concatenate(receivers)], 1))
write_csv(f'{folder}/num-node-list.csv.gz', n_node)
write_csv(f'{folder}/num-edge-list.csv.gz', n_edge)
write_csv(f'{folder}/node-feat.csv.gz', data.randint(0, 5, (n_node.sum(), NODE_FEATURES)))
write_csv(f'{folder}/edge-feat.csv.gz', data.randint(0, 3, (n_edge.sum(), EDGE_FEATURES)))
write_csv(f'{folder}/graph-label.csv.gz', data.randint(0, 2, GRAPHS))
write_csv(f'{folder}/train.csv.gz', np.sort(data.permutation(GRAPHS)[:TRAIN]))
write_csv(f'{folder}/all.csv.gz', np.arange(GRAPHS))
with open(f'{folder}/master.csv', 'w') as f:
  f.write(',ogbg-molhiv\nnum tasks,1\n')

values = []
train_step = train_flax.train_step


def recording_train_step(optimizer, graph, label, net):
  optimizer, scalars = train_step(optimizer, graph, label, net)
  values.extend([scalars['loss'], scalars['accuracy']])
  return optimizer, scalars


train_flax.train_step = recording_train_step
save_dir = tempfile.mkdtemp(prefix='jraph-ogb-params-')
train_flax.train(folder, f'{folder}/master.csv', f'{folder}/train.csv.gz', 2, steps, save_dir)
values.extend(train_flax.evaluate(folder, f'{folder}/master.csv', f'{folder}/all.csv.gz',
                                  save_dir))
with open(os.path.join(save_dir, 'molhiv.pkl'), 'rb') as fp:
  params = pickle.load(fp)
_driver.emit(values, params)
