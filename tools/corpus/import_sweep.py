#!/usr/bin/env python3
"""Imports each corpus program's own modules on today's jax and attributes every failure.

For every program of a corpus tree (rows of ``programs.tsv``, materialized by ``materialize.py``)
a fresh interpreter (``--python``, one subprocess per program, ``--timeout`` seconds) imports the
program's entry points (files with a ``__main__`` guard) in sorted order, each as its launcher
would name it, then every other module of the program not yet imported. Nothing else is
imported first: the program's own ``import`` lines decide the order in which jax, flax and
``flax.optim`` load, with the real jax / flax / numpy of that interpreter. Tests (``*_test.py``,
``test_*.py``, ``conftest.py``, ``tests/``) are not imported. Importing a module runs its top
level only; ``if __name__ == '__main__'`` blocks (training) do not run. ``setup.py`` and
``docs/`` are not program modules either.

Only data and logging libraries are replaced, by permissive stand-ins (``STAND_INS``); every
other module is the installed one (the interpreter's, then the ``--site`` folders') or missing.
Each failure is attributed (``attribute``):

  ours      a jax / flax / numpy / optax name (or behaviour) of the era that is missing or
            refused today, reached from the program's own code (the name is recorded):
            something the package could give back
  library   a third-party module that is not installed, or its API (a removed jax name used
            inside an installed library is that library's)
  harness   the sweep's own limit: timeout, a module of the program outside the row's
            directories, a stand-in used beyond what it fakes, data files / flags needed at
            import, a file that does not parse (absl flag errors are retried alone first)

    python tools/corpus/import_sweep.py CORPUS --python /path/to/venv/bin/python \\
        [--site LIBS] [--legacy-jax 0|1|auto] [--programs REGEX] [--kinds linen,none,subclass|all] \\
        [--jobs N] [--out results/FILE.md] [--tsv programs.tsv] [--raw-out F.json]
    python tools/corpus/import_sweep.py - --rerender F.json --out FILE.md   # attribute again

Stdlib only (plus ``scan.py`` next to it). The child side is the string ``CHILD``, run by
``--python -c``.
"""
import argparse
import ast
import collections
import concurrent.futures
import csv
import datetime
import gzip
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
  sys.path.insert(0, HERE)
import scan  # noqa: E402  (resolves import aliases on a failing line)

# Stand-ins: data and logging libraries only, faked so that a program's import reaches its
# model and optimizer code. Everything a program calls on them at import returns another
# stand-in; a decorator stand-in returns the function it decorates.
STAND_INS = {
    # top-level module: why it is stood in
    'tensorflow': 'data input pipelines (tf.data), TF summaries',
    'tensorflow_datasets': 'data sets',
    'tensorflow_text': 'data: tokenizers of input pipelines',
    'tensorflow_io': 'data: file formats',
    'tensorflow_hub': 'data: pretrained input encoders downloaded at run time',
    'tensorboard': 'logging (summaries)',
    'tensorboardX': 'logging (summaries)',
    'wandb': 'logging (experiment tracking)',
    'clu': 'logging (metric_writers, periodic_actions, parameter_overview) and data (deterministic_data)',
    'seqio': 'data: task registry and input pipelines',
    'tqdm': 'logging: progress bars',
    'matplotlib': 'logging: plots',
    'PIL': 'data: image files',
    'cv2': 'data: image and video files',
    'imageio': 'data: image files',
    'skimage': 'data: image files and metrics on them',
    'pandas': 'data: tables',
    'h5py': 'data: HDF5 files',
    'torch': 'data: PyTorch DataLoader / torchvision data sets used as input pipelines',
    'torchvision': 'data: image data sets and transforms',
    'gym': 'data: RL environments (the source of observations)',
    'dm_control': 'data: RL environments',
    'd4rl': 'data: offline RL data sets',
    'atari_py': 'data: RL environments',
    'mujoco_py': 'data: RL environments',
    'sentencepiece': 'data: tokenizer of input pipelines',
    'gdown': 'data: downloads of data sets',
    'dmc2gym': 'data: RL environments',
    'envpool': 'data: RL environments',
    'procgen': 'data: RL environments',
    'mediapy': 'data: image and video files',
    'png': 'data: image files',
    'sunds': 'data: scene understanding data sets',
    'requests': 'data: downloads',
    'xarray': 'data: labelled arrays read from files',
    'IPython': 'logging: notebook display',
    'tensorflow_addons': 'data: TF image ops of input pipelines',
    'tensorflow_gan': 'logging: sample-quality metrics (FID / Inception score) computed in TF',
    'ipywidgets': 'logging: notebook widgets',
    'regex': 'data: text tokenizers of input pipelines',
}
# Not stood in (the program needs them for its computation, or they are pip-installable
# configuration): ml_collections, gin, absl, chex, haiku, distrax, rlax, tensorflow_probability,
# scipy, einops, transformers, t5x, ... A missing one is a `library` failure; `--site DIR` adds
# a folder of such libraries (installed with `pip install --target DIR --no-deps`, so that they
# bring no jax / flax / numpy of their own; sweep-libs.txt lists the ones used for the results).

