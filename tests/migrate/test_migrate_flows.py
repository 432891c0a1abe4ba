"""migrate follows an optimizer through the flows real programs use, or refuses together the
objects that meet one it cannot follow: no program is left half-migrated.

tests/migrate/programs/flows/ is a folder as a user passes it (written for these tests after
the idioms of 2021 RL codebases): ``lagrange.py`` (MPO's Lagrange multipliers: optimizers bound
by ``functools.partial``, stepped inside the loss and returned as the aux of ``jax.grad`` /
``jax.value_and_grad(..., has_aux=True)``), ``carry.py`` (brax's PPO: a dataclass field, a
``lax.scan`` carry, nested, and a ``fori_loop`` carry), both through the program's own
leaf-wise helper ``devices.on_device``. Each is rewritten whole and runs both ways (legacy on
this package; migrated where neither this package nor flax.optim can be imported) to the same
numbers. tests/migrate/programs/together/ has an optimizer the analysis cannot follow: the one
that meets it is refused with it, the one that never does is rewritten.
"""
import pathlib
import shutil

import pytest

from tests import _migrate_harness as harness

PROGRAMS = pathlib.Path(__file__).resolve().parent / 'programs'
FLOWS = ('lagrange.py', 'carry.py')


@pytest.fixture(scope='module')
def migrated(tmp_path_factory):
  pytest.importorskip('libcst')
  root = tmp_path_factory.mktemp('flows')
  folder = root / 'flows'
  shutil.copytree(PROGRAMS / 'flows', folder)
  return root, folder, harness.migrate_folder(folder)


def _migrate(files):
  from flax_optim_compat._migrate import migrate_sources  # pylint: disable=g-import-not-at-top
  return migrate_sources({str(path): text for path, text in files.items()})


def test_every_optimizer_of_the_flows_program_is_rewritten(migrated):
  _, folder, migration = migrated
  assert migration.report['exit_status'] == 1, migration.stderr
  assert not [r for r in migration.report['sites'] if r['status'] != 'rewritten'], (
      migration.stderr)
  for name in FLOWS:
    text = (folder / name).read_text()
    assert 'from flax import optim' not in text and 'optim.' not in text.replace('optax.', '')
  # the helper hands back what it is given: nothing in it is an optimizer's
  assert (folder / 'devices.py').read_text() == (PROGRAMS / 'flows' / 'devices.py').read_text()


@pytest.fixture(scope='module')
def flow_runs(migrated):
  """Each side's FLOWS programs in one child (``harness.run_programs``: each as ``__main__``, its
  folder first on ``sys.path``): the legacy ones from ``root``, the migrated ones from their
  folder. Side -> name -> result."""
  root, folder, _ = migrated
  # The migrated side imports its sibling ``devices`` as plain code: the start-up hook that
  # gives removed jax names back (which reads the package) stays off in the isolated child.
  return {
      'before': harness.run_programs(
          [harness.Program(name, PROGRAMS / 'flows' / name, cwd=root) for name in FLOWS],
          root / 'before', isolated=False),
      'after': harness.run_programs(
          [harness.Program(name, folder / name, cwd=folder) for name in FLOWS],
          root / 'after', isolated=True, env={'FLAX_OPTIM_COMPAT_LEGACY_JAX': '0'})}


@pytest.mark.parametrize('name', FLOWS)
def test_the_program_runs_both_ways_to_the_same_numbers(migrated, flow_runs, name):
  _, folder, migration = migrated
  harness.assert_equivalent(harness.result_trajectory(flow_runs['before'], name),
                            harness.result_trajectory(flow_runs['after'], name),
                            migration.exactness(folder / name), label=name)


