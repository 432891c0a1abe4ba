"""`from flax import optim` in old code resolves to flax_optim_compat after a plain install.

The install tests build the package into a fresh venv (regular and editable, PEP 660) and run
a new interpreter there, exactly like a user's `python train.py`. The venv has no pip and no
dependencies of its own: a `.pth` file appends this environment's site-packages (jax, flax,
optax, and pip/setuptools/wheel for the build), so nothing is downloaded when setuptools>=64
and wheel (or setuptools>=70.1) are installed here — the `test` extra brings them. Otherwise
pip builds with isolation and needs the package index.
"""
import importlib.metadata
import importlib.util
import json
import os
import pathlib
import shutil
import site
import subprocess
import sys

import pytest

from tests import _utils

REPO = pathlib.Path(__file__).resolve().parents[1]
ALIAS_MODULE = REPO / '_flax_optim_compat_alias.py'
PTH_NAME = 'flax_optim_compat_alias.pth'
HEAVY = ('jax', 'jaxlib', 'flax', 'optax', 'numpy', 'flax_optim_compat')

# Everything old code does, checked in a brand-new interpreter. Prints one JSON line.
CHECK_SCRIPT = r'''
import json, sys
out = {
    'startup_heavy': sorted(m for m in sys.modules if m.split('.')[0] in %(heavy)r),
    'hook_loaded': '_flax_optim_compat_alias' in sys.modules,
}
import warnings
warnings.simplefilter('ignore', DeprecationWarning)
import flax
out['flax_own_optim_attr'] = 'optim' in vars(flax)
out['lazy_attr'] = flax.optim.Adam.__module__            # `import flax; flax.optim.Adam`
from flax import optim
import flax_optim_compat
out['from_flax_import_optim'] = optim is flax_optim_compat
import flax.optim
out['import_flax_optim'] = flax.optim is flax_optim_compat
from flax.optim.adam import _AdamHyperParams, _AdamParamState
import flax_optim_compat.adam
out['adam_private_names'] = (_AdamParamState is flax_optim_compat.adam._AdamParamState
                             and _AdamHyperParams is flax_optim_compat.adam._AdamHyperParams)
out['one_module_object'] = sys.modules['flax.optim.adam'] is flax_optim_compat.adam
from flax.optim import dynamic_scale
import flax_optim_compat.dynamic_scale
out['dynamic_scale_module'] = dynamic_scale is flax_optim_compat.dynamic_scale
out['DynamicScale'] = flax.optim.DynamicScale is flax_optim_compat.DynamicScale
out['real_spec_kept'] = flax_optim_compat.__spec__.name
out['package_file'] = flax_optim_compat.__file__
import jax.numpy as jnp
opt = flax.optim.Momentum(learning_rate=0.1, beta=0.9).create({'w': jnp.ones(2)})
opt = opt.apply_gradient({'w': jnp.ones(2)})
out['one_step'] = [float(x) for x in opt.target['w']]
print(json.dumps(out))
''' % {'heavy': HEAVY}

DISABLED_SCRIPT = r'''
import json, sys
out = {'hook_loaded': '_flax_optim_compat_alias' in sys.modules}
import flax
out['hasattr'] = hasattr(flax, 'optim')
try:
  from flax import optim
  out['import'] = 'succeeded'
except ImportError as e:
  out['import'] = type(e).__name__
print(json.dumps(out))
'''


def _clean_env(**extra):
  env = {k: v for k, v in os.environ.items()
         if k not in ('PYTHONPATH', 'PYTHONHOME', 'PYTHONSTARTUP', 'FLAX_OPTIM_COMPAT_ALIAS')}
  env.update(extra)
  return env


def _run(args, cwd, env=None, timeout=180):
  proc = subprocess.run(args, cwd=cwd, env=_clean_env() if env is None else env,
                        capture_output=True, text=True, timeout=timeout)
  assert proc.returncode == 0, (
      f'{args!r} failed ({proc.returncode}):\nSTDOUT:\n{proc.stdout}\nSTDERR:\n{proc.stderr}')
  return proc


def _json_out(proc):
  return json.loads(proc.stdout.strip().splitlines()[-1])


