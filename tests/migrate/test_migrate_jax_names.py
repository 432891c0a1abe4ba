"""``migrate``'s rules for removed jax names (FOM201-FOM206, FOM299), proven both ways.

Each example (tests/migrate/examples/jax_names/) is a complete script: ``before`` uses
the removed names, ``after`` is what ``migrate`` writes. ``before`` ran on jax 0.4.13, which
still had the names (goldens by tools/oracle/gen_migrate_jax_names.py); ``after`` runs here on
today's jax in a process where this package cannot be imported, and must print the same
numbers, bit for bit.
The names jax had removed before 0.4.13 (``jax.ops.index_update``, ``jax.tree_multimap``,
``jax.experimental.optimizers``) are checked against hand math instead.
"""
import importlib.util
import json

import jax
import pytest

libcst = pytest.importorskip('libcst')

from flax_optim_compat import _legacy_jax
from flax_optim_compat._migrate import _jax_names
from flax_optim_compat._migrate import migrate_source, migrate_sources
from tests import _migrate_harness as harness

EXAMPLES_DIR = harness.REPO / 'tests' / 'migrate' / 'examples' / 'jax_names'
GOLDENS = json.loads((harness.REPO / 'tests' / 'fixtures' / 'migrate_jax_names.json').read_text())
# Rule code -> its examples.
BY_RULE = {
    'FOM201': ('tree_util', 'host_clip_tie_in', 'array_types', 'removed_before_0_4'),
    'FOM202': ('removed_before_0_4',),
    'FOM203': ('host_clip_tie_in',),
    'FOM204': ('host_clip_tie_in', 'fix', 'device_put'),
    'FOM205': ('array_types', 'removed_before_0_4'),
    'FOM206': ('removed_before_0_4',),
}
NAMES = sorted({n for names in BY_RULE.values() for n in names})
# removed_before_0_4 by hand (enable_omnistaging() was a no-op): zeros(5); [1:3] := 2; [0] += 1; [2] *= 3; [3] := min(0, -1);
# + 0.5; [4] := max(0.5, 4); + ones (tree_multimap); one sgd(0.5) step on p with gradient p.
HAND = {'removed_before_0_4': [1.25, 1.75, 3.75, 0.25, 2.5]}


def _source(name, side):
  return (EXAMPLES_DIR / f'{name}_{side}.py').read_text()


def test_every_rule_has_an_example_and_every_name_a_rule():
  assert sorted(BY_RULE) == sorted(rule.code for rule in _jax_names.all_rules)
  kinds = {e.kind for e in _legacy_jax.NAMES} - {'function'}   # functions: FOM299
  assert {_jax_names._RULE_OF_KIND[k].code for k in kinds} == set(BY_RULE)
  assert set(GOLDENS['trajectories']) | set(HAND) == set(NAMES)
  assert GOLDENS['jax'] == '0.4.13'


@pytest.mark.parametrize('name', NAMES)
def test_example_before_becomes_after_and_after_stays(name):
  new, report = migrate_source(_source(name, 'before'))
  assert new == _source(name, 'after')
  assert {r.status for r in report.records} == {'rewritten'}
  assert {r.exactness for r in report.records} == {'bit-exact'}
  again, report = migrate_source(new)
  assert again == new and report.records == []


@pytest.fixture(scope='module')
def after_runs(tmp_path_factory):
  root = tmp_path_factory.mktemp('jax_names')
  programs = [harness.Program(name, EXAMPLES_DIR / f'{name}_after.py') for name in NAMES]
  return harness.run_programs(programs, root, isolated=True)


@pytest.mark.parametrize('name', NAMES)
def test_after_on_todays_jax_equals_before_on_old_jax(name, after_runs):
  expected = GOLDENS['trajectories'].get(name, HAND.get(name))
  harness.assert_equivalent(harness.trajectory(json.dumps(expected)),
                            harness.result_trajectory(after_runs, name), 'bit-exact', label=name)


