"""The corpus tools' pure logic: import_sweep's attribution and program layout, scan's names.

No corpus, no network, no subprocess: small programs written to a temporary folder.
"""
import ast
import importlib.util
import pathlib
import sys

import pytest

CORPUS_TOOLS = pathlib.Path(__file__).resolve().parent.parent / 'tools' / 'corpus'


def _load(name):
  spec = importlib.util.spec_from_file_location(f'_corpus_{name}', CORPUS_TOOLS / f'{name}.py')
  mod = importlib.util.module_from_spec(spec)
  saved = list(sys.path)
  sys.path.insert(0, str(CORPUS_TOOLS))  # import_sweep imports scan by name
  try:
    spec.loader.exec_module(mod)
  finally:
    sys.path[:] = saved
  return mod


sweep = _load('import_sweep')
scan = _load('scan')

PROG = '/corpus/owner+repo@abc/'
SITE = '/venv/lib/python3.11/site-packages/'


def _fail(exc, msg, frames=(), missing=None):
  return {'exc_type': exc, 'msg': msg, 'missing': missing,
          'frames': [['<string>', 1, 'run']] + [list(f) for f in frames]}


@pytest.mark.parametrize('failure, expected', [
    # a removed jax module imported by the program
    (_fail('ModuleNotFoundError', "No module named 'jax.config'",
           [(PROG + 'train.py', 1, '<module>')], missing='jax.config'),
     ('ours', 'jax.config')),
    # a removed attribute reached from the program's own line
    (_fail('AttributeError', "module 'jax.interpreters.xla' has no attribute 'DeviceArray'",
           [(PROG + 'networks.py', 9, '<module>')]),
     ('ours', 'jax.interpreters.xla.DeviceArray')),
    # numpy 2's message for a removed alias
    (_fail('AttributeError', '`np.NaN` was removed in the NumPy 2.0 release. Use `np.nan` instead.',
           [(PROG + 'replay.py', 3, '<module>'), (SITE + 'numpy/__init__.py', 400, '__getattr__')]),
     ('ours', 'numpy.NaN')),
    # numpy 1.24's message for a removed builtin alias
    (_fail('AttributeError', "module 'numpy' has no attribute 'float'.\n`np.float` was a deprecated alias",
           [(PROG + 'data.py', 3, '<module>')]),
     ('ours', 'numpy.float')),
    # the package's refusal of pre-Linen flax.nn
    (_fail('ImportError', 'flax.nn: pre-Linen flax.nn was removed in flax 0.4.0',
           [(PROG + 'models.py', 2, '<module>')]),
     ('ours', 'flax.nn')),
    # the same removed jax name used inside an installed library is that library's API
    (_fail('AttributeError', "module 'jax.interpreters.xla' has no attribute 'pytype_aval_mappings'",
           [(PROG + 'policies.py', 5, '<module>'),
            (SITE + 'tensorflow_probability/python/ops.py', 681, '<module>'),
            (SITE + 'jax/_src/deprecations.py', 50, '__getattr__')]),
     ('library', 'tensorflow_probability')),
    # a third-party module that is not installed
    (_fail('ModuleNotFoundError', "No module named 'gin'", [(PROG + 'train.py', 4, '<module>')],
           missing='gin'),
     ('library', 'gin')),
    # a module of the program itself, outside the row's directories
    (_fail('ModuleNotFoundError', "No module named 'scenic.dataset_lib'",
           [(PROG + 'scenic/train.py', 4, '<module>')], missing='scenic.dataset_lib'),
     ('harness', 'scenic.dataset_lib')),
    (_fail('Timeout', 'no answer within 10 s'), ('harness', 'timeout')),
    (_fail('DuplicateFlagError', "The flag 'workdir' is defined twice."),
     ('harness', 'absl flags: DuplicateFlagError')),
    # a stand-in used beyond what it fakes
    (_fail('TypeError', "unsupported operand type(s) for +: 'StandIn' and 'int'",
           [(PROG + 'input_pipeline.py', 8, '<module>')]),
     ('harness', 'stand-in')),
    # the program's top level needs data files
    (_fail('FileNotFoundError', "[Errno 2] No such file or directory: 'data/x.npz'",
           [(PROG + 'stage1.py', 30, '<module>')]),
     ('harness', 'FileNotFoundError')),
    # jax2tf registering TensorFlow's containers at its import, on the tensorflow stand-in
    (_fail('AssertionError', '', [(PROG + 'planestrike.py', 6, '<module>'),
                                  (SITE + 'jax/experimental/jax2tf/__init__.py', 15, '<module>'),
                                  (SITE + 'jax/experimental/jax2tf/jax2tf.py', 899, '_register')]),
     ('harness', 'stand-in')),
    # a jax backend plugin this machine lacks
    (_fail('RuntimeError', "Unknown backend iree. Available backends are ['cpu']",
           [(PROG + 'train_jax.py', 12, '<module>'),
            (SITE + 'jax/_src/xla_bridge.py', 961, '_get_backend_uncached')]),
     ('library', 'jax backend iree')),
])
def test_attribute(failure, expected):
  cat, name, _ = sweep.attribute(failure, program_tops=('scenic', 'train'),
                                 program_dir=PROG.rstrip('/'), sites=())
  assert (cat, name) == expected