def test_objects_that_meet_a_refused_one_are_refused_with_it():
  pytest.importorskip('libcst')
  folder = PROGRAMS / 'together'
  sources = {path: path.read_text() for path in sorted(folder.glob('*.py'))}
  changed, report = _migrate(sources)
  train = str(folder / 'train.py')
  by_line = {}
  for r in report.records:
    if r.path == train:
      by_line.setdefault(r.line, []).append(r)
  lines = sources[folder / 'train.py'].splitlines()
  line_of = lambda text: next(i for i, line in enumerate(lines, 1) if text in line)
  critic = by_line[line_of('history = collections.deque([critic]')]
  assert [r.code for r in critic] == ['FOM107'] and critic[0].status == 'refused'
  actor = by_line[line_of("actor = optim.Adam(")]
  assert [(r.code, r.status) for r in actor] == [('FOM107', 'refused')], actor
  assert 'meets critic in function train' in actor[0].message, actor[0].message
  # every site of train() refused; pretrain()'s optimizer, which never meets them, rewritten
  start, end = line_of('def train('), len(lines)
  assert all(r.status == 'refused' for line, rs in by_line.items() if start <= line <= end
             for r in rs)
  pretrain = [r for line, rs in by_line.items() if line < start for r in rs if r.code < 'FOM1']
  assert pretrain and all(r.status == 'rewritten' for r in pretrain), pretrain
  new = changed[train]
  assert "optim.Adam(learning_rate=0.1).create(params)" in new   # left as it was
  assert 'optax.adam(learning_rate=0.1' in new
  assert str(folder / 'notes.py') not in changed   # no marker in a file with no flax.optim


@pytest.mark.parametrize('package', ['proj.sub', 'top.proj.sub'])
def test_a_folder_below_its_package_top_resolves_its_own_imports(tmp_path, package):
  """``brax/training`` given, ``brax/`` without ``__init__.py``: ``from brax.training import
  devices`` is the project's own module, so its leaf-wise helper is followed; so with
  ``jax3d/projects/nesf`` given and ``from jax3d.projects.nesf import ...``."""
  pytest.importorskip('libcst')
  sub = tmp_path.joinpath(*package.split('.'))
  sub.mkdir(parents=True)
  (sub / '__init__.py').write_text('')
  (sub / 'devices.py').write_text((PROGRAMS / 'flows' / 'devices.py').read_text())
  (sub / 'train.py').write_text(
      'import jax\nimport jax.numpy as jnp\nfrom flax import optim\n'
      f'from {package} import devices\n\n\n'
      'def train(params):\n'
      '  optimizer = devices.on_device(optim.Adam(learning_rate=0.1).create(params))\n'
      '  grad = jax.grad(lambda p: jnp.sum(p["w"] ** 2))(optimizer.target)\n'
      '  return optimizer.apply_gradient(grad).target\n')
  changed, report = _migrate({p: p.read_text() for p in sorted(sub.glob('*.py'))})
  assert report.records and all(r.status == 'rewritten' for r in report.records), report.records
  assert 'optimizer.params' in changed[str(sub / 'train.py')]


@pytest.mark.parametrize('imports', [
    'from f_net import devices',
    'from f_net import models, devices as devices  # both',
    'from f_net import (\n    models,\n    devices,\n)',
])
def test_a_folder_imported_by_its_own_name_from_its_parent_resolves_its_imports(tmp_path,
                                                                              imports):
  """google-research's layout (f_net): the folder given has no ``__init__.py`` and its files
  import each other as ``from f_net import train_utils`` (the program runs from the
  repository's top, ``python -m f_net.run_pretraining``), so its pmapped step is followed into
  the sibling module. Before, only ``from f_net.x import ...`` was read that way: the step was
  'not a function or class of the given files' and the optimizer refused (FOM107)."""
  pytest.importorskip('libcst')
  top = tmp_path / 'google-research' / 'f_net'
  top.mkdir(parents=True)
  (top / 'models.py').write_text('MODEL = None\n')
  (top / 'devices.py').write_text(
      'import jax\nimport jax.numpy as jnp\n\n\n'
      'def train_step(optimizer, lr):\n'
      '  grad = jax.grad(lambda p: jnp.sum(p["w"] ** 2))(optimizer.target)\n'
      '  return optimizer.apply_gradient(grad, learning_rate=lr)\n')
  (top / 'run.py').write_text(
      f'import functools\nimport jax\nfrom flax import optim\n{imports}\n\n\n'
      'def main(params):\n'
      '  optimizer = optim.Adam(learning_rate=0.1).create(params)\n'
      '  p_step = jax.pmap(functools.partial(devices.train_step, lr=0.1), axis_name="batch")\n'
      '  optimizer = p_step(optimizer)\n'
      '  return optimizer.target\n')
  changed, report = _migrate({p: p.read_text() for p in sorted(top.glob('*.py'))})
  assert report.records and all(r.status == 'rewritten' for r in report.records), report.records
  assert '.apply_gradients(grads=grad)' in changed[str(top / 'devices.py')]