# Module roots whose removed names the package can give back (its era: flax 0.5.3).
OURS = ('jax', 'jaxlib', 'flax', 'numpy', 'optax', 'flax_optim_compat', '_flax_optim_compat_alias')

_STDLIB = set(getattr(sys, 'stdlib_module_names', ()))
SKIP_FILE = re.compile(r'(^|/)(test_[^/]*|[^/]*_test|conftest|setup)\.py$|(^|/)(tests?|docs?)/')
MAIN_GUARD = re.compile(r'''__name__\s*==\s*['"]__main__['"]''')


# --- program layout -----------------------------------------------------------------------
def read_tsv(path):
  with open(path, newline='') as f:
    return list(csv.DictReader(f, delimiter='\t'))


def program_files(root, row):
  """(repository folder, [row directories], sorted .py files of the row, tests excluded)."""
  folder = os.path.join(os.path.abspath(root), row['id'].split('/')[0])
  dirs = [folder if d == '.' else os.path.join(folder, d) for d in row['directory'].split(',')]
  files = set()
  for base in dirs:
    for dirpath, _, names in os.walk(base):
      for n in names:
        p = os.path.join(dirpath, n)
        if n.endswith('.py') and not SKIP_FILE.search(os.path.relpath(p, folder)):
          files.add(p)
  return folder, dirs, sorted(files)


def module_name(path, folder, imported=()):
  """(import root, dotted module name).

  A file under a top-level folder that the program imports as a package (`from jax_rl.agents
  import ...`, also a namespace package without __init__.py) is named from the repository
  folder; otherwise the root is the first folder up without __init__.py. `imported`: the
  dotted names the program imports absolutely.
  """
  top = os.path.relpath(path, folder).split(os.sep)[0]
  if top != os.path.basename(path) and any(i == top or i.startswith(top + '.') for i in imported):
    d = folder
  else:
    d = os.path.dirname(path)
    while d != folder and os.path.exists(os.path.join(d, '__init__.py')):
      d = os.path.dirname(d)
  rel = os.path.relpath(path, d)[:-3].split(os.sep)
  if rel[-1] == '__init__':
    rel = rel[:-1]
  return d, '.'.join(rel)


_ABS_IMPORT = re.compile(r'^\s*(?:from\s+(\w[\w.]*)\s+import|import\s+(\w[\w.]*))', re.M)


def imported_names(files):
  """Dotted names the files import absolutely (`from a.b import c` gives a.b)."""
  names = set()
  for p in files:
    with open(p, 'rb') as f:
      for a, b in _ABS_IMPORT.findall(f.read().decode('utf-8', 'replace')):
        names.add(a or b)
  return names


def is_entry(path):
  with open(path, 'rb') as f:
    return bool(MAIN_GUARD.search(f.read().decode('utf-8', 'replace')))


def plan(root, row):
  """The child's job for one program: sys.path, entry modules, other modules.

  sys.path: every folder of the program from which its files import a sibling by its bare
  name (a script's folder is sys.path[0] when it runs as `python script.py`), then the import
  roots of its modules, then the repository folder. A folder is not added for a name of jax /
  flax / numpy / optax or of the standard library (a program's own `optax.py` inside a package
  would shadow optax).
  """
  folder, _, files = program_files(root, row)
  imported = imported_names(files)
  wanted = {_top(t) for t in imported if _top(t) not in OURS and _top(t) not in _STDLIB}
  script_dirs, roots, entries, others = [], [], [], []
  for d in sorted({os.path.dirname(p) for p in files}, key=lambda d: (d.count(os.sep), d)):
    if any(os.path.exists(os.path.join(d, t + '.py')) or os.path.isdir(os.path.join(d, t))
           for t in wanted):
      script_dirs.append(d)
  for p in files:
    r, name = module_name(p, folder, imported)
    if not name or not all(part.isidentifier() for part in name.split('.')):
      continue
    if r not in roots:
      roots.append(r)
    (entries if is_entry(p) else others).append((name, p))
  paths = []
  for d in script_dirs + roots + [folder]:
    if d not in paths:
      paths.append(d)
  tops = {n.split('.')[0] for n, _ in entries + others}
  tops |= {_top(t) for t in imported if os.path.exists(os.path.join(folder, _top(t)))
           or os.path.exists(os.path.join(folder, _top(t) + '.py'))}
  return {'cwd': folder, 'sys_path': paths, 'entries': entries, 'others': others,
          'program_tops': sorted(tops)}


