"""The idioms of the NeRF research programs (jaxnerf's copies, jax3d's NeSF and MobileNeRF,
hypernerf), read at their code: what migrate rewrites and what it refuses, naming why.

* Code copied out of a monorepo imports its own files by their old path
  (``from google3.experimental.users.someone.jaxnerf.nerf import utils`` in ``jaxnerf/train.py``,
  ``jaxnerf/nerf/utils.py`` beside it): the path's tail names the project's own package and its
  first name no installed module, so the import resolves to the given files, and the optimizer
  passed to ``utils.TrainState(optimizer=...)`` is followed there as in the copies that import
  ``from jaxnerf.nerf import utils``.
* A notebook-style script binds its step again for each stage at module level (MobileNeRF's
  ``train_pstep = jax.pmap(train_step, ...)``, twice): a call in that top-level code runs the
  binding the statements before it made last, as the script runs them in order; the example
  (tests/migrate/examples/nerf/two_stages/) is rewritten whole and runs both ways.
* ``optimizer.state_dict()`` read for weight histograms (NeSF) is rebuilt in legacy's layout
  (FOM016): the same flattened keys and values both ways.
"""
import json
import pathlib

import pytest

pytest.importorskip('libcst')

# pylint: disable=g-import-not-at-top
from flax_optim_compat._migrate import _import_paths
from flax_optim_compat._migrate import _program
from tests import _migrate_harness as harness

EXAMPLES = pathlib.Path(__file__).resolve().parent / 'examples' / 'nerf'

UTILS = harness.NERF_UTILS

TRAIN = harness.NERF_TRAIN.format(import_utils='from {prefix}jaxnerf.nerf import utils')


@pytest.mark.parametrize('prefix', ['', 'corp3.experimental.users.someone.'])
def test_a_project_importing_itself_by_a_monorepo_path_is_followed(tmp_path, prefix):
  sources = harness.write_sources(tmp_path / 'prog', {
      'jaxnerf/__init__.py': '', 'jaxnerf/nerf/__init__.py': '', 'jaxnerf/nerf/utils.py': UTILS,
      'jaxnerf/train.py': TRAIN.format(prefix=prefix)})
  harness.assert_nerf_migrated_whole(sources, tmp_path / 'prog', 'jaxnerf/train.py',
                                     'jaxnerf/nerf/utils.py')


def test_an_installed_library_is_never_read_as_the_project_under_another_path(tmp_path):
  """``from flax.training import checkpoints`` beside the project's own
  ``training/checkpoints.py`` is flax's module: its first name is installed."""
  sources = harness.write_sources(tmp_path / 'prog', {
      'training/__init__.py': '', 'training/checkpoints.py': 'def save_checkpoint(*a):\n  pass\n',
      'train.py': 'from flax.training import checkpoints\n'
                  'import corp3.users.x.training.checkpoints as mine\n'})
  root = str(tmp_path / 'prog')
  assert _import_paths.aliases(root, sorted(sources), list(sources.values()))[0] == {
      'corp3.users.x': ''}


examples = harness.examples_fixture(EXAMPLES, 'nerf_examples')


@pytest.mark.parametrize('name', sorted(p.name for p in EXAMPLES.iterdir() if p.is_dir()))
def test_the_example_is_rewritten_whole_and_runs_both_ways(examples, name):
  root, migrated = examples
  migration, folder = migrated[name], root / name
  harness.assert_whole_and_equivalent(migration, EXAMPLES / name, folder, legacy_env_root=root,
                                      env_after={'FLAX_OPTIM_COMPAT_LEGACY_JAX': '0'})


def test_each_stage_runs_the_step_it_bound_last():
  """Each ``train_pstep(...)`` call resolves to its own stage's ``train_step``; a read inside a
  function (run when called, whichever binding is current then) is not resolved this way."""
  import libcst as cst
  source = (EXAMPLES / 'two_stages' / 'train.py').read_text()
  project = _program.Program({'/p/train.py': source})
  unit = project.units[0]
  calls = [n for n in unit.nodes if isinstance(n, cst.Call) and isinstance(n.func, cst.Name)
           and n.func.value == 'train_pstep']
  defs = [n for n in unit.module.body if isinstance(n, cst.FunctionDef)]
  assert [project.resolve_callable(unit, c.func)[1] for c in calls] == defs
  inner = _program.Program({'/p/t.py': 'def f():\n  return 1\n\n\ndef g():\n  return f()\n\n\n'
                                       'def f():\n  return 2\n'})
  u = inner.units[0]
  call = next(n for n in u.nodes if isinstance(n, cst.Call))
  assert u.parent(call) is not None and inner.reaching_binding(u, call.func) is None


STATE_DICT_EXAMPLES = ('state_dict_histograms', 'state_dict_mixed')


@pytest.fixture(scope='module')
def state_dict_runs(tmp_path_factory):
  """FOM016's examples run both ways, each side's programs in one child (``run_programs``: each
  as ``__main__`` in its own globals): side -> name -> result."""
  folder = pathlib.Path(__file__).resolve().parent / 'rules' / 'fom016_state_dict'
  root = tmp_path_factory.mktemp('state_dict')
  return {side: harness.run_programs(
      [harness.Program(name, folder / f'{name}_{side}.py') for name in STATE_DICT_EXAMPLES],
      root / side, isolated=side == 'after',
      env={'FLAX_OPTIM_COMPAT_LEGACY_JAX': '0'} if side == 'after' else None)
          for side in ('before', 'after')}


@pytest.mark.parametrize('name', STATE_DICT_EXAMPLES)
def test_state_dict_logs_the_same_keys_and_values_both_ways(state_dict_runs, name):
  """NeSF's weight histograms: ``traverse_util.flatten_dict(optimizer.state_dict())``, every
  key and value the legacy program logs, logged by the migrated one (FOM016's examples; in
  ``state_dict_mixed`` one read serves an Adam and a Momentum)."""
  before, after = (state_dict_runs[side][name] for side in ('before', 'after'))
  for result in (before, after):
    assert result['ok'], f'{name} failed:\n{result["error"]}'
  keys = before['stdout'].strip().splitlines()[-2]
  assert 'state/param_states/' in keys and 'grad_sq_ema' in keys and 'target/' in keys
  assert after['stdout'].strip().splitlines()[-2] == keys
  if name == 'state_dict_mixed':   # the step's leaf: an int32 array in flax 0.5.3 (its oracle)
    assert json.loads(keys)[-1] == ['int32', 'int32'], keys
  harness.assert_equivalent(harness.result_trajectory(state_dict_runs['before'], name),
                            harness.result_trajectory(state_dict_runs['after'], name),
                            'bit-exact', label=name)