@pytest.mark.parametrize('call, rewritten', [
    # jax.api.X is jax.X (brax's normalization, EditableNeRF's notebooks): the expression on
    # the program's ``jax``.
    ('jax.api.device_put_sharded(list(x), devices)', 'jax.device_put('),
    ('jax.device_put_replicated(x, devices=jax.devices())', 'jax.device_put('),
    # a builtin list or tuple of a device list reads an equal list each time (jraph, held out)
    ('jax.device_put_replicated(x, list(jax.devices()))', 'jax.device_put('),
    ('jax.device_put_replicated(x, tuple(jax.local_devices()))', 'jax.device_put('),
    ('jax.device_put_replicated(x, list(jax.devices(), 1))', None),
    ('jax.device_put_replicated(x, list(*jax.devices()))', None),
    ('jax.device_put_replicated(x, sorted(jax.devices()))', None),
    # ``devices`` is written twice: a call other than jax's device lists would run twice.
    ('jax.device_put_replicated(x, pick(devices))', None),
    # an argument naming the expression's own lambda parameter would be captured by it
    ('jax.device_put_replicated(x, leaf.devices)', None),
    ('jax.device_put_sharded(x, devices, extra)', None),
    ('jax.device_put_sharded(*args)', None),
])
def test_device_put_is_written_as_its_expression_only_where_that_reads_the_same(call, rewritten):
  new, report = migrate_source(f'import jax\n\ny = {call}\n')
  if rewritten is None:
    assert [(r.code, r.status) for r in report.records] == [('FOM299', 'refused')], new
    assert f'y = {call}\n' in new
  else:
    assert [(r.code, r.status) for r in report.records] == [('FOM204', 'rewritten')]
    assert f'y = {rewritten}jax.tree_util.tree_map(lambda ' in new and 'device_put_' not in new


def test_a_list_of_devices_counts_only_where_list_is_the_builtin():
  source = ('import jax\n\ndef list(devices):\n  return devices[:1]\n\n'
            'y = jax.device_put_replicated(x, list(jax.devices()))\n')
  new, report = migrate_source(source)
  assert [(r.code, r.status) for r in report.records] == [('FOM299', 'refused')], new
  assert new.endswith('y = jax.device_put_replicated(x, list(jax.devices()))\n')


def test_names_are_resolved_not_matched():
  source = ('from mytrees import tree_map\nimport numpy as jnp\n\n'
            'def f(jax, x):\n  return jax.tree_map(tree_map, jnp.clip(x, a_min=0))\n')
  new, report = migrate_source(source)
  assert new == source and report.records == []


def test_an_alias_keeps_its_base_and_an_import_its_local_name():
  source = ('import jax as jx\nfrom jax import tree_multimap as tmm, jit\n\n'
            'y = tmm(jx.tree_map, jit)\n')
  new, report = migrate_source(source)
  assert new == ('import jax as jx\nfrom jax import jit\n'
                 'from jax.tree_util import tree_map as tmm\n\n'
                 'y = tmm(jx.tree_util.tree_map, jit)\n')
  assert [r.code for r in report.records] == ['FOM201', 'FOM201']


@pytest.mark.parametrize('body, expected', [
    ('z = 2 * jax.lax.tie_in(x, a + b)', 'z = 2 * (a + b)'),
    ('z = jax.ops.index_update(a + b, jax.ops.index[:, 1], 0.0, unique_indices=True)',
     'z = (a + b).at[:, 1].set(0.0, unique_indices=True)'),
    ('z = jax.ops.index_max(x, idx, y)', 'z = x.at[idx].max(y)'),
])
def test_a_rewritten_call_keeps_the_precedence_and_extra_keywords(body, expected):
  new, _ = migrate_source(f'import jax\n\n{body}\n')
  assert new == f'\n{expected}\n'   # ``import jax``, which the rewrite left unused, goes


def test_a_use_no_rule_rewrites_is_marked_once_and_keeps_its_import():
  source = ('import jax\nfrom jax.ops import index_update\nfrom jax.random import KeyArray\n\n'
            'update = index_update\n\ndef f(k: KeyArray, x):\n'
            '  return isinstance(k, KeyArray), jax.tree_map(abs, x)\n')
  new, report = migrate_source(source)
  refused = [r for r in report.records if r.status == 'refused']
  assert [r.code for r in refused] == ['FOM299', 'FOM299']
  assert 'from jax.ops import index_update\nfrom jax.random import KeyArray\n' in new
  assert new.count('# TODO(flax-optim-compat): FOM299') == 2
  assert 'jax.tree_util.tree_map(abs, x)' in new
  assert report.exit_status() == 2
  again, _ = migrate_source(new)
  assert again == new


