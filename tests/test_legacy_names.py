"""Old programs' removed jax names and flax defaults come back while flax.optim is in use, only then.

Every test runs a brand-new interpreter (``sys.executable``) in which nothing of the test patches
anything: the installed start-up hook (or, from a plain checkout, a ``sitecustomize`` importing the
same hook module, as in tests/test_legacy_script_e2e.py) is all there is. The legacy script's
expected values come from flax 0.5.3 on jax 0.4.13 (tools/oracle/gen_legacy_names.py ran the same
script there).
"""
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import jax

from flax_optim_compat import _legacy_jax
from flax_optim_compat import _legacy_values
from tests import _isolated
from tests import test_import_alias

# jax before 0.8 still has jax.lib.xla_bridge (the floors' jax 0.5.1 has it without
# device_count and process_index): the table's stand-in module is given only where jax has none,
# and jax's own module is not completed.
XLA_BRIDGE_GONE = tuple(int(p) for p in jax.__version__.split('.')[:2]) >= (0, 8)

REPO = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = REPO / 'tests' / 'legacy_scripts' / 'legacy_names.py'
GOLDEN = REPO / 'tests' / 'fixtures' / 'legacy_names' / 'legacy_names.json'


def _env(tmp_path, **extra):
  env = test_import_alias._clean_env(JAX_PLATFORMS='cpu', **extra)
  env.pop('FLAX_OPTIM_COMPAT_LEGACY_JAX', None)
  for name in _isolated.FLAX_FLAG_VARIABLES:
    env.pop(name, None)
  env.update(extra)
  env.update(_isolated.waited_child_cache())
  if not test_import_alias._installed_here():
    hook_dir = tmp_path / 'site_hook'
    hook_dir.mkdir(exist_ok=True)
    (hook_dir / 'sitecustomize.py').write_text('import _flax_optim_compat_alias\n')
    env['PYTHONPATH'] = os.pathsep.join([str(hook_dir), str(REPO)])
  return env


def _run(tmp_path, args, **env):
  work = tmp_path / 'work'
  work.mkdir(exist_ok=True)
  proc = subprocess.run([sys.executable, *args], cwd=work, env=_env(tmp_path, **env),
                        capture_output=True, text=True, timeout=300, check=False)
  return proc


def _json(proc):
  assert proc.returncode == 0, f'STDOUT:\n{proc.stdout}\nSTDERR:\n{proc.stderr}'
  return json.loads(proc.stdout.strip().splitlines()[-1])


def _assert_close(actual, expected, path='', rtol=1e-6):
  if isinstance(expected, dict):
    assert sorted(actual) == sorted(expected), path
    for key in expected:
      _assert_close(actual[key], expected[key], f'{path}.{key}', rtol)
  elif isinstance(expected, list):
    assert len(actual) == len(expected), path
    for i, (a, e) in enumerate(zip(actual, expected)):
      _assert_close(a, e, f'{path}[{i}]', rtol)
  elif isinstance(expected, float):
    assert actual == pytest.approx(expected, rel=rtol, abs=1e-7), path
  else:
    assert actual == expected and type(actual) is type(expected), path


def test_legacy_script_runs_unchanged_and_matches_the_oracle(tmp_path):
  out = _json(_run(tmp_path, [str(SCRIPT)]))
  golden = json.loads(GOLDEN.read_text())
  # jax 0.5.0 made jax_threefry_partitionable the default, which changes every random draw of
  # a key: the shuffle is the same permutation of each column only with jax's old bits (below).
  shuffled, expected = out.pop('shuffle'), golden.pop('shuffle')
  assert sorted(map(sorted, zip(*shuffled))) == sorted(map(sorted, zip(*expected)))
  assert shuffled != sorted(shuffled)
  # Five jitted Momentum steps: float32 on different XLA versions, so not bit for bit (the
  # legacy library itself differs by ~1e-6 relative between eager and jit).
  trained = {key: golden.pop(key) for key in ('trained', 'loss')}
  # A jax that still has jnp.fix (0.5.1 does) keeps an integer type there, unlike jax 0.4.13:
  # the table gives names back only where jax lacks them (the integer case is checked below).
  fix_integer = (out.pop('fix_integer'), golden.pop('fix_integer'))
  if not hasattr(jax.numpy, 'fix'):
    _assert_close(*fix_integer)
  # jax 0.5.1's own device_put_sharded refuses a non-sequence with jax 0.4.13's message but as
  # a TypeError (0.4.13: ValueError); the table's, used where jax has none, is 0.4.13's.
  errors = (out.pop('device_put_errors'), golden.pop('device_put_errors'))
  golden.pop('device_put_module')
  if out.pop('device_put_module') != 'flax_optim_compat._legacy_values':
    errors[0][2][0] = errors[1][2][0]
  _assert_close(*errors)
  _assert_close({k: out[k] for k in golden}, golden)
  _assert_close({k: out[k] for k in trained}, trained, rtol=1e-5)
  assert sorted(out) == sorted([*golden, *trained])