def _copy_project(dest):
  """The files a build needs, away from the repo (no build/ or egg-info left behind there)."""
  dest.mkdir()
  for name in ('setup.py', 'setup.cfg', 'pyproject.toml', 'MANIFEST.in', 'README.md', 'LICENSE',
               ALIAS_MODULE.name):
    if (REPO / name).exists():
      shutil.copy2(REPO / name, dest / name)
  shutil.copytree(REPO / 'flax_optim_compat', dest / 'flax_optim_compat',
                  ignore=shutil.ignore_patterns('__pycache__', '*.pyc'))
  return dest


def _fresh_venv(root):
  """A pip-less venv that sees this environment's packages through a path-only .pth."""
  venv = root / 'venv'
  _run([sys.executable, '-m', 'venv', '--without-pip', str(venv)], cwd=root)
  python = venv / ('Scripts/python.exe' if os.name == 'nt' else 'bin/python')
  purelib = pathlib.Path(_run(
      [str(python), '-c', 'import sysconfig; print(sysconfig.get_path("purelib"))'],
      cwd=root).stdout.strip())
  # Path lines only (no `import` line): this environment's own .pth files are NOT processed in
  # the fresh venv. The lines name views of this environment's site-packages without this
  # package: an install of it here (regular or editable) must not shadow the one under test
  # (a regular one would: setuptools' editable finder comes after the path finder).
  views = [_without_this_package(pathlib.Path(d), root / f'env_view_{i}')
           for i, d in enumerate(site.getsitepackages()) if os.path.isdir(d)]
  (purelib / '_dev_env.pth').write_text(''.join(f'{view}\n' for view in views))
  return python, purelib


def _is_this_package(name):
  return 'flax_optim_compat' in name.lower().replace('-', '_')


