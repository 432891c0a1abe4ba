"""The rule FOM014 (_migrate/rules/fom014_checkpoint_format.py): its examples, in the folder
beside this file (run both ways by tests/migrate/test_migrate_equivalence.py), and its own tests."""
import pytest

libcst = pytest.importorskip('libcst')

from flax_optim_compat._migrate import migrate_source, migrate_sources

# Example name -> how closely its legacy and migrated runs agree. relative_folder: a checkpoint
# saved to and restored from the relative folder 'ckpt', one msgpack file, on both sides (run
# without FLAX_USE_ORBAX_CHECKPOINTING in the environment).
EXAMPLES = {
    'relative_folder': '1e-6',
    # raw_restore: a TrainState dataclass holding the optimizer, saved, then read back raw by
    # legacy's keys (['optimizer']['target'], ['optimizer']['state']['step']); before, those reads
    # had no record and the migrated program raised KeyError: 'target'
    'raw_restore': '1e-6',
}

_SAVE = ('from flax.training import checkpoints\n\n\n'
         'def save(state):\n  checkpoints.save_checkpoint("ckpt", state, 0)\n')


def test_a_file_that_only_saves_gets_the_flag_when_an_optimizer_elsewhere_is_rewritten(tmp_path):
  train = ('import jax.numpy as jnp\nfrom flax import optim\n\n\n'
           'def make():\n  return optim.Adam(0.1).create({"w": jnp.zeros(2)})\n')
  paths = {str(tmp_path / 'train.py'): train, str(tmp_path / 'io.py'): _SAVE}
  changed, report = migrate_sources(paths)
  saved = changed[str(tmp_path / 'io.py')]
  assert "flax.config.update('flax_use_orbax_checkpointing', False)" in saved
  assert saved.index('import flax\n') < saved.index('flax.config.update')
  assert [r.code for r in report.records if r.path.endswith('io.py')] == ['FOM014']


@pytest.mark.parametrize('io_name', ['a_io.py', 'z_io.py'])
def test_a_project_whose_only_legacy_use_is_dynamic_scale_keeps_the_format(tmp_path, io_name):
  """FOM010 alone removes the flax.optim import: the file that saves gets the flag whether the
  rules see it before or after the one that names flax.optim."""
  train = ('from flax.optim import dynamic_scale as dynamic_scale_lib\n\n\n'
           'def scale():\n  return dynamic_scale_lib.DynamicScale()\n')
  paths = {str(tmp_path / 'train.py'): train, str(tmp_path / io_name): _SAVE}
  changed, report = migrate_sources(paths)
  assert "flax.config.update('flax_use_orbax_checkpointing', False)" in changed[
      str(tmp_path / io_name)]
  assert [r.code for r in report.records if r.path.endswith(io_name)] == ['FOM014']


def test_nothing_rewritten_nothing_added():
  new, report = migrate_source(_SAVE)
  assert new == _SAVE and report.records == []


def test_a_file_that_sets_the_flag_itself_is_left_as_it_is():
  source = ('import flax\nimport jax.numpy as jnp\nfrom flax import optim\n'
            'from flax.training import checkpoints\n\n'
            "flax.config.update('flax_use_orbax_checkpointing', True)\n\n\n"
            'def run():\n  opt = optim.Adam(0.1).create({"w": jnp.zeros(2)})\n'
            '  checkpoints.save_checkpoint("/tmp/ckpt", opt, 0)\n')
  new, report = migrate_source(source)
  assert new.count('flax_use_orbax_checkpointing') == 1
  assert 'FOM014' not in {r.code for r in report.records}


@pytest.mark.parametrize('flax_import', ['import flax\n', ''])
def test_code_before_the_imports_keeps_the_flag_after_flax_is_bound(flax_import):
  """A notebook export whose first cell runs code before the imports: the line that sets the
  flag comes where ``flax`` is bound (it was put above the first statement: a NameError on
  import, EditableNeRF's HyperNeRF_Training.py)."""
  source = ('STEPS = 3\n\n' + flax_import + 'import jax.numpy as jnp\nfrom flax import optim\n'
            'from flax.training import checkpoints\n\n\n'
            'def run():\n  opt = optim.Adam(0.1).create({"w": jnp.zeros(2)})\n'
            '  checkpoints.save_checkpoint("ckpt", opt, 0)\n')
  new, report = migrate_source(source)
  assert 'FOM014' in {r.code for r in report.records}
  exec(compile(new, 'migrated.py', 'exec'), {'__name__': 'migrated'})   # binds flax first
  assert new.index('import flax\n') < new.index("flax.config.update(")