def test_fix_makes_integers_float_as_legacy_did():
  """The table's ``jnp.fix`` on the oracle's integer and bool cases, on any installed jax."""
  import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
  got = [[str(r.dtype), np.asarray(r, np.float64).tolist()]
         for r in (_legacy_values.fix(jnp.asarray([-3, 4])), _legacy_values.fix(jnp.asarray([True, False])))]
  _assert_close(got, json.loads(GOLDEN.read_text())['fix_integer'])
  assert _legacy_values.fix(2).weak_type and _legacy_values.fix(2).dtype == jnp.float32
  with pytest.raises(NotImplementedError, match="'out' argument"):
    _legacy_values.fix(jnp.ones(2), out=jnp.ones(2))


def test_shuffle_is_legacy_shuffle_with_legacy_random_bits(tmp_path):
  out = _json(_run(tmp_path, [str(SCRIPT)], JAX_THREEFRY_PARTITIONABLE='false'))
  assert out['shuffle'] == json.loads(GOLDEN.read_text())['shuffle']


MODERN = r'''
import json, sys
import jax, jax.numpy as jnp, flax, flax.linen as nn
out = {'names': [hasattr(jax, 'tree_multimap'), hasattr(jax, 'tree_map'),
                 hasattr(jax.ops, 'index_update'), hasattr(jnp, 'DeviceArray'),
                 hasattr(jax.lax, 'tie_in'), hasattr(jax.random, 'KeyArray')]}
try:
  jnp.clip(jnp.ones(2), a_max=0.5)
  out['clip'] = 'accepted'
except TypeError:
  out['clip'] = 'TypeError'
try:
  from jax.config import config
  out['jax_config'] = 'imported'
except ImportError:
  out['jax_config'] = 'ImportError'
out['init'] = type(nn.Dense(2).init(jax.random.PRNGKey(0), jnp.ones((1, 2)))).__name__
out['orbax'] = flax.config.flax_use_orbax_checkpointing
out['package'] = 'flax_optim_compat' in sys.modules
print(json.dumps(out))
'''


# The same program with this package's import hooks taken out before jax is imported: what the
# installed jax and flax themselves have (the floors' jax 0.5.1 still has jax.tree_map and
# jnp.clip(a_max=); today's has neither).
PLAIN = ('''import sys
sys.meta_path[:] = [f for f in sys.meta_path if not (
    getattr(f, 'is_flax_optim_compat_alias', False)
    or getattr(f, 'is_flax_optim_compat_legacy_jax', False))]
''' + MODERN)


@pytest.fixture(scope='module')
def plain(tmp_path_factory):
  """What PLAIN prints: one run shared by the three tests that compare with it (the same
  program in the same environment prints the same line)."""
  out = _json(_run(tmp_path_factory.mktemp('plain'), ['-c', PLAIN]))
  assert out['init'] == 'dict' and out['orbax'] is True and not out['package'], out
  return out


def test_a_modern_program_sees_no_change(tmp_path, plain):
  out = _json(_run(tmp_path, ['-c', MODERN]))
  assert out == plain


def test_switch_off_even_with_flax_optim(tmp_path, plain):
  out = _json(_run(tmp_path, ['-c', 'from flax import optim\n' + MODERN],
                   FLAX_OPTIM_COMPAT_LEGACY_JAX='0'))
  assert out == dict(plain, package=True)