def test_removed_jax_names_are_rewritten_in_a_file_with_a_legacy_optimizer():
  source = ('import jax\nfrom flax import optim\n\n'
            'opt = optim.Adam(0.1).create({"w": jax.numpy.ones(2)})\n'
            'grads = jax.tree_map(lambda p: 2 * p, opt.target)\n'
            'opt = opt.apply_gradient(grads)\n')
  changed, report = migrate_sources({'train.py': source})
  new = changed['train.py']
  assert 'jax.tree_util.tree_map(lambda p: 2 * p, opt.params)' in new
  assert 'flax' not in new.replace('from flax.training import train_state', '')
  assert {r.code for r in report.records} >= {'FOM001', 'FOM002', 'FOM004', 'FOM201'}


# The snippets below whose migrated text runs where this package cannot be imported: name ->
# legacy source. One isolated child runs them all (``snippet_runs``), each as ``__main__`` in
# its own globals, on one CPU device of one process without the runtime layer.
SNIPPETS = {
    'xla_bridge_from_import': (
        'import jax\nfrom jax.lib import xla_bridge\n\n'
        'print(xla_bridge.device_count(), xla_bridge.process_index(), '
        'xla_bridge.get_backend().platform)\n'),
    'xla_bridge_dotted': (
        'import jax.lib.xla_bridge\nfrom jax.lib.xla_bridge import get_backend as gb\n\n'
        'print(jax.lib.xla_bridge.device_count(), jax.lib.xla_bridge.process_index(), '
        'gb().platform)\n'),
    'xla_bridge_in_blocks': (
        'import os\n\n'
        "if __name__ == '__main__':\n"
        "  os.environ.setdefault('XLA_PYTHON_CLIENT_PREALLOCATE', 'false')\n"
        '  from jax.lib import xla_bridge\n'
        '  print(xla_bridge.get_backend().platform)\n\n\n'
        'def count():\n'
        '  from jax.lib import xla_bridge as xb\n'
        '  return xb.device_count()\n\n\n'
        'print(count())\n'),
    'flax_nn_functions': (
        'import jax.numpy as jnp\nfrom flax import nn\nfrom flax import optim\n\n'
        'acts = (nn.relu, nn.sigmoid, nn.softplus)\n'
        'print(*[float(f(jnp.float32(x))) for f, x in zip(acts, (-1.0, 0.0, 0.0))])\n'
        'opt = optim.GradientDescent(learning_rate=0.5).create({"w": jnp.ones(2)})\n'
        'print(*opt.apply_gradient({"w": jnp.ones(2)}).target["w"].tolist())\n'),
    'numpy_aliases': (
        'import numpy as np\nfrom numpy import product as pr, float_\n\n'
        'a = np.array("1 2".split(), dtype=np.float)\n'
        'print(a.dtype, np.float(2), np.int(3.7), np.NaN, pr([2, 3]), float_(1.5), np.object)\n'),
    'linen_initializer': (
        'import flax.linen as nn\nimport flax.linen.linear\nimport jax\nimport jax.numpy as jnp\n\n'
        'class M(nn.Module):\n'
        '  intercept_init: object = flax.linen.linear.zeros\n\n'
        '  @nn.compact\n'
        '  def __call__(self, x):\n'
        '    return nn.Dense(1, bias_init=self.intercept_init)(x)\n\n'
        'p = M().init(jax.random.PRNGKey(0), jnp.ones((1, 3)))\n'
        'print(float(p["params"]["Dense_0"]["bias"][0]),'
        ' M.intercept_init is jax.nn.initializers.zeros)\n'),
}


@pytest.fixture(scope='module')
def snippet_runs(tmp_path_factory):
  """Each of SNIPPETS migrated, then all run in one isolated child (``harness.run_migrated``).
  Name -> (the migrated text that ran, its result)."""
  root = tmp_path_factory.mktemp('jax_name_snippets')
  return harness.run_migrated(SNIPPETS, root, root / 'child',
                              env={'XLA_FLAGS': '', 'FLAX_OPTIM_COMPAT_LEGACY_JAX': '0'})