def test_attribute_library_in_extra_site():
  failure = _fail('AttributeError', "module 'jax' has no attribute 'partial'",
                  [(PROG + 'a.py', 1, '<module>'), ('/libs/oldlib/core.py', 3, '<module>')])
  assert sweep.attribute(failure, (), PROG.rstrip('/'), sites=('/libs',))[:2] == ('library', 'oldlib')
  assert sweep.attribute(failure, (), PROG.rstrip('/'), sites=())[:2] == ('ours', 'jax.partial')


def _write(root, files):
  for rel, text in files.items():
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def test_plan_scripts_packages_and_namespace_packages(tmp_path):
  _write(tmp_path / 'o+r@1', {
      # a script folder: train.py imports its sibling by bare name
      'examples/mnist/train.py': 'import models\nfrom flax import optim\n',
      'examples/mnist/main.py': "import train\nif __name__ == '__main__':\n  pass\n",
      'examples/mnist/models.py': 'import jax\n',
      'examples/mnist/train_test.py': 'import train\n',
      # a namespace package imported by its dotted name (no __init__.py on the way up)
      'rl/agents/sac.py': 'from rl.networks import mlp\n',
      'rl/networks/mlp.py': 'import flax.linen as nn\n',
      # a package whose own optax.py must not shadow optax
      'lib/__init__.py': '',
      'lib/optax.py': 'import optax\n',
  })
  row = {'id': 'o+r@1', 'directory': '.'}
  job = sweep.plan(str(tmp_path), row)
  folder = str(tmp_path / 'o+r@1')
  names = dict(job['entries'] + job['others'])
  assert [n for n, _ in job['entries']] == ['main']
  assert {'train', 'models', 'rl.agents.sac', 'rl.networks.mlp', 'lib', 'lib.optax'} <= set(names)
  assert not any(n.endswith('_test') for n in names)  # tests are not imported
  assert job['sys_path'][0] == folder + '/examples/mnist'
  assert folder + '/lib' not in job['sys_path']
  assert job['sys_path'][-1] == folder


def test_summary_counts_programs_per_category():
  results = [
      {'id': 'a', 'kind': 'linen', 'ok': True, 'failures': []},
      {'id': 'b', 'kind': 'linen', 'ok': False, 'failures': [
          {'module': 'm', 'category': 'ours', 'name': 'jax.tree_map', 'detail': ''},
          {'module': 'n', 'category': 'ours', 'name': 'jax.tree_map', 'detail': ''}]},
      {'id': 'c', 'kind': 'none', 'ok': False, 'failures': [
          {'module': 'm', 'category': 'ours', 'name': 'jax.tree_map', 'detail': ''},
          {'module': 'm', 'category': 'library', 'name': 'gin', 'detail': ''}]},
  ]
  s = sweep.summarize(results)
  assert (s['programs'], s['ok'], s['failed']) == (3, 1, 2)
  assert s['with'] == {'ours': 2, 'library': 1}
  assert s['only'] == {'ours': 1}
  assert s['names']['ours'] == [('jax.tree_map', 2)]