def test_removed_names_are_absent_from_todays_jax(plain):
  """On the newest jax the names are gone, so the tests above compare against their absence."""
  import jax  # pylint: disable=g-import-not-at-top
  if tuple(int(p) for p in jax.__version__.split('.')[:2]) < (0, 10):
    pytest.skip('jax < 0.10 still has some of the names (jax.tree_map until 0.6.0)')
  out = plain
  assert out['names'] == [False] * 6 and out['clip'] == 'TypeError', out
  assert out['jax_config'] == 'ImportError', out


SWITCH_ON = r'''
from jax.config import config
import json, sys
import jax
out = {'tree_multimap': None}
out['tree_multimap'] = jax.tree_multimap(lambda a, b: a + b, [1], [2])
import flax.linen as nn
out['init'] = type(nn.Dense(2).init(jax.random.PRNGKey(0), jax.numpy.ones((1, 2)))).__name__
import flax_optim_compat
out['same_module'] = flax_optim_compat._legacy_jax is sys.modules['flax_optim_compat._legacy_jax']
print(json.dumps(out))
'''


def test_switch_on_from_the_start_without_flax_optim(tmp_path):
  out = _json(_run(tmp_path, ['-c', SWITCH_ON], FLAX_OPTIM_COMPAT_LEGACY_JAX='1'))
  assert out['tree_multimap'] == [3] and out['init'] == 'FrozenDict' and out['same_module'], out
  # Importing jax loads only the table module (standard library only), not flax, optax or the
  # package; the first warning imports the package (its warning class), as line 1 did above.
  out = _json(_run(tmp_path, ['-c', r'''
import json, sys
import jax
print(json.dumps(sorted(m for m in sys.modules if m.startswith('flax'))))
'''], FLAX_OPTIM_COMPAT_LEGACY_JAX='1'))
  assert out == ['flax_optim_compat._legacy_jax']


WARNINGS = r'''
import importlib, inspect, json, warnings
import jax, jax.numpy as jnp
TABLE = %r
# What today's jax has, looked up before the package is imported (for 'keywords': whether the
# function takes the old keywords itself, as jnp.clip(a_max=) did up to jax 0.9).
def _has(module, name, kind):
  try:
    owner = jax.config if kind == 'config_attribute' else importlib.import_module(module)
  except ImportError:
    return False  # a removed module (flax.nn)
  if kind == 'keywords':
    return {'a_min', 'a_max'} <= set(inspect.signature(getattr(owner, name)).parameters)
  return hasattr(owner, name)
had = [_has(module, name, kind) for module, name, kind in TABLE]
warnings.simplefilter('always')
with warnings.catch_warnings(record=True) as caught:
  import flax_optim_compat
  for _ in range(2):
    for module, name, kind in TABLE:
      if kind == 'config_attribute':
        getattr(jax.config, name)()
      elif kind == 'keywords':
        getattr(importlib.import_module(module), name)(jnp.ones(2), a_max=0.5)
      elif kind in ('module', 'config_module'):
        exec(f'import {module}.{name}')
        if kind == 'config_module':
          exec(f'from {module}.{name} import config')
      else:
        getattr(importlib.import_module(module), name, None)
print(json.dumps({'had': had, 'warnings': [(w.category.__name__, str(w.message), w.filename)
                                           for w in caught]}))
'''


def test_each_name_warns_once_naming_its_replacement(tmp_path):
  table = [(e.module, e.name, e.kind) for e in _legacy_jax.NAMES]
  out = _json(_run(tmp_path, ['-c', WARNINGS % (table,)]))
  ours = [(message, filename) for category, message, filename in out['warnings']
          if category == 'FlaxOptimDeprecationWarning']
  # A name the installed jax still has (jax.host_id; jnp.clip taking a_max up to jax 0.9) is
  # left alone: no warning.
  expected = [e for e, had in zip(_legacy_jax.NAMES, out['had'])
              if (not had or e.kind == 'config_module')
              and (XLA_BRIDGE_GONE or e.module != 'jax.lib.xla_bridge')]
  assert len(expected) >= 15
  assert len(ours) == len(expected), ours  # each once, though the script uses each twice
  for entry, (message, filename) in zip(expected, ours):
    assert entry.qualname in message, (entry, message)
    assert entry.replacement in message and entry.removed in message, message
    assert filename == '<string>', (entry, filename)  # the user's line, not ours or importlib's