def _snippet_stdout(runs, name, new):
  """What the migrated text ``new`` of snippet ``name`` printed in the isolated child."""
  ran, result = runs[name]
  assert ran == new, (ran, new)
  assert result['ok'], f'{name} failed:\n{result["error"]}\nstdout:\n{result["stdout"]}'
  return result['stdout']


@pytest.mark.parametrize('name', ['xla_bridge_from_import', 'xla_bridge_dotted'])
def test_a_removed_module_whose_uses_are_all_renamed_is_no_longer_imported(name, snippet_runs):
  """jax 0.8 removed ``jax.lib.xla_bridge``: its three functions corpus programs call become
  today's functions of the same result and its import goes, so the file imports on today's jax.
  On one CPU device of one process the script prints 1, 0 and cpu (what jax 0.4's own
  ``xla_bridge`` printed there)."""
  new, report = migrate_source(SNIPPETS[name])
  assert 'xla_bridge' not in new
  assert {r.status for r in report.records} == {'rewritten'}
  again, report = migrate_source(new)
  assert again == new and report.records == []
  assert _snippet_stdout(snippet_runs, name, new).split() == ['1', '0', 'cpu']


def test_an_import_inside_a_block_is_replaced_where_it_stood(snippet_runs):
  """A removed module imported inside a block (a branch that first sets the environment up, a
  function) is replaced there: the new import runs where the old one ran, not at the top of the
  file, where it would load jax before the set-up, or where the block never runs (a
  cosmology program's GPU branch). The function's own ``import jax`` binds no name the function
  reads elsewhere. On one CPU device the script prints cpu, then 1."""
  new, report = migrate_source(SNIPPETS['xla_bridge_in_blocks'])
  assert new == (
      'import os\n\n'
      "if __name__ == '__main__':\n"
      "  os.environ.setdefault('XLA_PYTHON_CLIENT_PREALLOCATE', 'false')\n"
      '  import jax.extend.backend\n'
      '  print(jax.extend.backend.get_backend().platform)\n\n\n'
      'def count():\n'
      '  import jax\n'
      '  return jax.device_count()\n\n\n'
      'print(count())\n')
  placed = [r for r in report.records if 'in its place' in r.message]
  assert [(r.line, r.code) for r in placed] == [(5, 'FOM205'), (10, 'FOM205')]
  assert migrate_source(new)[0] == new
  assert _snippet_stdout(snippet_runs, 'xla_bridge_in_blocks', new).split() == ['cpu', '1']


@pytest.mark.parametrize('body, top', [
    # the function reads jax before its import: a local ``import jax`` would make that read fail
    ('def f():\n  n = jax.device_count()\n  from jax.lib import xla_bridge\n'
     '  return n, xla_bridge.get_backend()\n', 'import jax.extend.backend\n'),
    # a class body's import binds a class attribute, not a name its methods see
    ('class C:\n  from jax.lib import xla_bridge\n  b = xla_bridge.get_backend()\n',
     'import jax.extend.backend\n'),
    # bound by an import in one branch and by an assignment in the other
])
def test_an_import_in_a_block_that_cannot_take_the_new_one_gets_it_at_the_top(body, top):
  new, _ = migrate_source('import jax\n' + body)
  assert new.startswith('import jax\n' + top)
  assert new.count('import jax.extend.backend') == 1


def test_a_name_bound_by_a_removed_modules_import_and_by_another_value_is_marked_not_broken():
  """``xla_bridge`` bound by the import in ``try`` and to None in ``except``: its read has two
  meanings, so no rule rewrites it; the import stays (dropping it, as before, left the read
  a NameError on every jax while the report said every use was rewritten) and the read is
  marked FOM299."""
  source = ('import jax\ntry:\n  from jax.lib import xla_bridge\nexcept ImportError:\n'
            '  xla_bridge = None\nb = xla_bridge.get_backend()\n')
  new, report = migrate_source(source)
  assert new.replace(new[new.index('# TODO'):new.index('b = ')], '') == source
  assert [(r.line, r.code, r.status) for r in report.records] == [(6, 'FOM299', 'refused')]
  assert 'two meanings' in report.records[0].message