def test_scan_counts_numpy_aliases_and_flax_nn_functions(tmp_path):
  src = ('import numpy as np\nimport jax.numpy as jnp\nfrom flax import nn\n'
         'x = np.float(1) + np.NaN\ny = nn.relu(jnp.zeros(2))\nz = np.float32(0)\n')
  (tmp_path / 'a.py').write_text(src)
  hits = scan.match(scan.scan_file(str(tmp_path / 'a.py')))
  assert {'numpy.float', 'numpy.NaN', 'flax.nn.relu', 'flax.nn'} <= hits
  assert 'numpy.float_' not in hits  # np.float32 is not np.float_ nor np.float


def test_attribute_resolves_an_attribute_of_a_jax_object_on_the_failing_line(tmp_path):
  prog = tmp_path / 'prog'
  prog.mkdir()
  (prog / 'lib.py').write_text('import jax\nfrom jax.config import config as c\n'
                               'jax.config.enable_omnistaging()\nc.enable_x64 = 1\n')
  line3 = _fail('AttributeError', "'Config' object has no attribute 'enable_omnistaging'",
                [(str(prog / 'lib.py'), 3, '<module>')])
  assert sweep.attribute(line3, (), str(prog))[:2] == ('ours', 'jax.config.enable_omnistaging')
  # the same message from an attribute of a non-jax object stays the program's own failure
  line4 = _fail('AttributeError', "'Foo' object has no attribute 'bar'",
                [(str(prog / 'lib.py'), 4, '<module>')])
  assert sweep.attribute(line4, (), str(prog))[0] == 'harness'


def test_cannot_import_name_names_the_attribute_not_the_module():
  failure = _fail('ImportError', "cannot import name 'partial' from 'jax' (/venv/jax/__init__.py)",
                  [(PROG + 'train.py', 3, '<module>')], missing='jax')
  assert sweep.attribute(failure, (), PROG.rstrip('/'))[:2] == ('ours', 'jax.partial')


@pytest.mark.parametrize('failure, expected', [
    (_fail('OverflowError', 'Python integer -1 out of bounds for uint64',
           [(PROG + 'pycolmap/camera.py', 12, '<module>')]),
     ('ours', 'numpy 2: Python int out of bounds for the dtype')),
    (_fail('AttributeError', "module 'tensorflow_probability' has no attribute 'substrates'",
           [(PROG + 'distribution.py', 4, '<module>')]),
     ('library', 'tensorflow_probability')),
    (_fail('SyntaxError', 'invalid syntax (cfg.py, line 36)', [(PROG + 'cfg.py', 36, '<module>')]),
     ('harness', 'SyntaxError')),
    # a data file read at import through numpy (AlekseiZhuravlev/hypernerf's rendering/scratch.py)
    (_fail('FileNotFoundError', "[Errno 2] No such file or directory: '/home/x/points.npy'",
           [(PROG + 'rendering/scratch.py', 9, '<module>'),
            (SITE + 'numpy/lib/_npyio_impl.py', 455, 'load')]),
     ('harness', 'FileNotFoundError')),
    # a stand-in handed to jax (FFGB_JAX: torchvision's CIFAR10().data.dtype)
    (_fail('ValueError', "Could not convert <class 'stand_in.torchvision.datasets.CIFAR10().data"
                         ".dtype'> to a NumPy dtype",
           [(PROG + 'run_fgb.py', 20, '<module>'), (SITE + 'jax/_src/dtypes.py', 300, 'dtype')]),
     ('harness', 'stand-in')),
    # Python 3.11's dataclasses and a jax array as a linen field's default (ladax)
    (_fail('ValueError', "mutable default <class 'jaxlib._jax.ArrayImpl'> for field diag_shift is "
                         'not allowed: use default_factory',
           [(PROG + 'ladax/kernels.py', 30, '<module>'),
            (SITE + 'flax/linen/module.py', 900, '__init_subclass__')]),
     ('ours', 'python 3.11: an array as a dataclass field default')),
])
def test_attribute_numpy_behaviour_library_attributes_and_syntax(failure, expected):
  assert sweep.attribute(failure, ('train',), PROG.rstrip('/'))[:2] == expected