def test_pre_linen_flax_nn_is_one_clear_line(tmp_path):
  # While the names are on, flax.nn holds only linen's functions: its module system is refused
  # at its first use, in one line.
  for code in ('from flax import nn\nnn.Module', 'import flax.nn\nflax.nn.Model',
               'import flax\nflax.nn.Dense'):
    proc = _run(tmp_path, ['-c', 'from flax import optim\n' + code])
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith('AttributeError:') and 'flax.nn' in last and 'flax 0.4.0' in last, last
    assert 'flax_optim_compat does not restore it' in last, last
  # Off, the import itself is refused.
  for code, error in (('from flax import nn', 'ImportError'), ('import flax.nn', 'ImportError'),
                      ('import flax\nflax.nn.Module', 'AttributeError')):
    proc = _run(tmp_path, ['-c', 'from flax import optim\n' + code],
                FLAX_OPTIM_COMPAT_LEGACY_JAX='0')
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(error + ':') and 'flax.nn' in last and 'flax 0.4.0' in last, last


FLAX_NN_FUNCTIONS = r'''
import json
import flax
R = flax.nn.relu                   # before anything imports flax.optim, as a NeRF gin config
from flax import nn
import flax.linen as linen
import jax.numpy as jnp
x = jnp.arange(-2.0, 2.0).reshape(1, 4, 1)
print(json.dumps({
    'same': [getattr(nn, n) is getattr(linen, n) for n in %r],
    'relu': R(jnp.asarray([-1.0, 2.0])).tolist(),
    'max_pool': nn.max_pool(x, (2,), strides=(2,)).ravel().tolist()}))
'''


def test_flax_nn_functions_are_linens(tmp_path):
  names = [e.name for e in _legacy_jax.NAMES if e.module == 'flax.nn']
  program = tmp_path / 'nerf_config.py'
  program.write_text(FLAX_NN_FUNCTIONS % (names,))
  out = _json(_run(tmp_path, [str(program)]))
  assert out == {'same': [True] * len(names), 'relu': [0.0, 2.0], 'max_pool': [-1.0, 1.0]}, out


def test_names_jax_still_has_are_left_alone(tmp_path):
  out = _json(_run(tmp_path, ['-c', r'''
import json
import jax, jax.numpy as jnp
before = {name: getattr(jax, name) for name in ('host_id', 'host_count', 'process_index')}
getattr_before = jax.__getattr__
import flax_optim_compat
print(json.dumps({'same': [getattr(jax, n) is f for n, f in before.items()],
                  'tree_map': jax.tree_map is jax.tree_util.tree_map,
                  'getattr_chained': jax.__getattr__ is not getattr_before}))
''']))
  assert out == {'same': [True, True, True], 'tree_map': True, 'getattr_chained': True}


# --- any import order: small programs of the shapes real ones have (their README says which) --

PROGRAMS = REPO / 'tests' / 'fixtures' / 'legacy_names' / 'programs'


def _program(tmp_path, name, script, **env):
  """Runs the program ``name`` (a copy, so nothing is written into the repo) as ``python script``."""
  import shutil  # pylint: disable=g-import-not-at-top
  work = tmp_path / 'work'
  shutil.copytree(PROGRAMS / name, work)
  return subprocess.run([sys.executable, script], cwd=work, env=_env(tmp_path, **env),
                        capture_output=True, text=True, timeout=300, check=False)


def test_a_removed_name_used_before_the_module_importing_flax_optim(tmp_path):
  out = _json(_program(tmp_path, 'module_first', 'main.py'))
  assert out['double'] == [0.0, 2.0, 4.0] and out['is_array'] == [True, True], out
  assert out['tree_multimap'] == [3] and out['init'] == 'FrozenDict', out
  assert out['step'] == pytest.approx([1 - 0.1 * 0.5] * 2), out  # one GradientDescent step
  # Without the names the program stops at its first module, as it does on today's jax.
  proc = _program(tmp_path / 'off', 'module_first', 'main.py', FLAX_OPTIM_COMPAT_LEGACY_JAX='0')
  assert proc.returncode == 1 and "has no attribute 'DeviceArray'" in proc.stderr, proc.stderr


def test_a_package_init_importing_such_a_module_first(tmp_path):
  out = _json(_program(tmp_path, 'package_init', 'run.py'))
  # Momentum(lr=0.1, beta=0.5) from w=3 (tree_multimap of 1*3) with gradient 1, twice:
  # v=1, w=2.9; v=1.5, w=2.75.
  assert out == {'is_array': True, 'w': pytest.approx([2.75, 2.75])}, out


