"""Idioms of public programs migrate had never been run on (a batch measured from outside the
corpus), each a short program modeled on the real code:

* A repository's program lives in a sub-folder and is run from it (``python train.py`` in
  ``mipnerf/``): its files import their siblings by bare names (``from internal import utils``
  for ``mipnerf/internal/utils.py``), which Python resolves against the script's folder on
  ``sys.path``. Given the whole repository, those imports resolve to the sub-folder's files, and
  the optimizer stored in ``utils.TrainState`` is followed there.
"""
import pathlib

import pytest

pytest.importorskip('libcst')

# pylint: disable=g-import-not-at-top
from flax_optim_compat._migrate import _engine
from flax_optim_compat._migrate import _program

UTILS = '''import flax
from flax import optim


@flax.struct.dataclass
class TrainState:
  optimizer: optim.Optimizer
'''

TRAIN = '''import flax
import jax
from internal import utils


def train_step(state, grad, lr):
  new_optimizer = state.optimizer.apply_gradient(grad, learning_rate=lr)
  return state.replace(optimizer=new_optimizer)


def main(params, grad):
  optimizer = flax.optim.Adam(0.1).create(params)
  state = utils.TrainState(optimizer=optimizer)
  state = jax.jit(train_step)(state, grad, 0.05)
  return state.optimizer.target
'''

# internal/models.py imports its sibling as the script does: ``internal`` is a folder on the
# script's path, not a package of its own folder.
MODELS = 'from internal import utils\n\n\ndef make(state):\n  return utils.TrainState\n'


def _write(root: pathlib.Path, files):
  for name, text in files.items():
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
  return {str(root / name): text for name, text in files.items()}


def test_a_sub_folder_program_importing_its_siblings_by_bare_name_is_followed(tmp_path):
  sources = _write(tmp_path / 'repo', {
      'mipnerf/internal/utils.py': UTILS, 'mipnerf/internal/models.py': MODELS,
      'mipnerf/train.py': TRAIN, 'premask/mask.py': 'import numpy as np\n'})
  changed, report = _engine.migrate_sources(sources)
  assert {r.status for r in report.records} == {'rewritten'}, report.summary(False)
  train = changed[str(tmp_path / 'repo' / 'mipnerf' / 'train.py')]
  assert 'optimizer: train_state.TrainState' in changed[
      str(tmp_path / 'repo' / 'mipnerf' / 'internal' / 'utils.py')]
  assert 'return state.optimizer.params' in train and '.apply_gradients(grads=grad)' in train


def test_a_bare_name_two_sub_folders_define_is_left_unresolved(tmp_path):
  """``internal`` is ``a/internal`` for ``a/train.py`` and ``b/internal`` for ``b/train.py``:
  one name, two targets, so neither is guessed (the optimizer is refused, naming the import)."""
  sources = _write(tmp_path / 'repo', {
      'a/internal/utils.py': UTILS, 'a/train.py': TRAIN,
      'b/internal/utils.py': UTILS, 'b/train.py': TRAIN})
  root = str(tmp_path / 'repo')
  assert _program._import_aliases(root, sorted(sources), [sources[f] for f in sorted(sources)]) == {}
  _, report = _engine.migrate_sources(sources)
  refused = [r for r in report.records if r.status == 'refused']
  assert refused and all(r.code == 'FOM107' for r in refused), report.summary(False)
  assert any('internal.utils.TrainState' in r.message for r in refused), report.summary(False)


def test_an_installed_module_is_never_read_as_a_sibling(tmp_path):
  """``import flax`` beside a sub-folder ``flax/`` of the program stays the library."""
  sources = _write(tmp_path / 'repo', {
      'prog/flax/utils.py': 'X = 1\n', 'prog/train.py': 'from flax import linen\n',
      'other/x.py': 'import numpy\n'})
  root = str(tmp_path / 'repo')
  assert _program._import_aliases(root, sorted(sources), [sources[f] for f in sorted(sources)]) == {}