@pytest.mark.parametrize('imports, expected', [
    ('import jax\nimport jax.config\n', 'import jax\n\njax.config'),
    ('import jax.config\n', 'import jax\n\njax.config'),
    ('import jax.config\nimport jax\n', 'import jax\n\njax.config'),
    ('import jax as jx\nimport jax.config\n', 'import jax as jx\nimport jax\n\njax.config'),
])
def test_import_jax_config_becomes_import_jax_once(imports, expected):
  """``import jax.config`` (gone from today's jax: ``jax.config`` is jax's own attribute) becomes
  ``import jax``, and goes where the file imports ``jax`` already (flip's t5x copy had
  ``import jax`` above it: the rewrite left ``import jax`` twice, pyflakes' redefinition)."""
  new, _ = migrate_source(imports + '\njax.config.update("jax_enable_x64", True)\n')
  assert new == expected + '.update("jax_enable_x64", True)\n', new


def test_flax_nn_functions_flax_linen_has_are_renamed_and_their_file_is_not_pre_linen(
    snippet_runs):
  """mipnerf registers ``flax.nn.relu|sigmoid|softplus`` with gin: flax 0.4 removed
  ``flax.nn``, whose functions were jax's own (flax.linen re-exports the same objects), so they
  become ``flax.linen.*``, ``from flax import nn`` goes and the file runs on today's flax. A
  file whose only flax.nn names are these is no pre-Linen file: its optimizer is rewritten."""
  new, report = migrate_source(SNIPPETS['flax_nn_functions'])
  assert 'flax.nn' not in new and 'from flax import nn' not in new
  assert {r.status for r in report.records} == {'rewritten'}, report.records
  assert 'FOM105' not in {r.code for r in report.records}
  # relu(-1) = 0, sigmoid(0) = 1/2, softplus(0) = log 2; one step of 0.5 * 1 from 1.
  values = [float(v) for v in _snippet_stdout(snippet_runs, 'flax_nn_functions', new).split()]
  assert values[:2] == [0.0, 0.5] and abs(values[2] - 0.6931471805599453) < 1e-7
  assert values[3:] == [0.5, 0.5]
  pre_linen, _ = migrate_source('from flax import nn\n\nclass M(nn.Module):\n  pass\n')
  assert 'from flax import nn' in pre_linen   # kept: its module system is FOM105's


def test_an_unused_import_of_a_removed_module_goes_and_other_names_of_it_are_marked():
  new, report = migrate_source('import jax\nfrom jax.lib import xla_bridge\n\nx = jax.numpy.ones(2)\n')
  assert new == 'import jax\n\nx = jax.numpy.ones(2)\n'
  assert [(r.code, r.status) for r in report.records] == [('FOM205', 'rewritten')]
  source = 'from jax.lib import xla_bridge as xb\n\nopts = xb.get_compile_options(1, 1)\n'
  new, report = migrate_source(source)
  assert [(r.code, r.status) for r in report.records] == [('FOM299', 'refused')]
  assert 'jax.lib.xla_bridge.get_compile_options' in report.records[0].message
  assert 'from jax.lib import xla_bridge as xb' in new   # kept with the use it cannot rewrite


def test_a_jax_name_todays_jax_lacks_and_no_rule_rewrites_is_marked_not_left_silent():
  """``jax.mask`` (removed in jax 0.3, never in the table): the report names it, the import and
  the use carry a marker, and nothing else changes."""
  source = ('import jax\nfrom jax import mask, jit\n\n'
            'def f(x):\n  return jax.mask(f, ["n"], ""), jax.random.split(x).shape, jit\n')
  new, report = migrate_source(source)
  assert [(r.code, r.status, r.line) for r in report.records] == [
      ('FOM299', 'refused', 2), ('FOM299', 'refused', 5)]
  assert all(f"jax {jax.__version__} has no jax.mask" in r.message for r in report.records)
  assert new.replace(
      next(line + '\n' for line in new.splitlines() if 'FOM299' in line), '', 1).replace(
      next(line + '\n' for line in new.splitlines()[3:] if 'FOM299' in line), '', 1) == source
  assert report.exit_status() == 2
  again, _ = migrate_source(new)
  assert again == new