def test_from_jax_config_import_config_on_line_1(tmp_path):
  out = _json(_program(tmp_path, 'jax_config_first', 'main.py'))
  # Adam's first step from 0 with gradient 1: the bias-corrected moments are both 1, so the
  # update is lr * 1 / (1 + eps); in float32 `1 - 0.999` is 0.00099998713, which leaves the
  # corrected second moment at 1.0000129 (7e-6 relative).
  assert out == {'x64': False, 'w': pytest.approx([-0.1, -0.1], rel=2e-5),
                 'clip': [0.0, 1.0, 2.0, 2.0]}
  proc = _program(tmp_path / 'off', 'jax_config_first', 'main.py',
                  FLAX_OPTIM_COMPAT_LEGACY_JAX='0')
  assert proc.returncode == 1 and "No module named 'jax.config'" in proc.stderr, proc.stderr


def test_the_hook_stays_quiet_where_the_package_cannot_be_imported(tmp_path):
  """The start-up hook is installed but the package is not importable (a broken or partial
  install, or a process that hides it): a program module naming a removed jax name imports as
  it does on today's jax, without an error from the hook."""
  from tests import _isolated  # pylint: disable=g-import-not-at-top
  work = tmp_path / 'work'
  work.mkdir()
  (work / 'helper.py').write_text('import jax\nOLD = "jax.tree_multimap"\nVALUE = 3\n')
  code = _isolated.prelude() + 'import helper\nprint(helper.VALUE)\n'
  proc = subprocess.run([sys.executable, '-c', code], cwd=work, env=_env(tmp_path),
                        capture_output=True, text=True, timeout=300, check=False)
  assert proc.returncode == 0 and proc.stdout.split() == ['3'], proc.stderr


def test_a_modern_program_file_sees_what_it_sees_without_the_package(tmp_path):
  """Its source is read (it names jax), found modern, and nothing changes: no name, no warning."""
  out = _json(_program(tmp_path, 'modern', 'main.py'))
  plain = _json(_program(tmp_path / 'plain', 'modern', 'main.py',
                         FLAX_OPTIM_COMPAT_LEGACY_JAX='0', FLAX_OPTIM_COMPAT_ALIAS='0'))
  # The one difference is the alias's, not the names': `flax` answers `flax.optim` (and refuses
  # `flax.nn` in one line) through a module __getattr__ while the alias is on.
  assert out.pop('getattrs') == plain.pop('getattrs') + ['flax']
  assert out == plain, (out, plain)
  assert out['init'] == 'dict' and out['orbax'] is True and out['package'] == [], out


NAMES_ONLY = r'''
import importlib, json, sys, warnings
import jax
import flax
flags = lambda: [flax.config.flax_return_frozendict, flax.config.flax_use_orbax_checkpointing]
before = flags()
with warnings.catch_warnings(record=True) as caught:
  warnings.simplefilter('always')
  leaves = jax.tree_multimap(lambda x: x, [1, [2, 3]])   # gone from every jax we run on
  leaves = jax.tree_util.tree_leaves(leaves)
after, loaded = flags(), 'flax_optim_compat' in sys.modules
package = importlib.import_module('flax_optim_compat')
print(json.dumps({'leaves': leaves, 'before': before, 'after': after, 'package': loaded,
                  'ours': [w.category is package.FlaxOptimDeprecationWarning for w in caught],
                  'attributes': [hasattr(package, m) for m in ('_legacy_jax', '_deprecation')]}))
'''


def test_a_removed_name_alone_gives_the_name_and_leaves_flax_defaults_alone(tmp_path):
  """A program that spells a removed jax name and not flax.optim gets the name, with its
  warning, and not the flax defaults: the warning's class is loaded without the package (whose
  import would switch them on), and is the package's own class once the package is imported."""
  (tmp_path / 'names_only.py').write_text(NAMES_ONLY)
  out = _json(_run(tmp_path, [str(tmp_path / 'names_only.py')]))
  assert out['leaves'] == [1, 2, 3]
  assert out['after'] == out['before'] and out['package'] is False, out
  assert out['ours'] == [True] and out['attributes'] == [True, True], out