def test_a_program_run_from_a_folder_with_an_init_resolves_its_own_imports(tmp_path):
  """putting-nerf-on-a-diet's layout: an ``__init__.py`` at the top of the folder given, and
  ``from nerf import utils`` (the program runs from that folder): ``utils.TrainState`` is the
  project's own class, so the optimizer stored in it is followed."""
  pytest.importorskip('libcst')
  top = tmp_path / 'putting-nerf'
  (top / 'nerf').mkdir(parents=True)
  (top / '__init__.py').write_text('')
  (top / 'nerf' / '__init__.py').write_text('')
  (top / 'nerf' / 'utils.py').write_text(
      'import flax\n\n\n@flax.struct.dataclass\nclass TrainState:\n'
      '  optimizer: flax.optim.Optimizer\n')
  (top / 'train.py').write_text(
      'import flax\nimport jax\nimport jax.numpy as jnp\n\nfrom nerf import utils\n\n\n'
      'def update_step(state, grad, lr):\n'
      '  return state.replace(optimizer=state.optimizer.apply_gradient(grad, learning_rate=lr))\n'
      '\n\ndef main(variables):\n'
      '  optimizer = flax.optim.Adam(0.1).create(variables)\n'
      '  state = utils.TrainState(optimizer=optimizer)\n  del optimizer, variables\n'
      '  grad = jax.grad(lambda p: jnp.sum(p["w"] ** 2))(state.optimizer.target)\n'
      '  return update_step(state, grad, 0.01).optimizer.target\n')
  changed, report = _migrate({p: p.read_text() for p in sorted(top.rglob('*.py'))})
  assert report.records and all(r.status == 'rewritten' for r in report.records), report.records
  assert 'optimizer: train_state.TrainState' in changed[str(top / 'nerf' / 'utils.py')]
  assert 'state.optimizer.params' in changed[str(top / 'train.py')]


@pytest.mark.parametrize('use, refused', [
    ('(loss, opt), grads = jax.value_and_grad(loss_fn, has_aux=True)(opt.target, opt)\n'
     '  print(opt.target)', False),
    ('grads = jax.grad(loss_fn, argnums=1, has_aux=True)(opt.target, opt)', True),
    ('pair = (opt, 1)\n  for item in pair:\n    print(item)', True),
    ('pair = (opt, 1)\n  first, _ = pair\n  print(first.target)', False),
    ('held = Held(opt, 0)\n  held = held._replace(opt=held.opt.apply_gradient(held.opt.target))\n'
     '  print(held.opt.target)', False),
])
def test_a_flow_is_followed_or_its_object_refused(use, refused):
  pytest.importorskip('libcst')
  from flax_optim_compat._migrate import migrate_source  # pylint: disable=g-import-not-at-top
  source = ('import typing\n\nimport jax\nimport jax.numpy as jnp\nfrom flax import optim\n\n\n'
            'class Held(typing.NamedTuple):\n  opt: optim.Optimizer\n  count: int\n\n\n'
            'def loss_fn(params, opt):\n  return jnp.sum(params["w"] ** 2), opt\n\n\n'
            'def run():\n  opt = optim.Adam(learning_rate=0.1).create({"w": jnp.ones(2)})\n'
            f'  {use}\n')
  _, report = migrate_source(source)
  statuses = {r.status for r in report.records if r.code < 'FOM2'}
  assert statuses == ({'refused'} if refused else {'rewritten'}), report.records