@pytest.mark.parametrize('source, lines', [
    ('from jaxlib.xla_extension import DeviceArray\n\n\ndef f(x: DeviceArray) -> DeviceArray:\n'
     '  return x\n', [1]),
    ('import jaxlib.xla_extension\n\n\ndef f(x: jaxlib.xla_extension.DeviceArray):\n'
     '  return x\n', [1, 4])])
def test_a_jaxlib_name_todays_jaxlib_lacks_is_marked_not_left_silent(source, lines):
  """``jaxlib.xla_extension.DeviceArray`` (flaxmodels' ``training_utils.py``, conerf's
  ``modules.py``): jaxlib 0.4.13 of the legacy era already had no ``DeviceArray`` there, and
  jaxlib 0.10 has no ``xla_extension``; the report used to say whole while the file failed at
  import. It is FOM299 now, naming what the installed jaxlib lacks."""
  import jaxlib   # pylint: disable=import-outside-toplevel
  with pytest.raises(ImportError):   # the premise, on the installed jaxlib
    exec('from jaxlib.xla_extension import DeviceArray', {})   # pylint: disable=exec-used
  new, report = migrate_source(source)
  refused = [r for r in report.records if r.code == 'FOM299']
  if importlib.util.find_spec('jaxlib.xla_extension') is not None:   # an older jaxlib: the module
    lines = lines[-1:]   # stays, so only what reads DeviceArray is marked
  assert [(r.status, r.line) for r in refused] == [('refused', n) for n in lines], (
      report.summary(False))
  assert f'jaxlib {jaxlib.__version__} has no jaxlib.xla_extension' in refused[0].message
  assert 'FOM299' in new and report.exit_status() == 2


def test_numpys_removed_aliases_are_renamed_to_the_object_they_named_called_or_not(
    snippet_runs):
  """numpy 1.24 removed ``np.float``/``np.int``/``np.object`` (the builtins themselves) and numpy
  2.0 ``np.float_``/``np.NaN``/``np.product`` (``np.float64``, ``np.nan``, ``np.prod``). VaxNeRF
  passes ``dtype=np.float``: a value, not a call. Each becomes the object it named, so the file
  runs on today's numpy without the runtime layer; ``np.NINF`` (a value, -inf, no name of its
  own today) stays FOM299."""
  new, report = migrate_source(SNIPPETS['numpy_aliases'])
  assert {r.status for r in report.records} == {'rewritten'}, report.records
  again, report_again = migrate_source(new)
  assert again == new and report_again.records == []
  # float64 from dtype=float; float(2); int(3.7) truncates; nan; 2 * 3; the builtin object.
  assert _snippet_stdout(snippet_runs, 'numpy_aliases', new).split() == ['float64', '2.0', '3', 'nan', '6', '1.5', "<class", "'object'>"]
  kept, report = migrate_source('import numpy as np\n\nlow = np.NINF\n')
  assert 'np.NINF' in kept and [r.code for r in report.records] == ['FOM299']


def test_a_use_through_jax_api_is_the_name_of_jax_and_then_its_own_rule():
  """``jax.api`` was the module of jax's public functions (``jax.api.jit`` was ``jax.jit``; jax
  0.4.13 had already dropped it): ``jx.api.X`` becomes ``jx.X`` on the program's base, then X's
  own rename; a name today's jax lacks is marked FOM299
  naming what is missing (brax's ``jax.api.device_put_sharded`` on a jax without it), and ``from jax import api`` stays marked with its uses."""
  source = 'import jax as jx\n\nf = jx.api.jit(lambda x: x)\ng = jx.api.tree_map\n'
  new, report = migrate_source(source)
  assert new == 'import jax as jx\n\nf = jx.jit(lambda x: x)\ng = jx.tree_util.tree_map\n'
  assert [(r.code, r.status) for r in report.records] == [('FOM201', 'rewritten')] * 2
  again, report = migrate_source(new)
  assert again == new and report.records == []
  # jax.mask: no jax this package supports has it (removed in 0.3.16), whatever lane runs this
  source = 'import jax\n\ndef f(g):\n  return jax.api.mask(g, in_shapes=None)\n'
  new, report = migrate_source(source)
  assert [(r.code, r.status) for r in report.records] == [('FOM299', 'refused')]
  assert f'it is jax.mask; jax {jax.__version__} has no jax.mask' in report.records[0].message
  assert new.count('FOM299') == 1 and 'jax.api.mask(g, in_shapes=None)' in new
  new, report = migrate_source('from jax import api\n\ny = api.jit\n')
  assert [(r.code, r.status) for r in report.records] == [('FOM299', 'refused')] * 2
  assert 'from jax import api\n' in new and 'y = api.jit\n' in new