@pytest.mark.parametrize('source, expected', [
    ('from flax import linen as nn, optim\n', 'api'),
    ('from flax import (\n    linen,\n    optim,\n)\n', 'api'),
    ('import flax.optim as legacy_optim\n', 'api'),
    ('import flax\nopt = flax.optim.Adam(1e-3)\n', 'api'),
    ('from flax.optim import dynamic_scale\n', 'api'),
    ('from jax.config import config\n', 'names'),
    ('from jax.experimental import optimizers\n', 'names'),
    ('import jax.experimental.stax as stax\n', 'names'),
    ('def f(x: jnp.DeviceArray): ...\n', 'names'),
    ('import jax.numpy as np\nT = np.DeviceArray\n', 'names'),
    ('y = jax.tree_map(f, x)\n', 'names'),
    ('y = jax.ops.index_update(x, jax.ops.index[0], 1.0)\n', 'names'),
    ('from jax import tree_multimap\n', 'names'),
    ('config.enable_omnistaging()\n', 'names'),
    ('k = jax.random.shuffle(key, x)\n', 'names'),
    ('gin.external_configurable(flax.nn.relu, module="flax.nn")\n', 'names'),
    ('from flax import nn\n', 'names'),
    ('from jax.lib import xla_bridge\n', 'names'),
    ('x = np.zeros(3, dtype=np.float)\n', 'names'),
    ('import flax.linen as nn\ny = nn.relu(x)\n', None),
    ('x = np.zeros(3, dtype=np.float32)\n', None),
    # Today's spellings, names jax still has, and names that are only the same text:
    ('y = jax.tree_util.tree_map(f, x)\n', None),
    ('import random\nrandom.shuffle(x)\n', None),
    ('np.clip(x, a_min=0, a_max=1)\n', None),
    ('jax.config.update("jax_enable_x64", True)\n', None),
    ('i = jax.host_id()\n', None),
    ('import flax.linen as nn\nfrom flax.training import train_state\n', None),
    ('# was: from flax import optim\n#   jax.tree_multimap(f, a, b)\n', None),
    # A quote inside a comment starts no string; a `#` inside a string starts no comment:
    ("y = jax.tree_util.tree_map(f, x)  # jax's jax.tree_map is gone\n", None),
    ("# it's here\nimport jax\n", None),
    ("s = 'a # b'\ny = jax.tree_multimap(f, a, b)\n", 'names'),
    ('s = "# not a comment: jax.tree_multimap"\n', 'names'),
])
def test_legacy_use_reads_a_source(source, expected):
  assert _legacy_jax.legacy_use(source) == expected


def test_sources_naming_no_table_package_are_not_read():
  """The hook skips a source naming none of SOURCE_HINTS: every table module must be among them."""
  import _flax_optim_compat_alias  # pylint: disable=g-import-not-at-top
  hints = {hint.decode() for hint in _flax_optim_compat_alias.SOURCE_HINTS}
  for entry in _legacy_jax.NAMES:
    assert any(hint in entry.module for hint in hints), entry


NUMPY_AND_PARTIAL = r'''
import functools, json, math
import numpy as np
from flax import optim
import jax
print(json.dumps({
    'types': [np.int is int, np.float is float, np.object is object, np.float_ is np.float64],
    'nan': math.isnan(np.NaN), 'ninf': np.NINF, 'product': int(np.product([2, 3, 4])),
    'partial': jax.partial is functools.partial,
    'dtype': np.zeros(2, dtype=np.int).dtype == np.dtype(int)}).replace('-Infinity', '"-inf"'))
'''


def test_numpy_aliases_and_jax_partial_are_the_objects_they_named(tmp_path):
  out = _json(_run(tmp_path, ['-c', NUMPY_AND_PARTIAL]))
  assert out == {'types': [True] * 4, 'nan': True, 'ninf': '-inf', 'product': 24,
                 'partial': True, 'dtype': True}, out


