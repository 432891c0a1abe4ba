"""tools/migrate_corpus.py's verdicts on synthetic programs: "half-migrated" is per object
(an object with some sites rewritten and others refused), and a legacy member read on a value
migrate rewrote into a TrainState is found, as migrate's own analysis follows the object."""
import importlib.util
import textwrap

import pytest

pytest.importorskip('libcst')

from flax_optim_compat._migrate._report import Record
from tests import _migrate_harness as harness


@pytest.fixture(scope='module')
def tool():
  with pytest.MonkeyPatch.context() as mp:
    mp.setenv('FLAX_OPTIM_COMPAT_LEGACY_JAX', '0')   # else the tool re-executes itself with it
    spec = importlib.util.spec_from_file_location(
        'migrate_corpus', harness.REPO / 'tools' / 'migrate_corpus.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module


def _program(folder, files):
  folder.mkdir()
  for name, text in files.items():
    (folder / name).write_text(textwrap.dedent(text))
  return folder


REFUSED = '''
    from flax import optim


    def create(params, args):
      return optim.Adam(**args.optim_kwargs).create(params)
'''
WHOLE = '''
    from flax import optim


    def create(params):
      optimizer = optim.Momentum(learning_rate=0.1).create(params)
      return optimizer.apply_gradient(params)
'''


def test_a_refused_object_beside_a_whole_one_is_refused_not_half(tool, tmp_path):
  row = tool.measure(str(_program(tmp_path / 'p', {'a.py': REFUSED, 'b.py': WHOLE})), 60)
  assert (row['outcome'], row['codes'], row['half_objects']) == ('refused', ['FOM110'], 0)
  assert row['still_imports_flax_optim'] == ['a.py'] and row['legacy_left'] == []
  whole = tool.measure(str(_program(tmp_path / 'q', {'b.py': WHOLE})), 60)
  assert whole['outcome'] == 'migrated whole' and whole['legacy_left'] == []
  assert 'refused' in tool.table([{**row, 'program': 'p', 'kind': 'linen'}])


def test_an_object_with_one_site_rewritten_and_another_refused_is_half(tool, tmp_path):
  folder = _program(tmp_path / 'p', {'b.py': WHOLE, 'a.py': REFUSED})
  sources, _, _, _ = tool._command.read([str(folder)])
  at, _ = tool.objects_of(sources)
  b = str(folder / 'b.py')
  create, apply = (6, 7)
  assert at[(b, create)] == at[(b, apply)]   # one object, two sites
  records = [Record(b, create, 'FOM001', 'rewritten', 'bit-exact', ''),
             Record(b, apply, 'FOM104', 'refused', '', '')]
  half, _ = tool.half_objects(records, at)
  assert half == list(at[(b, create)])
  records[1] = Record(b, apply, 'FOM002', 'rewritten', 'bit-exact', '')
  records.append(Record(str(folder / 'a.py'), 6, 'FOM110', 'refused', '', ''))
  assert tool.half_objects(records, at)[0] == []


LEFT = '''
    import jax
    from flax import optim


    def create(params):
      return optim.Adam(learning_rate=0.1).create(params)


    def step(optimizer, grad, optimize_fn):
      loss = jax.numpy.sum(optimizer.target['w'])
      new_optimizer = optimize_fn(optimizer, grad)
      batch = optimize_fn(grad, grad)
      count = new_optimizer.state.step
      return new_optimizer.target, batch.target, loss, count


    def main(params, grad, optimize_fn):
      return step(create(params), grad, optimize_fn)
'''


def test_a_legacy_member_read_on_a_value_migrate_rewrote_is_found(tool, tmp_path):
  """Had migrate rewritten every site of this object (score_flow's old defect: the optimizer
  handed to ``optimize_fn``, ``new_optimizer.target`` left), the tool finds the member left;
  ``batch.target``, from a call the object never reaches, is not it. Migrate itself refuses
  this object (FOM107), so the tool's verdict on it is refused."""
  folder = _program(tmp_path / 'p', {'train.py': LEFT})
  sources, _, _, _ = tool._command.read([str(folder)])
  at, holders = tool.objects_of(sources)
  records = [Record(p, line, 'FOM001', 'rewritten', 'bit-exact', '') for p, line in at]
  half, status = tool.half_objects(records, at)
  assert half == []
  left = tool.legacy_members_left(sources, records, at, holders, status)
  path = folder / 'train.py'
  assert left == [f'{path}:14 new_optimizer.state', f'{path}:15 new_optimizer.target']
  assert tool.measure(str(folder), 60)['outcome'] == 'refused'


AGENT = """\
import jax
from flax import optim


class Agent:
  def __init__(self, params):
    self.optimizer = optim.Adam(0.1).create(params)

  def step(self, grads):
    self.optimizer = self.optimizer.apply_gradient(grads)
"""
# Imports neither jax nor flax; the model's ``model.target`` holds no optimizer field.
RUNNER = """\
def weights(agent, model):
  return agent.optimizer.target, model.params.target
"""


def test_a_legacy_member_read_on_a_rewritten_field_in_any_file_is_found(tool, tmp_path):
  """A runner handed the agent reads ``agent.optimizer.target`` where no site of migrate's
  analysis is (as it was before 3fcd0b2): the field held only rewritten objects, so the read is
  left legacy beside them. ``model.params.target`` is not on such a field."""
  folder = _program(tmp_path / 'p', {'agent.py': AGENT, 'runner.py': RUNNER})
  sources, _, _, _ = tool._command.read([str(folder)])
  at, holders = tool.objects_of(sources)
  runner = str(folder / 'runner.py')
  records = [Record(p, line, 'FOM001', 'rewritten', 'bit-exact', '') for p, line in at
             if p != runner]   # the analysis before the fix: no site in runner.py
  _, status = tool.half_objects(records, at)
  left = tool.legacy_members_left(sources, records, at, holders, status)
  assert left == [f'{runner}:2 agent.optimizer.target']
  records.append(Record(str(folder / 'agent.py'), 10, 'FOM104', 'refused', '', ''))
  _, status = tool.half_objects(records, at)
  assert tool.legacy_members_left(sources, records, at, holders, status) == []
  assert tool.measure(str(folder), 60)['legacy_left'] == []   # migrate now rewrites it


def test_a_name_through_jax_api_is_counted_as_the_jax_name_it_is(tool):
  # brax's jax.api.device_put_sharded is jax.device_put_sharded; jax.mask stands for it here, as
  # no supported jax has it (device_put_sharded is gone from recent jax only)
  sources = {'a.py': 'import jax\n\ny = jax.api.mask(abs, in_shapes=None)\n'}
  assert tool.missing_jax_names(sources) == ['jax.mask']
  assert tool.missing_jax_names({'a.py': 'import jax\n\nf = jax.api.jit\n'}) == []


AUDAX = """\
from jax import config
config.update('jax_enable_x64', False)
config.no_such_flag


def evaluate(config, workdir):
  return config.batch_size + config.get('steps')


def restore(workdir):
  config = load(workdir)
  return config.audio_config


def load(workdir, flag=config.jax_no_such_default):
  def inner():
    return config.data
  return inner
"""


def test_a_local_name_is_not_the_module_jax_name_it_shadows(tool):
  # audax's eval_supervised.py once migrated: `from jax import config` at the top (its
  # `from jax.config import config` rewritten), and `config` a parameter or a local (an
  # ml_collections config) in the functions that read its fields
  assert tool.missing_jax_names({'a.py': AUDAX}) == [
      'jax.config.data', 'jax.config.jax_no_such_default', 'jax.config.no_such_flag']


RAW_READ = '''
    from flax import optim
    from flax.training import checkpoints


    def train(params, d):
      checkpoints.save_checkpoint(d, optim.Adam(0.1).create(params), 0)


    def params_of(d):
      return checkpoints.restore_checkpoint(d, None)['target']
'''


def test_a_raw_checkpoint_read_by_legacy_keys_is_not_whole(tool, tmp_path):
  """The migrated program fails at ``['target']`` until the flagged read is changed by hand."""
  row = tool.measure(str(_program(tmp_path / 'p', {'a.py': RAW_READ})), 60)
  assert (row['outcome'], row['flagged_reads']) == (
      'optimizers whole, checkpoint reads flagged', ['a.py:11']), row