# absl's flag errors at import: flags defined twice, or required / parsed at import time,
# which depends on the command line of one launcher (an entry point failing so is retried alone)
FLAG_ERRORS = ('DuplicateFlagError', 'IllegalFlagValueError', 'UnrecognizedFlagError',
               'UnparsedFlagAccessError', 'FlagsError', 'ValidationError')


# --- attribution (pure) -------------------------------------------------------------------
_MOD_ATTR = re.compile(r"module '([\w.]+)' has no attribute '(\w+)'")
_CANNOT = re.compile(r"cannot import name '(\w+)' from '([\w.]+)'")
_NP_REMOVED = re.compile(r"`np\.(\w+)` was (?:removed|a deprecated alias)")
_JAX_REMOVED = re.compile(r"((?:jax|flax)(?:\.\w+)+) (?:was|has been|is) (?:removed|deprecated)")
_SITE = re.compile(r'[/\\](?:site|dist)-packages[/\\]([\w.]+?)(?:[/\\]|\.py)')


def _top(name):
  return name.split('.')[0]


def frame_owner(path, program_dir=None, sites=()):
  """'program' | 'stand-in' | 'machinery' | ('ours' | 'lib', package) for one traceback file."""
  path = path or ''
  if program_dir and path.startswith(program_dir.rstrip('/') + '/'):
    return 'program'
  if path == '<string>':
    return 'stand-in'  # the child's own code: the stand-ins (its outer frame is dropped)
  if path.startswith('<frozen'):
    return 'machinery'
  pkg = None
  m = _SITE.search(path)
  if m:
    pkg = _top(m.group(1))
  for site in sites:
    if path.startswith(site.rstrip('/') + '/'):
      pkg = _top(os.path.relpath(path, site).split(os.sep)[0].replace('.py', ''))
  if pkg is None:
    return 'machinery'  # the standard library
  return ('ours' if pkg in OURS else 'lib', pkg)


def _culprit(frames, program_dir, sites):
  """Owner of the innermost frame that is neither jax/flax/numpy nor import machinery."""
  for f in reversed(frames[1:]):  # frames[0] is the child's own import call
    owner = frame_owner(f[0], program_dir, sites)
    if owner == 'machinery' or (isinstance(owner, tuple) and owner[0] == 'ours'):
      continue
    return owner
  return 'program'


_OBJ_ATTR = re.compile(r"(?:'\w+' object|type object '\w+') has no attribute '(\w+)'")


def name_on_line(path, lineno, attr):
  """The dotted jax/flax/... name ending in .attr on that line of a file, aliases resolved."""
  try:
    with open(path, 'rb') as f:
      tree = ast.parse(f.read())
  except (OSError, SyntaxError, ValueError):
    return None
  fs = scan.FileScan()
  fs.visit(tree)
  for node in ast.walk(tree):
    if (isinstance(node, ast.Attribute) and node.attr == attr
        and node.lineno <= lineno <= getattr(node, 'end_lineno', node.lineno)):
      dotted = fs.resolve(node)
      if dotted:
        return dotted
  return None


def _era_name(failure, program_tops):
  """The jax / flax / numpy / optax name a failure says is missing, or None."""
  exc, msg = failure.get('exc_type', ''), failure.get('msg', '') or ''
  first = msg.splitlines()[0] if msg else ''
  missing = failure.get('missing')
  m = _CANNOT.search(msg)  # ImportError.name is then the module imported from
  if m:
    return f'{m.group(2)}.{m.group(1)}' if _top(m.group(2)) in OURS else None
  if exc in ('ModuleNotFoundError', 'ImportError') and missing:
    return missing if _top(missing) in OURS else None
  if exc == 'ImportError' and first.startswith('flax.nn'):
    return 'flax.nn'  # the package's one-line refusal of pre-Linen flax.nn
  m = _MOD_ATTR.search(msg)
  if m:
    return f'{m.group(1)}.{m.group(2)}' if _top(m.group(1)) in OURS else None
  m = _NP_REMOVED.search(msg)
  if m:
    return 'numpy.' + m.group(1)
  m = _JAX_REMOVED.search(msg)
  if m and exc == 'AttributeError' and _top(m.group(1)) not in program_tops:
    return m.group(1)
  m = _OBJ_ATTR.search(first)
  if m and exc == 'AttributeError' and len(failure.get('frames') or []) > 1:
    f = failure['frames'][-1]  # the line that made the access (jax's Config, a dataclass...)
    dotted = name_on_line(f[0], f[1], m.group(1))
    if dotted and _top(dotted) in OURS:
      return dotted
  return None