def test_setup_and_docs_are_not_program_modules(tmp_path):
  _write(tmp_path / 'o+r@1', {'setup.py': "open('README.md')\n", 'docs/conf.py': '',
                              'pkg/__init__.py': '', 'pkg/train.py': 'import jax\n'})
  _, _, files = sweep.program_files(str(tmp_path), {'id': 'o+r@1', 'directory': '.'})
  assert [pathlib.Path(f).name for f in files] == ['__init__.py', 'train.py']


def test_a_program_inside_a_library_repository_is_not_a_removed_name(tmp_path):
  (tmp_path / 'examples').mkdir()
  failure = _fail('ModuleNotFoundError', "No module named 'jax.examples'",
                  [(str(tmp_path / 'examples' / 'mnist.py'), 3, '<module>')], missing='jax.examples')
  assert sweep.attribute(failure, ('examples',), str(tmp_path))[:2] == ('harness', 'jax.examples')


# --- both_ways.py: the comparison; drivers/_driver.py: the program's own statements --------

def _load_from(folder, name):
  spec = importlib.util.spec_from_file_location(f'_corpus_{name}', folder / f'{name}.py')
  mod = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(mod)
  return mod


def test_both_ways_compare_nan_is_never_equal():
  np = pytest.importorskip('numpy')
  both_ways = _load('both_ways')
  same = np.array([1.0, np.nan])
  result = both_ways.compare(same, same.copy())
  assert result['equal'] is False and result['finite'] is False
  assert both_ways.compare(np.ones(3), np.ones(2)) == {'equal': False, 'reason': 'lengths 3 vs 2'}
  result = both_ways.compare(np.array([2.0, -4.0]), np.array([2.0, -4.5]))
  assert not result['equal'] and result['max_abs'] == 0.5 and result['max_rel'] == 0.125
  assert both_ways.compare(np.array([0.5, 3.0]), np.array([0.5, 3.0]))['equal'] is True


def test_driver_statements_take_the_assignments_up_to_stop(tmp_path):
  driver = _load_from(CORPUS_TOOLS / 'drivers', '_driver')
  source = (
      'def main(flags):\n'
      '  data = load(flags)\n'
      '  optimizer = make(flags.lr)\n'
      '  if flags.scale:\n'
      '    scale = 2\n'
      '  else:\n'
      '    scale = None\n'
      '  state = (optimizer, scale)\n'
      '  step = jit(state)\n'
      '  state = restore(state)\n')
  (tmp_path / 'prog.py').write_text(source)
  prog = _load_from(tmp_path, 'prog')
  text = driver.statements(prog, 'main', ['optimizer', 'scale', 'state'], stop='step')
  assert text.splitlines() == [
      'optimizer = make(flags.lr)', 'if flags.scale:', '  scale = 2', 'else:', '  scale = None',
      'state = (optimizer, scale)']
  ns = driver.run_statements(prog, 'main', ['optimizer', 'scale', 'state'], stop='step',
                             make=lambda lr: lr * 10,
                             flags=type('F', (), {'lr': 0.5, 'scale': True}))
  assert ns['state'] == (5.0, 2)
  with pytest.raises(AssertionError, match='assigns none of'):
    driver.statements(prog, 'main', ['missing'])