def _without_this_package(site_dir, view):
  """``view``: a directory of links to every entry of ``site_dir`` but this package's own
  (its modules, its alias hook, its dist-info / egg-link / editable-install files)."""
  view.mkdir()
  for entry in site_dir.iterdir():
    if not _is_this_package(entry.name):
      (view / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
  return view


def _pip_install(python, project, root, editable):
  """``project`` installed into the venv of ``python``: editable, or (a regular install) the
  run's wheel (``_utils.built_dists``, built once from the same files) where it can be built
  offline, else ``project`` built by pip with isolation."""
  args = [str(python), '-m', 'pip', 'install', '--no-deps', '--disable-pip-version-check', '-q',
          '--use-pep517']
  offline = _utils.offline_build_possible()
  if offline:
    args += ['--no-build-isolation', '--no-index']
  if editable:
    args += ['-e', str(project)]
  else:
    args += [str(_utils.built_dists()[0] if offline else project)]
  _run(args, cwd=root, timeout=300)


def _assert_alias_works(python, root, expected_file_prefix):
  out = _json_out(_run([str(python), '-c', CHECK_SCRIPT], cwd=root))
  assert out['hook_loaded'], out
  assert out['startup_heavy'] == [], f'start-up imported {out["startup_heavy"]}'
  assert not out['flax_own_optim_attr'], 'this flax ships its own optim: test premise broken'
  assert out['lazy_attr'] == 'flax_optim_compat.adam', out
  for key in ('from_flax_import_optim', 'import_flax_optim', 'adam_private_names',
              'one_module_object', 'dynamic_scale_module', 'DynamicScale'):
    assert out[key] is True, (key, out)
  assert out['real_spec_kept'] == 'flax_optim_compat', out
  assert out['package_file'].startswith(str(expected_file_prefix)), out
  # Momentum(0.1, 0.9), one step of grad 1 from 1: m = 1, w = 1 - 0.1 * 1.
  assert out['one_step'] == pytest.approx([0.9, 0.9]), out


def _assert_disabled_by_env_var(python, root):
  for value in ('0', 'false', 'OFF'):
    out = _json_out(_run([str(python), '-c', DISABLED_SCRIPT], cwd=root,
                         env=_clean_env(FLAX_OPTIM_COMPAT_ALIAS=value)))
    assert out == {'hook_loaded': True, 'hasattr': False, 'import': 'ImportError'}, (value, out)


def _assert_startup_cheap(python, root):
  """The hook adds one module to start-up and imports nothing else."""
  proc = _run([str(python), '-X', 'importtime', '-c', 'pass'], cwd=root)
  rows = [line.split('|') for line in proc.stderr.splitlines()
          if line.startswith('import time:') and '|' in line]
  names = [r[2].rstrip() for r in rows]
  idx = [i for i, n in enumerate(names) if n.strip() == '_flax_optim_compat_alias']
  assert len(idx) == 1, proc.stderr
  i = idx[0]
  depth = len(names[i]) - len(names[i].lstrip())
  # importtime prints children before their parent, indented deeper.
  children = []
  for j in range(i - 1, -1, -1):
    if len(names[j]) - len(names[j].lstrip()) <= depth:
      break
    children.append(names[j].strip())
  assert children == [], f'the hook imported {children} at start-up'
  # Its cost in CPU time, not importtime's wall time (which a busy machine inflates by whatever
  # it runs meanwhile): the module executed again in the same kind of process. Typically
  # ~0.5 ms; the bound only catches something heavy sneaking in.
  seconds = float(_run([str(python), '-c', _HOOK_CPU_SECONDS], cwd=root).stdout)
  assert seconds < 0.05, seconds


# The hook's module executed once more (its install calls are idempotent), timed in CPU seconds.
_HOOK_CPU_SECONDS = r'''
import importlib.util, sys, time
spec = importlib.util.find_spec('_flax_optim_compat_alias')
module = importlib.util.module_from_spec(spec)
start = time.process_time()
spec.loader.exec_module(module)
print(time.process_time() - start)
'''


@pytest.fixture(scope='module')
def project_copy(tmp_path_factory):
  return _copy_project(tmp_path_factory.mktemp('src') / 'flax_optim_compat_src')


def test_regular_install_in_fresh_venv(tmp_path, project_copy):
  python, purelib = _fresh_venv(tmp_path)
  _pip_install(python, project_copy, tmp_path, editable=False)
  assert (purelib / PTH_NAME).is_file()
  record = next(purelib.glob('flax_optim_compat-*.dist-info')).joinpath('RECORD').read_text()
  assert PTH_NAME in record  # so `pip uninstall` removes it again
  _assert_alias_works(python, tmp_path, expected_file_prefix=purelib)
  _assert_disabled_by_env_var(python, tmp_path)
  _assert_startup_cheap(python, tmp_path)


def test_editable_install_in_fresh_venv(tmp_path, project_copy):
  python, purelib = _fresh_venv(tmp_path)
  _pip_install(python, project_copy, tmp_path, editable=True)
  assert (purelib / PTH_NAME).is_file()
  assert not (purelib / 'flax_optim_compat').exists()  # really editable
  _assert_alias_works(python, tmp_path, expected_file_prefix=project_copy)
  _assert_disabled_by_env_var(python, tmp_path)


def test_uninstall_removes_the_hook(tmp_path, project_copy):
  python, purelib = _fresh_venv(tmp_path)
  _pip_install(python, project_copy, tmp_path, editable=False)
  _run([str(python), '-m', 'pip', 'uninstall', '-y', '-q', 'flax_optim_compat'], cwd=tmp_path)
  assert not (purelib / PTH_NAME).exists()
  out = _json_out(_run([str(python), '-c', DISABLED_SCRIPT], cwd=tmp_path))
  assert out == {'hook_loaded': False, 'hasattr': False, 'import': 'ImportError'}, out


def _installed_pth():
  for d in site.getsitepackages() + [site.getusersitepackages()]:
    path = pathlib.Path(d) / PTH_NAME
    if path.is_file():
      return path
  return None


def _installed_here():
  """Install records of this package in this environment's site-packages (any install kind)."""
  patterns = ('flax_optim_compat-*.dist-info', 'flax_optim_compat.egg-link',
              'flax-optim-compat.egg-link', '__editable__.flax_optim_compat-*.pth')
  return [p for d in site.getsitepackages() for pattern in patterns
          for p in pathlib.Path(d).glob(pattern)]


def test_this_environment_when_installed(tmp_path):
  """CI (`.ci/run`) installs the package editable into .venv: the alias must work there."""
  if not _installed_here():
    pytest.skip('flax_optim_compat is not installed in this environment (covered by the '
                'fresh-venv tests)')
  assert _installed_pth() is not None, (
      f'flax_optim_compat is installed but {PTH_NAME} is missing from site-packages')
  # cwd=tmp_path: the repo checkout must not be what makes the import work.
  out = _json_out(_run([sys.executable, '-c', CHECK_SCRIPT], cwd=tmp_path))
  assert out['hook_loaded'] and out['from_flax_import_optim'] and out['adam_private_names'], out
  assert out['startup_heavy'] == [], out


# --- the finder itself, from the source tree (no install needed) --------------------------

def _run_with_hook(code, tmp_path, extra_path=(), **env):
  pythonpath = os.pathsep.join([str(p) for p in extra_path] + [str(REPO)])
  return _run([sys.executable, '-c', 'import _flax_optim_compat_alias\n' + code], cwd=tmp_path,
              env=_clean_env(PYTHONPATH=pythonpath, **env))


def test_flax_that_ships_its_own_optim_is_left_alone(tmp_path):
  fake = tmp_path / 'oldflax'
  (fake / 'flax' / 'optim').mkdir(parents=True)
  # optim not imported eagerly (the harder case); importing a submodule makes the finder
  # give flax its lazy `__getattr__`, which must then find this flax's own optim.
  (fake / 'flax' / '__init__.py').write_text('from . import core as core\n')
  (fake / 'flax' / 'core.py').write_text('')
  (fake / 'flax' / 'optim' / '__init__.py').write_text('OWN = True\n')
  (fake / 'flax' / 'optim' / 'adam.py').write_text('OWN_ADAM = True\n')
  out = _json_out(_run_with_hook(r'''
import json, sys
import flax
via_attr = flax.optim.OWN
from flax import optim
import flax.optim.adam
print(json.dumps({'own': optim.OWN, 'via_attr': via_attr, 'adam': flax.optim.adam.OWN_ADAM,
                  'compat_imported': 'flax_optim_compat' in sys.modules}))
''', tmp_path, extra_path=[fake]))
  assert out == {'own': True, 'via_attr': True, 'adam': True, 'compat_imported': False}


def test_finder_edge_cases(tmp_path):
  out = _json_out(_run_with_hook(r'''
import importlib, json, sys, warnings
warnings.simplefilter('ignore', DeprecationWarning)
import _flax_optim_compat_alias as hook
import flax
out = {'installed_once': sum(getattr(f, 'is_flax_optim_compat_alias', False)
                              for f in sys.meta_path)}
hook.install()  # idempotent
out['installed_after_reinstall'] = sum(getattr(f, 'is_flax_optim_compat_alias', False)
                                       for f in sys.meta_path)
out['hasattr_other'] = hasattr(flax, 'no_such_attribute')
try:
  import flax.optim.no_such_module
except ModuleNotFoundError as e:
  out['missing_submodule'] = e.name
import flax.optim
out['reload_same_object'] = importlib.reload(flax.optim) is sys.modules['flax_optim_compat']
out['spec_after_reload'] = flax.optim.__spec__.name
hook.uninstall()
out['installed_after_uninstall'] = hook.is_installed()
print(json.dumps(out))
''', tmp_path))
  assert out == {
      'installed_once': 1, 'installed_after_reinstall': 1, 'hasattr_other': False,
      'missing_submodule': 'flax.optim.no_such_module', 'reload_same_object': True,
      'spec_after_reload': 'flax_optim_compat', 'installed_after_uninstall': False}


def test_uninstalled_hook_leaves_hasattr_false(tmp_path):
  out = _json_out(_run_with_hook(r'''
import json
import flax  # gets the lazy __getattr__
import _flax_optim_compat_alias as hook
hook.uninstall()
print(json.dumps({'hasattr': hasattr(flax, 'optim')}))
''', tmp_path))
  assert out == {'hasattr': False}


def test_enabled_parses_the_environment_variable(monkeypatch):
  # A private copy of the module, loaded with the alias off so this process is not changed.
  monkeypatch.setenv('FLAX_OPTIM_COMPAT_ALIAS', '0')
  spec = importlib.util.spec_from_file_location('_alias_under_test', ALIAS_MODULE)
  module = importlib.util.module_from_spec(spec)
  before = list(sys.meta_path)
  spec.loader.exec_module(module)
  assert sys.meta_path == before
  for value in ('0', 'false', 'False', ' no ', 'OFF'):
    assert not module.enabled({'FLAX_OPTIM_COMPAT_ALIAS': value}), value
  for value in ('1', 'true', 'yes', 'on', ''):
    assert module.enabled({'FLAX_OPTIM_COMPAT_ALIAS': value}), value
  assert module.enabled({})