# ai-weather-climate's get_params: the state holding the optimizer is saved, then read back raw.
_RAW = '''import flax
from flax.training import checkpoints
import jax.numpy as jnp


@flax.struct.dataclass
class TrainState:
  optimizer: flax.optim.Optimizer


def train(ckpt_dir):
  optimizer = flax.optim.Adam(learning_rate=0.05).create({{'w': jnp.ones(3)}})
  checkpoints.save_checkpoint(ckpt_dir, TrainState(optimizer=optimizer), 1)


def read(ckpt_dir):
  {read}
'''


@pytest.mark.parametrize('read, now', [
    ("state = checkpoints.restore_checkpoint(ckpt_dir, target=None)\n"
     "  return state['optimizer']['target']", "return state['optimizer']['params']"),
    ("state = checkpoints.restore_checkpoint(ckpt_dir, None)\n"
     '  return state["optimizer"]["state"]["step"]', 'return state["optimizer"]["step"]'),
])
def test_a_raw_restore_read_by_legacy_keys_under_an_optimizer_field_is_rewritten(read, now):
  """``optimizer`` is a field the project annotates as an Optimizer (now a TrainState): what the
  migrated program writes under it has ``params`` and ``step``. Before, the reads had no record
  (``--check`` passed) and the migrated program raised ``KeyError: 'target'``."""
  new, report = migrate_source(_RAW.format(read=read))
  assert now in new, new
  line = next(r for r in report.records if r.line == 18)
  assert (line.code, line.status, line.exactness) == ('FOM014', 'rewritten', 'bit-exact'), line


@pytest.mark.parametrize('read, now', [
    ("return checkpoints.restore_checkpoint(ckpt_dir)['optimizer']['state']['param_states']",
     "['opt_state'] in place of ['state']['param_states']"),
    # keys the project does not annotate as an Optimizer field: maybe another object's
    ("state = checkpoints.restore_checkpoint(ckpt_dir, target=None)\n"
     "  return state['agent']['target']", "['params']"),
    ("return checkpoints.restore_checkpoint(ckpt_dir, None)['target']", "['params']"),
])
def test_other_reads_by_legacy_keys_are_flagged_with_the_key_now(read, now):
  source = _RAW.format(read=read)
  line = next(i for i, text in enumerate(source.splitlines(), 1) if "['" in text and 'return' in text)
  new, report = migrate_source(source)
  flagged = [r for r in report.records if r.status == 'flagged']
  assert [(r.code, r.exactness, r.line) for r in flagged] == [('FOM014', 'not exact', line)], (
      report.summary(False))
  assert now in flagged[0].message, flagged[0].message
  lines = new.splitlines()
  marked = next(i for i, text in enumerate(lines) if 'TODO(flax-optim-compat): FOM014' in text)
  assert now in lines[marked] and "['" in lines[marked + 1], new


@pytest.mark.parametrize('read', [
    # a target given: restored into the migrated state's own structure
    "return checkpoints.restore_checkpoint(ckpt_dir, target=TrainState(optimizer=None))",
    # keys of another layout: the program's own
    "state = checkpoints.restore_checkpoint(ckpt_dir, target=None)\n  return state['params']",
    "return checkpoints.restore_checkpoint(ckpt_dir, None)['model']['state']",
])
def test_other_restores_and_keys_are_not_flagged(read):
  _, report = migrate_source(_RAW.format(read=read))
  assert not [r for r in report.records if r.status == 'flagged'], report.summary(False)


def test_a_field_whose_optimizer_is_refused_keeps_legacy_keys_and_is_flagged():
  """The field's optimizer is refused (a Python number as the target, FOM115), so its class
  keeps the legacy annotation and the file keeps legacy's ``target``: the raw read is not
  rewritten to ``params`` (another optimizer, rewritten, opens FOM014's pass)."""
  source = _RAW.format(read="return checkpoints.restore_checkpoint(ckpt_dir, None)"
                            "['optimizer']['target']").replace(
      "create({'w': jnp.ones(3)})", 'create(0.05)') + (
          '\n\ndef other(params):\n  return flax.optim.Momentum(0.1).create(params).target\n')
  new, report = migrate_source(source)
  assert any(r.code == 'FOM115' for r in report.records), report.summary(False)
  assert "['optimizer']['target']" in new and "['optimizer']['params']" not in new, new
  line = next(i for i, text in enumerate(source.splitlines(), 1) if "['optimizer']" in text)
  reads = [r for r in report.records if r.line == line and 'raw checkpoint' in r.message]
  assert [r.status for r in reads] == ['flagged'], report.summary(False)