def test_driver_statements_of_a_main_block(tmp_path):
  # dngo-jax builds its optimizer in `if __name__ == "__main__":`, indented with tabs.
  driver = _load_from(CORPUS_TOOLS / 'drivers', '_driver')
  source = (
      'def make(lr):\n'
      '\treturn lr * 10\n'
      'if __name__ == "__main__":\n'
      '\tlr = 0.5\n'
      '\topt = make(lr)\n'
      '\topt, loss = train(opt)\n')
  (tmp_path / 'script.py').write_text(source)
  prog = _load_from(tmp_path, 'script')
  assert driver.statements(prog, None, ['opt'], stop='loss') == 'opt = make(lr)'
  assert driver.run_statements(prog, None, ['opt'], stop='loss', lr=0.25)['opt'] == 2.5
  (tmp_path / 'plain.py').write_text('x = 1\n')
  with pytest.raises(AssertionError, match='__main__ block'):
    driver.statements(_load_from(tmp_path, 'plain'), None, ['x'])


def test_driver_broadcast_to_takes_lists(monkeypatch):
  jnp = pytest.importorskip('jax.numpy')
  driver = _load_from(CORPUS_TOOLS / 'drivers', '_driver')
  monkeypatch.setattr(jnp, 'broadcast_to', jnp.broadcast_to)  # put back after the test
  with pytest.raises(TypeError, match='broadcast_to requires ndarray or scalar'):
    jnp.broadcast_to([2.0], (2, 1))  # today's jax: a list is refused
  driver.broadcast_to_takes_lists()
  assert jnp.broadcast_to([2.0], (2, 1)).tolist() == [[2.0], [2.0]]
  assert jnp.broadcast_to(jnp.arange(2.0), (3, 2)).tolist() == [[0.0, 1.0]] * 3


def test_every_driver_starts_with_the_shared_setup():
  # The argv, sys.path and stand-in preamble lives once, in `_driver.setup`.
  drivers = sorted(p for p in (CORPUS_TOOLS / 'drivers').glob('*.py') if p.name != '_driver.py')
  assert drivers
  for path in drivers:
    source = path.read_text()
    calls = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call)
             and ast.unparse(n.func) == '_driver.setup']
    assert len(calls) == 1, f'{path.name}: {len(calls)} calls of _driver.setup'
    assert 'sys.path' not in source and 'sys.argv' not in source, path.name


def test_no_driver_sets_a_flag_for_the_program():
  # A flag given to both sides hides what the migrated program does without it: score_sde's
  # driver set flax_return_frozendict, which hid that migrate left init's FrozenDict pop.
  drivers = sorted((CORPUS_TOOLS / 'drivers').glob('*.py'))
  for path in drivers:
    calls = [ast.unparse(n.func) for n in ast.walk(ast.parse(path.read_text()))
             if isinstance(n, ast.Call)]
    assert not [c for c in calls if c.endswith('config.update') or 'environ' in c], path.name


def test_driver_setup_reads_argv_orders_sys_path_and_stands_in(tmp_path, monkeypatch):
  driver = _load_from(CORPUS_TOOLS / 'drivers', '_driver')
  program, site = tmp_path / 'prog', tmp_path / 'site'
  monkeypatch.setattr(sys, 'argv', ['drv.py', str(program), '3', str(site)])
  monkeypatch.setattr(sys, 'path', list(sys.path))
  monkeypatch.setattr(sys, 'meta_path', list(sys.meta_path))
  try:
    assert driver.setup('_no_such_data_lib') == (program.resolve(), 3)
    assert sys.path[:2] == [str(program.resolve()), str(tmp_path.resolve())]
    assert sys.path[-1] == str(site)
    from _no_such_data_lib import metrics  # a stand-in, not installed

    class Collection(metrics.Collection):  # a program's class may derive from a stand-in
      pass

    assert Collection.__mro__[1:] == (object,)
    assert callable(metrics.Average.from_output('loss'))
  finally:
    for name in [m for m in sys.modules if m.split('.')[0] == '_no_such_data_lib']:
      del sys.modules[name]