def attribute(failure, program_tops=(), program_dir=None, sites=()):
  """(category, name, detail) for one failed import.

  failure: {'exc_type', 'msg', 'missing' (ImportError.name or None),
  'frames': [[file, line, function], ...] outermost first}. The code that made the failing
  access decides between `ours` and `library`: a removed jax name used by the program is ours,
  the same name used inside an installed library is that library's API.
  """
  exc, msg = failure.get('exc_type', ''), failure.get('msg', '') or ''
  first = msg.splitlines()[0][:200] if msg else ''
  frames = failure.get('frames') or []
  if exc == 'Timeout':
    return 'harness', 'timeout', first
  if exc == 'ChildExit':
    return 'harness', 'interpreter exit', first
  if exc in FLAG_ERRORS:
    return 'harness', 'absl flags: ' + exc, first
  missing = failure.get('missing')
  if missing and program_dir and '.' in missing and os.path.exists(
      os.path.join(program_dir, *missing.split('.')[1:])):
    # a program that lives in a library's own repository (jax's examples: `jax.examples`)
    return 'harness', missing, 'module of the program under the library\'s name: ' + first
  culprit = _culprit(frames, program_dir, sites)
  lib = culprit[1] if isinstance(culprit, tuple) else None
  name = _era_name(failure, program_tops)
  if name is not None:
    if lib:
      return 'library', lib, f'uses {name}, gone today: {first}'
    if culprit == 'stand-in':
      return 'harness', 'stand-in', first
    return 'ours', name, first
  missing = failure.get('missing')
  m = _CANNOT.search(msg)
  if exc in ('ModuleNotFoundError', 'ImportError') and missing and not m:
    if _top(missing) in program_tops:
      return 'harness', missing, 'module of the program outside the row: ' + first
    return 'library', lib or _top(missing), first
  if m:
    mod = m.group(2)
    if _top(mod) in STAND_INS:
      return 'harness', f'{mod}.{m.group(1)}', 'stand-in: ' + first
    if _top(mod) in program_tops:
      return 'harness', f'{mod}.{m.group(1)}', 'program module: ' + first
    return 'library', _top(mod), first
  if culprit == 'stand-in' or 'StandIn' in msg or "'stand_in." in msg:
    # a stand-in object in the message: by its class name, or by its qualified class
    # (`<class 'stand_in.torchvision.datasets.CIFAR10().data.dtype'>` handed to jnp)
    return 'harness', 'stand-in', first
  m = _MOD_ATTR.search(msg)
  if m and _top(m.group(1)) not in program_tops:
    if _top(m.group(1)) in STAND_INS:
      return 'harness', 'stand-in', first
    return 'library', lib or _top(m.group(1)), first
  if exc == 'OverflowError' and 'out of bounds for' in msg:
    # numpy 2 refuses a Python int outside the dtype's range (NEP 50); numpy 1 wrapped it
    return 'ours', 'numpy 2: Python int out of bounds for the dtype', first
  if exc == 'ValueError' and msg.startswith('mutable default') and 'use default_factory' in msg:
    # Python 3.11's dataclasses refuse a default whose class is unhashable (a jax array as a
    # linen field's default); Python <= 3.10 refused only list, dict and set
    return 'ours', 'python 3.11: an array as a dataclass field default', first
  if exc in ('SyntaxError', 'IndentationError', 'TabError'):
    return 'harness', exc, 'a file of the program that does not parse: ' + first
  if lib:
    return ('harness', 'stand-in', first) if lib in STAND_INS else ('library', lib, first)
  if exc in ('FileNotFoundError', 'PermissionError') and 'No such file' in msg + first:
    # a data file the program reads at import (through numpy's loaders too)
    return 'harness', exc, 'the program needs data / arguments / environment at import: ' + first
  if any('jax2tf' in f[0] for f in frames) and 'tensorflow' in STAND_INS:
    # jax.experimental.jax2tf registers TensorFlow's container types at its import, which the
    # tensorflow stand-in cannot give it (tfx's penguin, planestrike's export)
    return 'harness', 'stand-in', 'jax2tf needs the real tensorflow: ' + first
  m = re.match(r'Unknown backend (\S+)', msg)
  if exc == 'RuntimeError' and m:
    # a backend plugin this machine lacks (iree-training's `jax.devices('iree')`)
    return 'library', f'jax backend {m.group(1).rstrip(".")}', first
  # raised by the program's own code, or inside jax / flax called by it
  for f in reversed(frames[1:]):
    owner = frame_owner(f[0], program_dir, sites)
    if owner == 'program':
      break
    if isinstance(owner, tuple) and owner[0] == 'ours':
      return 'ours', f'{exc} in {owner[1]}', first
  if exc in ('FileNotFoundError', 'OSError', 'PermissionError', 'SystemExit', 'KeyError',
             'IndexError'):
    return 'harness', exc, 'the program needs data / arguments / environment at import: ' + first
  return 'harness', exc, 'raised by the program at import: ' + first


