"""The idioms of the NeRF research programs (jaxnerf's copies, jax3d's NeSF and MobileNeRF,
hypernerf), read at their code: what migrate rewrites and what it refuses, naming why.

* Code copied out of a monorepo imports its own files by their old path
  (``from google3.experimental.users.someone.jaxnerf.nerf import utils`` in ``jaxnerf/train.py``,
  ``jaxnerf/nerf/utils.py`` beside it): the path's tail names the project's own package and its
  first name no installed module, so the import resolves to the given files, and the optimizer
  passed to ``utils.TrainState(optimizer=...)`` is followed there as in the copies that import
  ``from jaxnerf.nerf import utils``.
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
from {prefix}jaxnerf.nerf import utils


def train_step(state, grad, lr):
  new_optimizer = state.optimizer.apply_gradient(grad, learning_rate=lr)
  return state.replace(optimizer=new_optimizer)


def main(params, grad):
  optimizer = flax.optim.Adam(0.1).create(params)
  state = utils.TrainState(optimizer=optimizer)
  state = jax.jit(train_step)(state, grad, 0.05)
  return state.optimizer.target
'''


def _write(root: pathlib.Path, files):
  for name, text in files.items():
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
  return {str(root / name): text for name, text in files.items()}


@pytest.mark.parametrize('prefix', ['', 'corp3.experimental.users.someone.'])
def test_a_project_importing_itself_by_a_monorepo_path_is_followed(tmp_path, prefix):
  sources = _write(tmp_path / 'prog', {
      'jaxnerf/__init__.py': '', 'jaxnerf/nerf/__init__.py': '', 'jaxnerf/nerf/utils.py': UTILS,
      'jaxnerf/train.py': TRAIN.format(prefix=prefix)})
  changed, report = _engine.migrate_sources(sources)
  assert {r.status for r in report.records} == {'rewritten'}, report.summary(False)
  train = changed[str(tmp_path / 'prog' / 'jaxnerf' / 'train.py')]
  assert 'optimizer: train_state.TrainState' in changed[
      str(tmp_path / 'prog' / 'jaxnerf' / 'nerf' / 'utils.py')]
  assert 'return state.optimizer.params' in train and '.apply_gradients(grads=grad)' in train


def test_an_installed_library_is_never_read_as_the_project_under_another_path(tmp_path):
  """``from flax.training import checkpoints`` beside the project's own
  ``training/checkpoints.py`` is flax's module: its first name is installed."""
  sources = _write(tmp_path / 'prog', {
      'training/__init__.py': '', 'training/checkpoints.py': 'def save_checkpoint(*a):\n  pass\n',
      'train.py': 'from flax.training import checkpoints\n'
                  'import corp3.users.x.training.checkpoints as mine\n'})
  root = str(tmp_path / 'prog')
  assert _program._import_aliases(root, sorted(sources), list(sources.values())) == {
      'corp3.users.x': ''}