@pytest.mark.parametrize('use, says', [
    ('bar = tqdm.tqdm(opt)', 'opt is passed to tqdm.tqdm(...) as argument 1 at script.py:10: '
     'tqdm.tqdm is not a function or class of the given files'),
    ('state = lib.TrainState(optimizer=opt)', 'opt is passed to lib.TrainState(...) as '
     'optimizer= at script.py:10: nowhere.lib.TrainState is not a function or class'),
    ('state = nerf.TrainState(optimizer=opt)', 'opt is passed to nerf.TrainState(...) as '
     'optimizer= at script.py:10: it is imported as google3.jaxnerf.nerf.TrainState, a path '
     'that does not resolve to the given files, which define nerf.TrainState'),
    ('box = {}\n  box[len(box)] = opt', 'opt is assigned to box[len(box)] at script.py:11, a '
     'target the analysis does not track'),
    ('both = [opt, 1]', 'opt is put in [opt, 1] at script.py:10, a container'),
])
def test_a_use_the_analysis_cannot_follow_is_named_with_its_line(use, says, tmp_path):
  """The refusal names the use to change (its line and what it does), not only the object;
  a class of the given files imported by a path that does not resolve to them is named."""
  pytest.importorskip('libcst')
  source = ('import jax.numpy as jnp\nimport tqdm\nfrom flax import optim\n'
            'from google3.jaxnerf import nerf\nfrom nowhere import lib\n\ndef run():\n'
            '  opt = optim.Adam(learning_rate=0.1).create({"w": jnp.ones(2)})\n'
            '  opt = opt.apply_gradient({"w": jnp.ones(2)})\n'
            f'  {use}\n  return opt.target\n')
  nerf = tmp_path / 'nerf.py'   # the class ``google3.jaxnerf.nerf.TrainState`` means
  nerf.write_text('import flax\n\n\n@flax.struct.dataclass\nclass TrainState:\n'
                  '  optimizer: flax.optim.Optimizer\n')
  _, report = _migrate({tmp_path / 'script.py': source, nerf: nerf.read_text()})
  line = 10 + use.count('\n')
  escapes = [r for r in report.records if r.line == line]
  assert [r.code for r in escapes] == ['FOM107'], report.records
  assert says in escapes[0].message, escapes[0].message
  assert all(r.status == 'refused' for r in report.records if r.code < 'FOM2'), report.records


# score_sde's step: the function that steps the optimizer is passed in (``optimize_fn``, the
# def nested in ``optimization_manager(config)``) and its result read as the new optimizer.
_PASSED_IN = '''\
import flax
import jax
import jax.numpy as jnp
from flax import optim


@flax.struct.dataclass
class State:
  optimizer: optim.Optimizer


def optimization_manager(scale):
  def optimize_fn(state, grad):
    return state.optimizer.apply_gradient(jax.tree_util.tree_map(lambda g: g * scale, grad))
  return optimize_fn


def step(optimize, state, grad):
  new_optimizer = optimize(state, grad)
  return state.replace(optimizer=new_optimizer), new_optimizer.target


def main():
  state = State(optimizer=optim.GradientDescent(learning_rate=0.1).create({'w': jnp.ones(3)}))
  state, params = STEP(optimization_manager(1.0), state, {'w': jnp.ones(3)})
  print(params['w'].tolist(), state.optimizer.target['w'].tolist())


if __name__ == '__main__':
  main()
'''


# The same in 24 lines: ``step`` is given the module's ``optimize_fn`` by name.
_PASSED_BY_NAME = '''\
import flax
import jax.numpy as jnp
from flax import optim


@flax.struct.dataclass
class State:
  optimizer: optim.Optimizer


def optimize_fn(state, grad):
  return state.optimizer.apply_gradient(grad)


def step(optimize, state, grad):
  new_optimizer = optimize(state, grad)
  return new_optimizer.target


def main():
  state = State(optimizer=optim.GradientDescent(learning_rate=0.1).create({'w': jnp.ones(3)}))
  print(step(optimize_fn, state, {'w': jnp.ones(3)})['w'].tolist())


if __name__ == '__main__':
  main()
'''


def _passed_in(direct):
  """_PASSED_IN with ``step`` called directly, or through ``run_step`` (a variable)."""
  source = _PASSED_IN.replace('STEP', 'step' if direct else 'run_step')
  if not direct:
    source = source.replace('def main():', 'def run_step(optimize, state, grad):\n'
                            '  return step(optimize, state, grad)\n\n\ndef main():')
  return source