# --- child ----------------------------------------------------------------------------------
CHILD = r'''
import importlib, importlib.abc, importlib.machinery, json, os, sys, traceback, types, warnings
job = json.loads(sys.argv[-1])
warnings.simplefilter('ignore')
STAND = set(job['stand_ins'])

class _StandInMeta(type):
  def __getattr__(cls, name):
    if name.startswith('__') and name.endswith('__'):
      raise AttributeError(name)
    return _stand_in(cls.__qualname__ + '.' + name)
  def __call__(cls, *a, **k):
    if len(a) == 1 and not k and callable(a[0]) and not isinstance(a[0], _StandInMeta):
      return a[0]  # decorator: keep the function
    return _stand_in(cls.__qualname__ + '()')
  def __getitem__(cls, key):
    return _stand_in(cls.__qualname__ + '[]')
  def __iter__(cls):
    return iter(())
  def __len__(cls):
    return 0
  def __bool__(cls):
    return True
  def __or__(cls, other):
    return cls
  __ror__ = __or__
  def __mro_entries__(cls, bases):
    return (cls,)

def _stand_in(qualname):
  return _StandInMeta('StandIn', (), {'__qualname__': qualname, '__module__': 'stand_in'})

class _StandInModule(types.ModuleType):
  def __getattr__(self, name):
    if name.startswith('__') and name.endswith('__'):
      raise AttributeError(name)
    full = self.__name__ + '.' + name
    if full in sys.modules:
      return sys.modules[full]
    return _stand_in(full)

class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
  def find_spec(self, name, path=None, target=None):
    if name.split('.')[0] in STAND:
      return importlib.machinery.ModuleSpec(name, self, is_package=True)
    return None
  def create_module(self, spec):
    m = _StandInModule(spec.name)
    m.__path__ = []
    return m
  def exec_module(self, module):
    pass

sys.meta_path.insert(0, _Finder())
here = os.path.dirname(os.path.abspath(__file__)) if '__file__' in globals() else None
sys.path[:] = (job['sys_path'] + [p for p in sys.path if p not in ('', here) and p != os.getcwd()]
               + job['sites'])
os.chdir(job['cwd'])
sys.argv = [job['entries'][0][1] if job['entries'] else 'program']

def emit(rec):
  sys.__stdout__.write('@@SWEEP ' + json.dumps(rec) + '\n')
  sys.__stdout__.flush()

def run(name, path, role):
  emit({'start': name})
  if name in sys.modules:
    emit({'module': name, 'file': path, 'role': role, 'ok': True, 'already': True})
    return
  before = set(sys.modules)
  try:
    importlib.import_module(name)
    emit({'module': name, 'file': path, 'role': role, 'ok': True})
  except BaseException as e:  # noqa: BLE001 - every failure is recorded
    if isinstance(e, KeyboardInterrupt):
      raise
    for m in set(sys.modules) - before:  # the program's half-imported packages start afresh
      if m.split('.')[0] in job['program_tops']:
        del sys.modules[m]
    tb = traceback.extract_tb(e.__traceback__)
    emit({'module': name, 'file': path, 'role': role, 'ok': False,
          'exc_type': type(e).__name__, 'msg': str(e)[:2000],
          'missing': getattr(e, 'name', None) if isinstance(e, ImportError) else None,
          'frames': [[f.filename, f.lineno, f.name] for f in (tb if len(tb) <= 16 else tb[:1] + tb[-15:])]})

for name, path in job['entries']:
  run(name, path, 'entry')
for name, path in job['others']:
  run(name, path, 'module')
emit({'done': True})
'''


def run_child(python, job, env, timeout):
  """[module records] for one job; a hung module gets a Timeout record."""
  t0 = time.time()
  proc = subprocess.Popen([python, '-c', CHILD, json.dumps(job)], stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=env,
                          cwd=job['cwd'], text=True, start_new_session=True)
  try:
    out, _ = proc.communicate(timeout=timeout)
    timed_out = False
  except subprocess.TimeoutExpired:
    os.killpg(proc.pid, 9)
    out, _ = proc.communicate()
    timed_out = True
  recs, started, done = [], None, False
  for line in out.splitlines():
    if not line.startswith('@@SWEEP '):
      continue
    rec = json.loads(line[len('@@SWEEP '):])
    if 'start' in rec:
      started = rec['start']
    elif rec.get('done'):
      done = True
    else:
      recs.append(rec)
      started = None
  if not done:
    names = dict(job['entries'] + job['others'])
    exc, msg = ('Timeout', f'no answer within {timeout} s') if timed_out else (
        'ChildExit', f'the interpreter exited with status {proc.returncode}')
    if started is not None:
      recs.append({'module': started, 'file': names.get(started), 'role': '?', 'ok': False,
                   'exc_type': exc, 'msg': msg, 'frames': []})
  return recs, time.time() - t0