# Names no supported jax has (removed in 0.3.16), so each lane sees the same; and
# score_sde_fast_sampling's own import, where the running jax has dropped host_callback (0.4.35+).
_HOST_CALLBACK_GONE = importlib.util.find_spec('jax.experimental.host_callback') is None


@pytest.mark.parametrize('source, use, name', [
    ('from jax import mask\nimport jax\n\nx = jax.numpy.ones(2)\n', 'mask(x)', 'mask'),
    ('import jax\nfrom jax.interpreters import masking as msk\n\nx = jax.numpy.ones(2)\n',
     'msk.mask(x)', 'masking'),
    pytest.param('from jax.experimental.host_callback import id_print, barrier_wait\nimport jax\n'
                 '\nx = jax.numpy.ones(2)\n', 'id_print(x)', 'host_callback',
                 marks=pytest.mark.skipif(not _HOST_CALLBACK_GONE,
                                          reason='this jax still has host_callback')),
])
def test_an_import_of_a_name_todays_jax_lacks_that_nothing_reads_goes(source, use, name):
  """score_sde_fast_sampling imports ``id_print, barrier_wait`` from ``host_callback`` and never
  uses them: the import only fails today, so it goes (FOM205); a used one stays FOM299."""
  new, report = migrate_source(source)
  assert name not in new and 'x = jax.numpy.ones(2)\n' in new
  assert [(r.code, r.status) for r in report.records] == [('FOM205', 'rewritten')]
  assert migrate_source(new)[0] == new
  new, report = migrate_source(source + f'y = {use}\n')
  assert {(r.code, r.status) for r in report.records} == {('FOM299', 'refused')}
  assert name in new


def test_a_removed_function_imported_beside_a_renamed_name_and_never_read_goes():
  """ethanabrooks/jax-rl's ``from jax.ops import index_update, index``, only ``index`` read
  (held-out batch 26): ``index`` became ``jax.numpy.s_``, and ``index_update``, which no use
  registered for removal, stayed in the import, which fails on today's jax (jax 0.4.13 removed
  ``jax.ops.index_update``). It goes; read but not rewritten, it stays and is marked."""
  source = 'from jax.ops import index_update, index\n\nsl = index[1:]\n'
  new, report = migrate_source(source)
  assert new == 'from jax.numpy import s_ as index\n\nsl = index[1:]\n', new
  assert 'index_update' in report.records[0].message, report.records
  assert [r.status for r in report.records] == ['rewritten'], report.records
  assert migrate_source(new)[0] == new
  new, report = migrate_source(source + 'update = index_update\n')
  assert 'from jax.ops import index_update\n' in new, new
  assert ('FOM299', 'refused') in {(r.code, r.status) for r in report.records}


def test_a_linen_layer_modules_initializer_becomes_flax_linen_initializers(snippet_runs):
  """``flax.linen.linear.zeros`` (flax <= 0.6.4, jax.nn.initializers.zeros) in a module field's
  default: rewritten to today's ``flax.linen.initializers.zeros``, the same object, so the
  migrated file imports and initialises where this package cannot be imported."""
  new, report = migrate_source(SNIPPETS['linen_initializer'])
  assert 'intercept_init: object = flax.linen.initializers.zeros' in new, new
  assert {r.status for r in report.records} == {'rewritten'}
  assert _snippet_stdout(snippet_runs, 'linen_initializer', new).split() == ['0.0', 'True']



@pytest.mark.parametrize('imports, base', [
    ('from jax.config import config\n', 'config'), ('from jax import config\n', 'config'),
    ('import jax\n', 'jax.config'), ('import jax as jx\n', 'jx.config')])