_PASSED_SOURCES = {'by_name': _PASSED_BY_NAME, 'direct': _passed_in(True),
                   'through_a_variable': _passed_in(False)}


@pytest.fixture(scope='module')
def passed_in_runs(tmp_path_factory):
  """Each of _PASSED_SOURCES migrated, then run where neither this package nor flax.optim can
  be imported: all three in one isolated child (``harness.run_migrated``, each as ``__main__``
  in its own globals). Name -> (the migrated text that ran, its result)."""
  pytest.importorskip('libcst')
  root = tmp_path_factory.mktemp('passed_in')
  return harness.run_migrated(_PASSED_SOURCES, root, root)


def _isolated_stdout(runs, name, new):
  """What the migrated text ``new`` printed in the isolated child."""
  ran, result = runs[name]
  assert ran == new, (ran, new)
  assert result['ok'], result['error']
  return result['stdout']


def test_a_function_passed_in_by_name_is_followed(passed_in_runs):
  pytest.importorskip('libcst')
  from flax_optim_compat._migrate import migrate_source  # pylint: disable=g-import-not-at-top
  new, report = migrate_source(_PASSED_BY_NAME)
  assert report.records and all(r.status == 'rewritten' for r in report.records), report.records
  assert 'return new_optimizer.params' in new, new
  out = _isolated_stdout(passed_in_runs, 'by_name', new)   # 1 - 0.1 * 1, in float32
  assert out.split() == ['[0.8999999761581421,', '0.8999999761581421,', '0.8999999761581421]'], out


@pytest.mark.parametrize('direct', [True, False])
def test_a_function_passed_in_is_followed_where_every_call_site_is_in_sight(direct,
                                                                              passed_in_runs):
  """``optimize(state, grad)`` with ``optimize`` a parameter that every call of ``step`` binds
  to the def ``optimization_manager`` returns (directly, or through a variable) runs that def:
  its result is the optimizer, so ``new_optimizer.target`` is rewritten and the migrated
  program runs without this package to the legacy numbers: 1 - 0.1 * 1 = 0.9."""
  pytest.importorskip('libcst')
  from flax_optim_compat._migrate import migrate_source  # pylint: disable=g-import-not-at-top
  name = 'direct' if direct else 'through_a_variable'
  new, report = migrate_source(_PASSED_SOURCES[name])
  assert report.records and all(r.status == 'rewritten' for r in report.records), report.records
  assert 'new_optimizer.params' in new and '.target' not in new, new
  out = _isolated_stdout(passed_in_runs, name, new)
  assert out.split() == ['[0.8999999761581421,', '0.8999999761581421,', '0.8999999761581421]',
                         '[0.8999999761581421,', '0.8999999761581421,', '0.8999999761581421]'], out


@pytest.mark.parametrize('elsewhere', [
    'jax.jit(step, static_argnums=0)',              # step referred to other than as a call
    'step(lambda s, g: s.optimizer, state, {})[0] and step',   # so: a call and a name
])
def test_a_function_passed_in_that_is_not_followed_refuses_its_result(elsewhere):
  """Where not every call site of ``step`` is in sight, ``optimize`` is not resolved: its
  result, used as the optimizer, is refused (FOM107 naming the call and its line), never left
  legacy in a program reported whole."""
  pytest.importorskip('libcst')
  from flax_optim_compat._migrate import migrate_source  # pylint: disable=g-import-not-at-top
  source = _PASSED_IN.replace('STEP(', f'({elsewhere})(')
  _, report = migrate_source(source)
  line = source.splitlines().index('  new_optimizer = optimize(state, grad)') + 1
  escapes = [r for r in report.records if r.line == line]
  assert [r.code for r in escapes] == ['FOM107'], report.records
  assert (f'new_optimizer is used as an optimizer (optimizer=new_optimizer) at script.py:'
          f'{line + 1}, and it is what optimize(state, grad) at script.py:{line} returns: '
          'optimize is a '
          'function passed in') in escapes[0].message, escapes[0].message
  assert report.records and all(r.status == 'refused' for r in report.records), report.records