def sweep_program(root, row, python, env, timeout, sites=()):
  job = plan(root, row)
  job['stand_ins'] = sorted(STAND_INS)
  job['sites'] = list(sites)
  recs, secs = run_child(python, job, env, timeout) if job['entries'] or job['others'] else ([], 0.0)
  # two entry points (or a module imported under two names) sharing absl flags: retry alone
  for i, r in enumerate(recs):
    if not r['ok'] and r.get('exc_type') in FLAG_ERRORS:
      alone = dict(job, entries=[(r['module'], r['file'])], others=[])
      again, more = run_child(python, alone, env, timeout)
      secs += more
      mine = [a for a in again if a['module'] == r['module']]
      if mine:
        recs[i] = dict(mine[0], retried_alone=True)
  folder = job['cwd']
  failures = []
  for r in recs:
    if not r['ok']:
      cat, name, detail = attribute(r, job['program_tops'], folder, sites)
      failures.append({'module': r['module'], 'category': cat, 'name': name, 'detail': detail})
  n_mod = len(job['entries']) + len(job['others'])
  ok_mods = sum(1 for r in recs if r['ok'])
  ok_entries = sum(1 for r in recs if r['ok'] and r.get('role') == 'entry')
  return {'id': row['id'], 'kind': row.get('kind', '?'), 'modules': n_mod, 'modules_ok': ok_mods,
          'records': recs, 'program_tops': job['program_tops'], 'cwd': folder, 'sites': list(sites),
          'entries': len(job['entries']), 'entries_ok': ok_entries,
          'ok': n_mod > 0 and ok_mods == n_mod and not failures, 'failures': failures,
          'seconds': round(secs, 1)}


# --- report ------------------------------------------------------------------------------
def categories(result):
  return sorted({f['category'] for f in result['failures']})


def summarize(results):
  """Counts: programs OK / failed, failed programs per category, names per category."""
  s = {'programs': len(results), 'ok': sum(r['ok'] for r in results)}
  s['failed'] = s['programs'] - s['ok']
  per_cat = collections.Counter()
  only = collections.Counter()
  names = {c: collections.defaultdict(set) for c in ('ours', 'library', 'harness')}
  for r in results:
    cats = categories(r)
    for c in cats:
      per_cat[c] += 1
    if len(cats) == 1:
      only[cats[0]] += 1
    for f in r['failures']:
      names[f['category']][f['name']].add(r['id'])
  s['with'] = dict(per_cat)
  s['only'] = dict(only)
  s['names'] = {c: sorted(((n, len(p)) for n, p in d.items()), key=lambda x: (-x[1], x[0]))
                for c, d in names.items()}
  return s


def render_md(results, meta):
  s = summarize(results)
  out = ['# Import sweep', '']
  for k, v in meta.items():
    out.append(f'- {k}: {v}')
  out += ['', '## Summary', '',
          f'{s["programs"]} programs: {s["ok"]} import whole, {s["failed"]} fail.', '',
          '| failures attributed to | programs with one | programs with only these |',
          '| --- | ---: | ---: |']
  for c in ('ours', 'library', 'harness'):
    out.append(f'| {c} | {s["with"].get(c, 0)} | {s["only"].get(c, 0)} |')
  by_kind = collections.defaultdict(lambda: [0, 0])
  for r in results:
    by_kind[r['kind']][0] += 1
    by_kind[r['kind']][1] += r['ok']
  out += ['', '| kind | programs | import whole |', '| --- | ---: | ---: |']
  for k in sorted(by_kind):
    out.append(f'| {k} | {by_kind[k][0]} | {by_kind[k][1]} |')
  for c in ('ours', 'library', 'harness'):
    if s['names'][c]:
      out += ['', f'### {c}: names (programs)', '', '| name | programs |', '| --- | ---: |']
      out += [f'| `{n}` | {k} |' for n, k in s['names'][c]]
  out += ['', '## Programs', '',
          '| program | kind | result | modules ok | entry points ok | ours | library | harness | s |',
          '| --- | --- | --- | ---: | ---: | --- | --- | --- | ---: |']
  for r in results:
    cell = {c: ', '.join(sorted({f'`{f["name"]}`' for f in r['failures'] if f['category'] == c}))
            for c in ('ours', 'library', 'harness')}
    out.append(f'| {r["id"]} | {r["kind"]} | {"ok" if r["ok"] else "failed"} | '
               f'{r["modules_ok"]}/{r["modules"]} | {r["entries_ok"]}/{r["entries"]} | '
               f'{cell["ours"]} | {cell["library"]} | {cell["harness"]} | {r["seconds"]} |')
  out += ['', '## Failures', '', '| program | module | category | name | first line |',
          '| --- | --- | --- | --- | --- |']
  for r in results:
    for f in r['failures']:
      detail = f['detail'].replace('|', '\\|').replace('\n', ' ')[:160]
      out.append(f'| {r["id"]} | `{f["module"]}` | {f["category"]} | `{f["name"]}` | {detail} |')
  return '\n'.join(out) + '\n'