def test_a_name_todays_jax_config_lacks_is_marked_not_left_silent(imports, base):
  """hax's ``tpu.py`` set Cloud TPU flags through ``config.FLAGS`` (on jax 0.4.13 a namespace of
  the flags; ``from jax.config import config`` gave the object that is ``jax.config`` today, an
  object, not a module). Today's config object has no ``FLAGS``: each use is FOM299, naming
  it, as for a missing module attribute; the config's own names (``update``) are left alone."""
  assert not hasattr(jax.config, 'FLAGS')   # the premise, on the installed jax
  source = (f'{imports}\n\ndef use_tpu_driver():\n'
            f'  {base}.FLAGS.jax_xla_backend = "tpu_driver"\n'
            f'  print({base}.FLAGS.jax_backend_target)\n'
            f'  {base}.update("jax_enable_x64", {base}.jax_enable_x64)\n')
  new, report = migrate_source(source)
  refused = [r for r in report.records if r.code == 'FOM299']
  assert [(r.status, r.line) for r in refused] == [('refused', 5), ('refused', 6)], (
      report.summary(False))
  assert all(f'jax {jax.__version__} has no jax.config.FLAGS' in r.message for r in refused)
  assert new.count('FOM299') == 2 and report.exit_status() == 2
  assert migrate_source(new)[0] == new


@pytest.mark.parametrize('more, kept', [('', False), ("config.update('jax_enable_x64', False)\n",
                                                      True)])
def test_the_config_import_goes_once_omnistaging_was_its_only_use(more, kept):
  """``from jax.config import config`` becomes ``from jax import config``; with its only use,
  ``config.enable_omnistaging()``, dropped (FOM206), the import goes too (it was left unused:
  six files of held-out batch 14); a use left keeps it."""
  source = ('from jax.config import config\nconfig.enable_omnistaging()\n' + more +
            '\nfrom flax import optim\n\n\ndef make(p):\n'
            '  return optim.Adam(learning_rate=1e-3).create(p)\n')
  new, _ = migrate_source(source)
  assert 'enable_omnistaging' not in new and 'jax.config' not in new
  assert ('from jax import config' in new) == kept
  compile(new, 'migrated.py', 'exec')


@pytest.mark.parametrize('source, kept', [
    # saycan's notebook export: the comment cells above the import it drops (FOM205)
    ('import jax\nENGINE = "x"\n#Download assets.\n# if not os.path.exists(p):\n\n'
     '# Show if JAX is using GPU.\nfrom jax.lib import xla_bridge\n'
     'print(xla_bridge.get_backend().platform)\n',
     '#Download assets.\n# if not os.path.exists(p):\n\n# Show if JAX is using GPU.\nprint('),
    # in a block, the import read by nothing
    ('import jax\n\n\ndef f():\n  # a comment\n  from jax.lib import xla_bridge\n  return 1\n',
     '  # a comment\n  return 1\n'),
    # the block's last statement
    ('def f():\n  x = 1\n  # the end\n  from jax.lib import xla_bridge\n', '  x = 1\n  # the end\n'),
])
def test_a_statement_that_goes_keeps_the_comment_lines_above_it(source, kept):
  """Before, the comment lines above a removed statement went with it (saycan's test_sep.py
  lost 12 lines, demo.py 1)."""
  new, report = migrate_source(source)
  assert any(r.code == 'FOM205' for r in report.records), report.summary(False)
  assert 'xla_bridge' not in new.replace('jax.extend.backend', '') and kept in new, new
  compile(new, 'new.py', 'exec')


@pytest.mark.parametrize('source, why', [
    ('import jax\nx = jax.random.shuffle(jax.random.PRNGKey(0), y)\n',
     'a function only the runtime layer gives back: no rule rewrites it'),
    ('from jax.ops import index_update\nf = index_update\n',
     'not called as the rule rewrites it, jax.ops.index_update(...) with its arguments'),
])
def test_a_marked_jax_name_says_which_case_it_is(source, why):
  """Before, both said '(not called as the rule rewrites it, or a function only the runtime
  layer gives back)' (jraph's device_put_replicated, held out, which FOM204 now rewrites)."""
  _, report = migrate_source(source)
  (record,) = report.records
  assert record.code == 'FOM299' and why in record.message, record.message
