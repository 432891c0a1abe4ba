"""chaeyeunpark/are-neural-quantum-states-good (`python_src/sign_supervised.py`: supervised
learning of a ground state's sign structure; its `__main__` block builds `optim.Adam(learning_rate
= learning_rate)` and `optimizer_def.create(params)` for a Linen `ConvNet1D`, trains eagerly:
`jax.value_and_grad(loss_func)(optimizer.target, xs, ys)`, an overlap with the exact signs every
`save_overlap_per` epochs, `optimizer.apply_gradient(grad)`, then writes
`serialization.to_bytes(optimizer.target)` to `model_final.fl` and pickles
`optimizer.state_dict()` to `adam_state.pk`).

The script runs whole as `__main__` (`runpy`), as the program wrote it (or as migrate rewrote it),
with its own command line: a J1-J2 chain of 8 sites (`--data-path J1J2_N8_J2_040`), width 4,
mini-batches of 16, rate 1e-2. Its data comes from a C++ extension (`basis_numpy.Basis1DZ2`, the
basis of the chain's Z2-symmetric sector and the exact ground state read from the data path),
which is not built here: the driver gives a stand-in of the same methods, a random basis of 2^8
configurations with random coefficients and random labelled mini-batches (fixed seed). The
number of epochs (`TOTAL_EPOCHS`, from `utils.dataset_total_and_save`'s dataset sizes) is set to
the driver's steps and the overlap is written every 2 epochs, through that function's two sizes.
Per epoch the printed loss, then every overlap written to `overlap.dat`, every final parameter
read back from `model_final.fl`, and every leaf of the pickled `adam_state.pk` (target, step, the
Adam moments) (keys sorted); the files stay in the copy, for their layout to be
compared too.
"""
import contextlib
import io
import pickle
import re
import runpy
import sys
import types

import _driver

program, steps = _driver.setup(source_dirs=('python_src',))
import numpy as np  # noqa: E402
from flax import serialization  # noqa: E402

N, MINBATCH, WIDTH, RATE = 8, 16, 4, 1e-2


class Basis1DZ2:
  """Stands for the C++ `basis_numpy.Basis1DZ2`: the methods the script calls, on random data."""

  def __init__(self, n, _z2):
    self.N = n
    self._rng = np.random.RandomState(0)
    self._coeffs = self._rng.randn(2 ** n)
    self._coeffs /= np.linalg.norm(self._coeffs)

  def load_data(self, _path):
    pass

  def get_dim(self):
    return 2 ** self.N

  def coeffs_tensor(self):
    return self._coeffs

  def basis_vectors(self, i):
    return [i]

  @staticmethod
  def to_bin_array(n, value):
    return np.array([(value >> k) & 1 for k in range(n)], np.int32)

  def generate_batch(self, size):
    xs = self._rng.randint(0, 2, size=(size, self.N)).astype(np.int32)
    ys = self._rng.randint(0, 2, size=(size,)).astype(np.float32)
    return ys, xs


sys.modules['basis_numpy'] = types.SimpleNamespace(Basis1DZ2=Basis1DZ2)
import utils  # noqa: E402  the program's own: the script imports its function from it

total = next(t for t in range(1, 10 ** 6) if int((250 / 150) * t // MINBATCH) == steps)
utils.dataset_total_and_save = lambda n, dim: (total, 2 * MINBATCH)
_driver.program_argv('sign_supervised.py', '--data-path', f'J1J2_N{N}_J2_040', '--width', WIDTH,
                     '--minbatch-size', MINBATCH, '--learning-rate', RATE)
printed = io.StringIO()
with contextlib.redirect_stdout(printed):
  runpy.run_path(str(program / 'python_src' / 'sign_supervised.py'), run_name='__main__')
losses = [float(m) for m in re.findall(r'^epoch: \d+, loss: (\S+)$', printed.getvalue(), re.M)]
assert len(losses) == steps, printed.getvalue()[-2000:]
overlaps = [float(line.split('\t')[1]) for line in open('overlap.dat')]
final = serialization.msgpack_restore(open('model_final.fl', 'rb').read())
with open('adam_state.pk', 'rb') as f:
  state_dict = pickle.load(f)
print('adam_state.pk:', {k: sorted(v) for k, v in state_dict.items()}, file=sys.stderr)
_driver.emit(losses + overlaps, (final, state_dict))