def render_tsv(results):
  lines = ['program\tkind\tresult\tmodules_ok\tmodules\tentries_ok\tentries\tours\tlibrary\tharness']
  for r in results:
    cell = {c: ' '.join(sorted({f['name'] for f in r['failures'] if f['category'] == c})) or '-'
            for c in ('ours', 'library', 'harness')}
    lines.append('\t'.join(map(str, [r['id'], r['kind'], 'ok' if r['ok'] else 'failed',
                                     r['modules_ok'], r['modules'], r['entries_ok'], r['entries'],
                                     cell['ours'], cell['library'], cell['harness']])))
  return '\n'.join(lines) + '\n'


def interpreter_meta(python, env):
  code = ('import importlib.metadata as m, json, os\n'
          'v = {}\n'
          'for p in ("jax", "jaxlib", "flax", "numpy", "optax", "flax_optim_compat"):\n'
          '  try: v[p] = m.version(p)\n'
          '  except Exception: v[p] = None\n'
          'try:\n'
          '  import importlib.util as u; s = u.find_spec("flax_optim_compat")\n'
          '  v["where"] = os.path.dirname(os.path.dirname(s.origin)) if s else None\n'
          'except Exception: v["where"] = None\n'
          'print(json.dumps(v))')
  try:
    # from '/', as the programs' children (their cwd is not on sys.path): a checkout in the
    # current folder must not stand for the installed package
    out = subprocess.run([python, '-c', code], capture_output=True, text=True, env=env,
                         timeout=120, cwd='/').stdout
    v = json.loads(out.strip().splitlines()[-1])
  except Exception:  # noqa: BLE001 - metadata only
    return {}
  commit = None
  if v.get('where'):
    r = subprocess.run(['git', '-C', v['where'], 'rev-parse', '--short', 'HEAD'],
                       capture_output=True, text=True)
    commit = r.stdout.strip() or None
    if commit and subprocess.run(['git', '-C', v['where'], 'status', '--porcelain', '--',
                                  'flax_optim_compat', '_flax_optim_compat_alias.py'],
                                 capture_output=True, text=True).stdout.strip():
      commit += ' (with uncommitted changes)'
  v['commit'] = commit
  return v


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  ap.add_argument('corpus', help='a corpus tree written by materialize.py')
  ap.add_argument('--tsv', default=os.path.join(HERE, 'programs.tsv'),
                  help='the rows naming the programs (default: programs.tsv next to this file)')
  ap.add_argument('--programs', default=None, help='regular expression: only program ids matching it')
  ap.add_argument('--kinds', default='linen,none,subclass',
                  help="comma-separated kinds to sweep, or 'all' (flax.nn programs are refused as a whole)")
  ap.add_argument('--python', default=sys.executable,
                  help='the interpreter whose jax / flax / flax_optim_compat is measured')
  ap.add_argument('--legacy-jax', choices=('0', '1', 'auto'), default='auto',
                  help='FLAX_OPTIM_COMPAT_LEGACY_JAX for the programs (auto: left unset)')
  ap.add_argument('--site', action='append', default=[],
                  help='a folder of extra libraries (pip install --target DIR --no-deps), after the interpreter\'s own')
  ap.add_argument('--timeout', type=float, default=180.0, help='seconds per program')
  ap.add_argument('--jobs', type=int, default=1)
  ap.add_argument('--out', help='write the markdown report here (default: stdout)')
  ap.add_argument('--tsv-out', help='also write the per-program table as TSV here')
  ap.add_argument('--raw-out', help='also write every import record (JSON, gzipped if .gz), for --rerender')
  ap.add_argument('--rerender', help='attribute and render the records of a --raw-out file again')
  args = ap.parse_args(argv)
  if args.rerender:
    with (gzip.open if args.rerender.endswith('.gz') else open)(args.rerender, 'rt') as f:
      raw = json.load(f)
    results = [reattribute(r) for r in raw['results']]
    meta = dict(raw['meta'], attributed='again by ' + os.path.basename(__file__))
    return _write(args, results, meta, raw)

  rows = read_tsv(args.tsv)
  if args.kinds != 'all':
    kinds = set(args.kinds.split(','))
    rows = [r for r in rows if r.get('kind') in kinds]
  if args.programs:
    rows = [r for r in rows if re.search(args.programs, r['id'])]
  env = dict(os.environ)
  env.pop('FLAX_OPTIM_COMPAT_LEGACY_JAX', None)
  if args.legacy_jax != 'auto':
    env['FLAX_OPTIM_COMPAT_LEGACY_JAX'] = args.legacy_jax
  env.pop('PYTHONPATH', None)
  env.setdefault('JAX_PLATFORMS', 'cpu')
  env['PYTHONDONTWRITEBYTECODE'] = '1'

  t0 = time.time()
  results = [None] * len(rows)
  with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as ex:
    sites = [os.path.abspath(d) for d in args.site]
    futs = {ex.submit(sweep_program, args.corpus, r, args.python, env, args.timeout, sites): i
            for i, r in enumerate(rows)}
    for fut in concurrent.futures.as_completed(futs):
      i = futs[fut]
      results[i] = fut.result()
      r = results[i]
      print(f'{r["id"]}\t{"ok" if r["ok"] else "failed"}\t{r["modules_ok"]}/{r["modules"]}\t'
            + ' '.join(sorted({f'{f["category"]}:{f["name"]}' for f in r['failures']})),
            file=sys.stderr, flush=True)
  v = interpreter_meta(args.python, env)
  meta = {
      'date': datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC'),
      'package measured': f'flax_optim_compat {v.get("flax_optim_compat")} at commit '
                          f'{v.get("commit")} ({v.get("where")})',
      'versions': ', '.join(f'{k} {v.get(k)}' for k in ('jax', 'jaxlib', 'flax', 'numpy', 'optax')),
      'FLAX_OPTIM_COMPAT_LEGACY_JAX': args.legacy_jax if args.legacy_jax != 'auto' else 'unset (auto)',
      'programs': f'{os.path.basename(args.tsv)}, kinds {args.kinds}'
                  + (f', ids matching {args.programs!r}' if args.programs else ''),
      'command': 'python tools/corpus/import_sweep.py ' + ' '.join(sys.argv[1:] if argv is None else argv),
      'extra libraries (--site)': ', '.join(args.site) or 'none',
      'wall time': f'{time.time() - t0:.0f} s',
  }
  return _write(args, results, meta, {'meta': meta, 'results': results})