PICKLE = REPO / 'tests' / 'fixtures' / 'legacy_names' / 'jax_0_4_13_arrays'
LOAD_PICKLE = r'''
import json, pickle, sys
import numpy as np
if sys.argv[2] == 'legacy':
  from flax import optim
import jax, jax.numpy as jnp
try:
  with open(sys.argv[1], 'rb') as f:
    arrays = pickle.load(f)
except Exception as e:
  print(json.dumps({'error': f'{type(e).__name__}: {e}'}))
  raise SystemExit
out = {key: {'type': 'numpy' if isinstance(v, np.ndarray) else 'jax', 'dtype': str(v.dtype),
             'shape': list(v.shape),
             'weak_type': bool(getattr(getattr(v, 'aval', None), 'weak_type', False)),
             'values': np.asarray(v, np.float64).tolist()} for key, v in arrays.items()}
today = jnp.arange(3.0) * 2  # today's own pickles go through the same function
out['round_trip'] = pickle.loads(pickle.dumps(today)).tolist()
print(json.dumps(out))
'''


def test_arrays_pickled_by_jax_0_4_load_with_their_values(tmp_path):
  expected = json.loads(PICKLE.with_suffix('.json').read_text())
  assert expected.pop('jax') == '0.4.13'
  out = _json(_run(tmp_path, ['-c', LOAD_PICKLE, str(PICKLE.with_suffix('.pkl')), 'legacy']))
  assert out.pop('round_trip') == [0.0, 2.0, 4.0]
  assert out == expected  # dtype, shape, weak type and every value, exactly


def test_without_the_legacy_api_todays_jax_alone_fails_on_them(tmp_path):
  out = _json(_run(tmp_path, ['-c', LOAD_PICKLE, str(PICKLE.with_suffix('.pkl')), 'modern']))
  if 'error' not in out:
    pytest.skip('this jax still loads jax 0.4 pickles by itself')
  assert 'named_shape' in out['error'], out


XLA_BRIDGE = r'''
import json
from jax.lib import xla_bridge      # line 1: recognised from this file before it runs
import jax, jax.extend.backend
out = {'same': [xla_bridge.get_backend() is jax.extend.backend.get_backend(),
                xla_bridge.device_count() == jax.device_count(),
                xla_bridge.process_index() == jax.process_index()]}
try:
  xla_bridge.xla_client
except AttributeError as e:
  out['other'] = str(e)
print(json.dumps(out))
'''


@pytest.mark.skipif(not XLA_BRIDGE_GONE, reason='this jax still has jax.lib.xla_bridge')
def test_xla_bridge_gives_its_three_functions_and_refuses_the_rest(tmp_path):
  program = tmp_path / 'spmd.py'
  program.write_text(XLA_BRIDGE)
  out = _json(_run(tmp_path, [str(program)]))
  assert out['same'] == [True, True, True], out
  assert 'jax 0.8.0 removed jax.lib.xla_bridge' in out['other'], out


LINEN_INITIALIZERS = r'''
import json
import flax.linen as nn
import flax.linen.linear
from flax import optim
import jax
import jax.numpy as jnp

class LinearModel(nn.Module):          # a field defaulting to linear.py's own name, as
  intercept_init: object = flax.linen.linear.zeros  # interpolation_robustness's models/jax.py
  @nn.compact
  def __call__(self, x):
    return nn.Dense(1, bias_init=self.intercept_init)(x)

params = LinearModel().init(jax.random.PRNGKey(0), jnp.ones((1, 3)))['params']
print(json.dumps({
    'same': [flax.linen.linear.zeros is jax.nn.initializers.zeros,
             flax.linen.linear.lecun_normal is jax.nn.initializers.lecun_normal,
             flax.linen.linear.variance_scaling is jax.nn.initializers.variance_scaling,
             flax.linen.attention.zeros is jax.nn.initializers.zeros,
             flax.linen.recurrent.orthogonal is jax.nn.initializers.orthogonal,
             flax.linen.recurrent.zeros is jax.nn.initializers.zeros],
    'bias': [float(b) for b in params['Dense_0']['bias']]}))
'''


def test_linen_layer_modules_give_back_their_initializers(tmp_path):
  """flax 0.5.3's flax/linen/linear.py, attention.py and recurrent.py imported jax.nn's
  initializers into their own namespace (measured with the oracle: each `is` the jax.nn one);
  flax 0.6.5 dropped them. Given back while the legacy API is in use, the same objects."""
  out = _json(_run(tmp_path, ['-c', LINEN_INITIALIZERS]))
  assert out == {'same': [True] * 6, 'bias': [0.0]}