def reattribute(r):
  """A result with its failures attributed again from its records."""
  failures = []
  dropped = [rec for rec in r['records'] if rec.get('file') and SKIP_FILE.search(
      os.path.relpath(rec['file'], r['cwd']))]  # files skipped since the records were made
  r = dict(r, records=[rec for rec in r['records'] if rec not in dropped])
  r['modules'] -= len(dropped)
  r['modules_ok'] -= sum(1 for rec in dropped if rec['ok'])
  r['entries'] -= sum(1 for rec in dropped if rec.get('role') == 'entry')
  r['entries_ok'] -= sum(1 for rec in dropped if rec['ok'] and rec.get('role') == 'entry')
  for rec in r['records']:
    if not rec['ok']:
      cat, name, detail = attribute(rec, r['program_tops'], r['cwd'], r['sites'])
      failures.append({'module': rec['module'], 'category': cat, 'name': name, 'detail': detail})
  return dict(r, failures=failures, ok=r['modules'] > 0 and r['modules_ok'] == r['modules']
              and not failures)


def _write(args, results, meta, raw):
  md = render_md(results, meta)
  if args.raw_out:
    with (gzip.open if args.raw_out.endswith('.gz') else open)(args.raw_out, 'wt') as f:
      json.dump(raw, f)
  if args.out:
    with open(args.out, 'w') as f:
      f.write(md)
  else:
    sys.stdout.write(md)
  if args.tsv_out:
    with open(args.tsv_out, 'w') as f:
      f.write(render_tsv(results))
  s = summarize(results)
  print(f'{s["programs"]} programs: {s["ok"]} ok, {s["failed"]} failed; with ours '
        f'{s["with"].get("ours", 0)}, library {s["with"].get("library", 0)}, harness '
        f'{s["with"].get("harness", 0)}', file=sys.stderr)
  return 0


if __name__ == '__main__':
  sys.exit(main())
