"""Run a legacy script both ways: as it is on this package, and migrated on plain optax.

The *before* side runs the script unchanged in a child interpreter where `from flax import optim`
resolves to this checkout's package (the import alias, installed here by a `sitecustomize.py`
as the `.pth` file does in an installed environment). The *after* side is the script rewritten
by `flax-optim-compat migrate --write` (the command line's `main`, run in this process), run by
`tests._isolated.run_isolated`, where neither this package nor `flax.optim` can be imported: a
migrated script that still needs us fails there. Both print their trajectory (a JSON list of
floats) as the last stdout line.

Processes are reused: one `migrate` call for a whole folder, and one child interpreter per side
for a whole list of scripts (`run_programs`: each runs as `__main__` with its own globals and
`sys.argv`, its stdout captured), except scripts that configure the process before importing
jax, which get a fresh process each (`run_before` / `run_after`).
"""
import contextlib
import dataclasses
import io
import json
import os
import pathlib
import shlex
import shutil
import subprocess
import sys
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

import jax
import numpy as np
import pytest
from flax import serialization

from tests import _isolated

REPO = pathlib.Path(__file__).resolve().parents[1]
CORPUS = REPO / 'tests' / 'legacy_scripts' / 'migrate'

# The corpus: legacy-style training scripts. `args`: '{workdir}' stands for a fresh folder;
# `steps`: how many steps the run trains (its trajectory: one loss per step, then every final
# parameter); `legacy`: what the script does, in the legacy API. train_state_checkpoint.py also
# runs as the checkpoint path: trained to CHECKPOINT_STEP (saved there), resumed to RESUME_STEP.
class Script(NamedTuple):
  args: Tuple
  steps: int
  legacy: str


SCRIPTS = {
    'pmap_replicate.py': Script(
        (), 20, '`Momentum(nesterov=True)`, `jax_utils.replicate` + `pmap` + `lax.pmean`'),
    'schedule_per_step.py': Script(
        (), 25, '`Adam`, `learning_rate=learning_rate_fn(optimizer.state.step + 1)` under jit'),
    'schedule_loop_counter.py': Script(
        (), 24, '`Momentum`, `learning_rate=cosine_lr(step)` from a loop counter starting at 1'),
    'adam_weight_decay.py': Script((), 20, '`Adam(weight_decay=0.05)`'),
    'momentum_weight_decay.py': Script((), 20, '`Momentum(weight_decay=1e-2)`, def built in a helper'),
    'train_state_checkpoint.py': Script(
        ('{workdir}', 25), 25, '`Adam` in a train-state dataclass beside BatchNorm stats, '
        '`checkpoints.save_checkpoint` / `restore_checkpoint`'),
    'multi_optimizer.py': Script(
        (), 20, '`MultiOptimizer` of `Adam` and `Momentum` over two traversals, one layer in none'),
    'learning_rate_none.py': Script(
        (), 24, '`RMSProp(learning_rate=None)`, the learning rate halved every epoch on the host'),
}
CHECKPOINT_SCRIPT = 'train_state_checkpoint.py'
CHECKPOINT_STEP, RESUME_STEP = 15, 20


def corpus_args(name: str, workdir) -> List[str]:
  return [str(workdir) if a == '{workdir}' else str(a) for a in SCRIPTS[name].args]


# The report's exactness classes, strongest first.
EXACTNESS = ('bit-exact', '1e-6', 'not exact')

# '1e-6': the same formula in float32, evaluated in a different order (e.g. a schedule
# evaluated inside optax's update instead of in the caller, fused differently by XLA). Each such
# reordering costs about one ulp (float32: 6e-8 relative), and a trajectory of 20-30 steps
# compounds a few of them: 1e-6 relative is ~16 ulp. Values that pass near zero (a loss close
# to its minimum, a parameter crossing 0) have no meaningful relative error, so an absolute
# floor of 1e-7 (one ulp at magnitude 1) is added.
RTOL_1E6 = 1e-6
ATOL_1E6 = 1e-7


def legacy_env(tmp_path: pathlib.Path, **extra: str) -> Dict[str, str]:
  """Environment of a *before* child: `from flax import optim` is this checkout's package."""
  hook_dir = tmp_path / '_alias_hook'
  hook_dir.mkdir(parents=True, exist_ok=True)
  (hook_dir / 'sitecustomize.py').write_text('import _flax_optim_compat_alias\n')
  # No flax flag variable (_isolated.FLAX_FLAG_VARIABLES): the checkpoint format and init's
  # FrozenDict each side gets are its own (legacy: set by flax.optim; migrated: by the rewrite).
  env = {k: v for k, v in os.environ.items()
         if k not in ('PYTHONPATH', 'PYTHONHOME', 'PYTHONSTARTUP', 'FLAX_OPTIM_COMPAT_ALIAS',
                      *_isolated.FLAX_FLAG_VARIABLES)}
  env['PYTHONPATH'] = os.pathsep.join([str(hook_dir), str(REPO)])
  env['JAX_PLATFORMS'] = 'cpu'
  env.update(_isolated.waited_child_cache())
  env.update(extra)
  return env


def isolated_env(**extra: str) -> Dict[str, str]:
  """Extra environment of an *after* child (run_isolated drops PYTHONPATH itself)."""
  env = {'JAX_PLATFORMS': 'cpu'}
  env.update(extra)
  return env


def trajectory(stdout: str) -> np.ndarray:
  """The last stdout line, a JSON list of floats, as a float64 array."""
  lines = stdout.strip().splitlines()
  assert lines, 'the script printed nothing'
  values = json.loads(lines[-1])
  assert isinstance(values, list) and values, f'last line is not a JSON list: {lines[-1][:200]}'
  return np.asarray(values, np.float64)


def run_before(script: pathlib.Path, args: Sequence[str] = (), *, cwd: pathlib.Path,
               env: Dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess:
  """Runs a legacy script as a user does (`python script.py ARGS`) on this package."""
  proc = subprocess.run([sys.executable, str(script), *map(str, args)], cwd=cwd, env=env,
                        capture_output=True, text=True, timeout=timeout, check=False)
  assert proc.returncode == 0, (
      f'legacy {script.name} exited {proc.returncode}:\nSTDOUT:\n{proc.stdout[-2000:]}\n'
      f'STDERR:\n{proc.stderr[-4000:]}')
  return proc


def run_after(script: pathlib.Path, args: Sequence[str] = (), *, cwd: pathlib.Path,
              env: Optional[Dict[str, str]] = None,
              timeout: float = 300) -> subprocess.CompletedProcess:
  """Runs a migrated script where this package and `flax.optim` cannot be imported."""
  return _isolated.run_isolated(script.read_text(), args=[str(a) for a in args], cwd=str(cwd),
                                env=isolated_env(**(env or {})), timeout=timeout)


@dataclasses.dataclass
class Migration:
  """One `migrate --write --report` run over a folder."""
  returncode: int
  stdout: str
  stderr: str
  report: dict

  def records(self, path: pathlib.Path) -> List[dict]:
    """The report's site records of one file."""
    return [r for r in self.report['sites'] if pathlib.Path(r['path']).name == path.name]

  def optimizers(self, path: pathlib.Path) -> List[dict]:
    """The report's rewritten optimizers of one file (expression, exactness, command)."""
    return [r for r in self.report['optimizers'] if pathlib.Path(r['path']).name == path.name]

  def exactness(self, path: pathlib.Path) -> str:
    """The weakest exactness the report claims for a file (its sites and its optimizers)."""
    classes = [r['exactness'] for r in self.records(path) if r['status'] == 'rewritten']
    classes += [r['exactness'] for r in self.optimizers(path)]
    assert classes, f'the report has no rewritten site for {path.name}'
    unknown = sorted(set(classes) - set(EXACTNESS))
    assert not unknown, f'unknown exactness {unknown} in the report for {path.name}'
    return max(classes, key=EXACTNESS.index)

  def not_rewritten(self, path: pathlib.Path) -> List[str]:
    """One line per site of a file that was refused or flagged (empty when all rewritten)."""
    return [f"{r['path']}:{r['line']}: {r['code']} {r['status']}: {r['message']}"
            for r in self.records(path) if r['status'] != 'rewritten']


# A jaxnerf-shaped program in two files: utils.py's TrainState dataclass holds the optimizer,
# train.py imports it (``{import_utils}``: the import line under test) and steps it under jit.
NERF_UTILS = '''import flax
from flax import optim


@flax.struct.dataclass
class TrainState:
  optimizer: optim.Optimizer
'''

NERF_TRAIN = '''import flax
import jax
{import_utils}


def train_step(state, grad, lr):
  new_optimizer = state.optimizer.apply_gradient(grad, learning_rate=lr)
  return state.replace(optimizer=new_optimizer)


def main(params, grad):
  optimizer = flax.optim.Adam(0.1).create(params)
  state = utils.TrainState(optimizer=optimizer)
  state = jax.jit(train_step)(state, grad, 0.05)
  return state.optimizer.target
'''


def assert_nerf_migrated_whole(sources: Dict[str, str], root: pathlib.Path, train: str,
                               utils: str):
  """``sources`` (NERF_UTILS at ``root/utils``, NERF_TRAIN at ``root/train``, maybe more)
  migrated whole: every site rewritten, the dataclass field and the step rewritten."""
  from flax_optim_compat._migrate import _engine  # pylint: disable=g-import-not-at-top
  changed, report = _engine.migrate_sources(sources)
  assert {r.status for r in report.records} == {'rewritten'}, report.summary(False)
  assert 'optimizer: train_state.TrainState' in changed[str(root / utils)]
  step = changed[str(root / train)]
  assert 'return state.optimizer.params' in step and '.apply_gradients(grads=grad)' in step


def write_sources(root: pathlib.Path, files: Dict[str, str]) -> Dict[str, str]:
  """Writes ``files`` (relative path -> text) under ``root``; returns {absolute path: text},
  the sources ``migrate`` reads."""
  for name, text in files.items():
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
  return {str(root / name): text for name, text in files.items()}


def migrate_copy(sources: Sequence[pathlib.Path], dest: pathlib.Path,
                 extra_args: Sequence[str] = ()) -> Migration:
  """Copies `sources` into `dest` (a new folder) and migrates the copies in place."""
  dest.mkdir(parents=True)
  for source in sources:
    shutil.copy(source, dest / source.name)
  return migrate_folder(dest, extra_args)


def migrate_folder(folder: pathlib.Path, extra_args: Sequence[str] = ()) -> Migration:
  """Migrates a folder in place, as a user does: ``migrate FOLDER --write --report``, run from
  the folder's parent (the report names files relative to it)."""
  report = folder.parent / f'{folder.name}_report.json'
  returncode, stdout, stderr = run_command_line(
      ['migrate', str(folder), '--write', '--report', str(report), *extra_args], cwd=folder.parent)
  assert returncode in (0, 1, 2), (
      f'migrate exited {returncode}:\n{stdout[-2000:]}\n{stderr[-4000:]}')
  assert report.exists(), f'migrate wrote no report:\n{stderr[-4000:]}'
  return Migration(returncode, stdout, stderr, json.loads(report.read_text()))


def run_command_line(argv: Sequence[str], *, cwd: pathlib.Path) -> Tuple[int, str, str]:
  """``(exit status, stdout, stderr)`` of ``flax-optim-compat ARGV...`` run from ``cwd``.

  The command line's ``main`` runs in this process (``python -m flax_optim_compat`` reaching
  that ``main`` is test_cli.py's test_module_and_help): the same exit status and output as a
  child's, without a child importing jax, flax and LibCST again for each command.
  """
  from flax_optim_compat._cli import _main as cli  # pylint: disable=g-import-not-at-top
  stdout, stderr = io.StringIO(), io.StringIO()
  previous = os.getcwd()
  os.chdir(cwd)
  try:
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
      returncode = cli.main([str(a) for a in argv])
  finally:
    os.chdir(previous)
  return returncode, stdout.getvalue(), stderr.getvalue()


def migrate_examples(examples: pathlib.Path, root: pathlib.Path) -> Dict[str, Migration]:
  """Each example folder of ``examples`` (a program, ``train.py`` its entry point) copied under
  ``root`` and migrated in place there, by folder name."""
  migrated = {}
  for folder in sorted(p for p in examples.iterdir() if p.is_dir()):
    shutil.copytree(folder, root / folder.name)
    migrated[folder.name] = migrate_folder(root / folder.name)
  return migrated


def examples_fixture(examples: pathlib.Path, name: str):
  """A module fixture: ``(root, migrate_examples(examples, root))``, ``root`` a fresh folder
  named after ``name``; a test file binds it as ``examples = harness.examples_fixture(...)``."""
  @pytest.fixture(scope='module')
  def fixture(tmp_path_factory):
    pytest.importorskip('libcst')
    root = tmp_path_factory.mktemp(name)
    return root, migrate_examples(examples, root)
  return fixture


def assert_whole_and_equivalent(migration: Migration, original: pathlib.Path,
                                migrated: pathlib.Path, *, legacy_env_root: pathlib.Path,
                                env_after: Optional[Dict[str, str]] = None, runs=None):
  """An example program migrated whole (every site rewritten), then run both ways: its original
  ``train.py`` as legacy, beside this package, and the migrated one where this package cannot be
  imported; the trajectories agree within the report's weakest claim. Returns the two runs.

  ``runs``: where given, a function returning those two runs (``BothWays.runs``), made once for
  several tests, instead of running them here.
  """
  assert migration.report['exit_status'] == 1, migration.stderr
  assert not [r for r in migration.report['sites'] if r['status'] != 'rewritten'], (
      migration.stderr)
  if runs is None:
    before, after = run_example(original, migrated, legacy_cwd=legacy_env_root,
                                env_after=env_after)
  else:
    before, after = runs()
  claims = [r['exactness'] for r in migration.report['sites'] + migration.report['optimizers']]
  claim = max(claims, key=EXACTNESS.index)
  assert_equivalent(trajectory(before.stdout), trajectory(after.stdout), claim,
                    label=migrated.name)
  return before, after


def run_example(original: pathlib.Path, migrated: pathlib.Path, *, legacy_cwd: pathlib.Path,
                env_after: Optional[Dict[str, str]] = None):
  """An example program's two runs: its original ``train.py`` as legacy (from ``legacy_cwd``,
  beside this package), the migrated one where this package cannot be imported (from its own
  folder); each must exit 0."""
  before = run_before(original / 'train.py', cwd=legacy_cwd, env=legacy_env(legacy_cwd))
  after = run_after(migrated / 'train.py', cwd=migrated, env=env_after)
  return before, after


class Run(NamedTuple):
  """What a test reads of one program's run: its whole stdout."""
  stdout: str


class BothWays:
  """The example programs of ``examples`` (migrated under ``root`` by ``migrate_examples``), all
  run both ways once, when a test first asks, so several tests assert on one pair of runs: each
  side's programs one after another in ONE child (``run_programs``: each as ``__main__``, its
  folder first on ``sys.path``, from its own working directory), not a child per program and
  side (each child imports jax, flax and optax again: about 2 CPU s).

  ``runs(name)``: ``(before, after)``, the legacy program run from ``legacy_cwd(name)`` (a folder
  of its own, ``root/legacy/NAME``: what it writes there is its alone), the migrated one from its
  folder ``root/NAME``. A run that failed fails every test that asks for it, with its error.
  ``check(name)``: ``assert_whole_and_equivalent`` on those runs.
  """

  def __init__(self, examples: pathlib.Path, root: pathlib.Path,
               migrated: Dict[str, Migration], env_after: Optional[Dict[str, str]] = None):
    self._examples, self._root, self._migrated = examples, root, migrated
    self._env_after = env_after
    self._runs = {}

  def legacy_cwd(self, name: str) -> pathlib.Path:
    return self._root / 'legacy' / name

  def _run_all(self):
    names = sorted(self._migrated)
    for name in names:
      self.legacy_cwd(name).mkdir(parents=True)
    children = self._root / 'children'
    before = run_programs(
        [Program(name, self._examples / name / 'train.py', cwd=self.legacy_cwd(name))
         for name in names], children / 'before', isolated=False)
    after = run_programs(
        [Program(name, self._root / name / 'train.py', cwd=self._root / name) for name in names],
        children / 'after', isolated=True, env=self._env_after)
    for name in names:
      failed = [f'{side} {name}/train.py failed:\n{result[name]["error"]}\n'
                f'STDOUT:\n{result[name]["stdout"]}'
                for side, result in (('legacy', before), ('migrated', after))
                if not result[name]['ok']]
      self._runs[name] = (AssertionError('\n'.join(failed)) if failed else
                          (Run(before[name]['stdout']), Run(after[name]['stdout'])))

  def runs(self, name: str):
    if not self._runs:
      self._run_all()
    if isinstance(self._runs[name], AssertionError):
      raise self._runs[name]
    return self._runs[name]

  def check(self, name: str):
    return assert_whole_and_equivalent(
        self._migrated[name], self._examples / name, self._root / name,
        legacy_env_root=self.legacy_cwd(name), runs=lambda: self.runs(name))


def assert_equivalent(before: np.ndarray, after: np.ndarray, exactness: str,
                      label: str = '') -> float:
  """Asserts two trajectories agree within an exactness class; returns the max abs difference.

  'not exact' makes no numeric claim: only the shape is checked.
  """
  assert exactness in EXACTNESS, exactness
  assert before.shape == after.shape, f'{label}: trajectory lengths {before.shape} vs {after.shape}'
  assert np.all(np.isfinite(before)) and np.all(np.isfinite(after)), f'{label}: non-finite values'
  max_abs = float(np.max(np.abs(before - after)))
  if exactness == 'bit-exact':
    np.testing.assert_array_equal(after, before, err_msg=f'{label}: bit-exact claimed')
  elif exactness == '1e-6':
    np.testing.assert_allclose(after, before, rtol=RTOL_1E6, atol=ATOL_1E6,
                               err_msg=f'{label}: within 1e-6 claimed')
  return max_abs


# --- many complete programs in one child ----------------------------------------------------

@dataclasses.dataclass
class Program:
  """A complete program to run as `python PATH ARGS...` would (as `__main__`, with sys.argv,
  its own folder first on sys.path); from `cwd` when given, else from the child's folder."""
  name: str
  path: pathlib.Path
  args: Sequence[str] = ()
  cwd: Optional[pathlib.Path] = None


# Runs each program in turn in its own globals, stdout captured, an exception caught per program;
# prints {name: {'ok', 'last_line' | 'error', 'stdout'}} as its last line (all of a program's
# stdout; its last 2000 characters after an exception). As `python PATH` does, the program's
# folder is first on sys.path (its sibling modules import); the modules loaded from that folder
# are dropped after it, so the next program's same-named sibling (two examples' model.py) is
# its own. Its working directory is its 'cwd' (else the child's), restored after it.
_BATCH_RUNNER = '''
import contextlib, io, json, os, sys, traceback
programs = json.load(open(sys.argv[1]))
start = os.getcwd()
results = {}
for program in programs:
  out = io.StringIO()
  sys.argv = [program['path'], *program['args']]
  folder = os.path.dirname(os.path.abspath(program['path']))
  sys.path.insert(0, folder)
  os.chdir(program['cwd'] or start)
  try:
    with open(program['path']) as f:
      code = compile(f.read(), program['path'], 'exec')
    with contextlib.redirect_stdout(out):
      exec(code, {'__name__': '__main__', '__file__': program['path']})
    lines = out.getvalue().strip().splitlines()
    results[program['name']] = {'ok': True, 'last_line': lines[-1] if lines else '',
                                'stdout': out.getvalue()}
  except BaseException:
    results[program['name']] = {'ok': False, 'error': traceback.format_exc()[-4000:],
                                'stdout': out.getvalue()[-2000:]}
  finally:
    os.chdir(start)
    sys.path.remove(folder)
    for name, module in list(sys.modules.items()):
      where = [getattr(module, '__file__', None), *(getattr(module, '__path__', None) or ())]
      if any(w and os.path.abspath(w).startswith(folder + os.sep) for w in where):
        del sys.modules[name]
print(json.dumps(results))
'''


def run_migrated(sources: Dict[str, str], root: pathlib.Path, child: pathlib.Path,
                 env: Optional[Dict[str, str]] = None) -> Dict[str, Tuple[str, dict]]:
  """Each source (name -> legacy text) migrated on its own (``migrate_source``), written under
  ``root``, then all run in one isolated child (``run_programs`` in ``child``: one jax start-up,
  not one per snippet). Name -> (the migrated text that ran, its result)."""
  from flax_optim_compat._migrate import migrate_source  # pylint: disable=g-import-not-at-top
  programs, texts = [], {}
  for name, source in sources.items():
    texts[name] = migrate_source(source)[0]
    (root / f'{name}.py').write_text(texts[name])
    programs.append(Program(name, root / f'{name}.py'))
  results = run_programs(programs, child, isolated=True, env=env)
  return {name: (texts[name], results[name]) for name in sources}


def run_programs(programs: Sequence[Program], tmp_path: pathlib.Path, *, isolated: bool,
                 env: Optional[Dict[str, str]] = None, timeout: float = 600) -> Dict[str, dict]:
  """Runs complete programs one after another in ONE child interpreter (one start-up of jax).

  `isolated` chooses the after side's child (no flax_optim_compat, no flax.optim), otherwise
  the before side's (`from flax import optim` is this package). Each program runs as
  `__main__` with its own globals and `sys.argv`; returns, per name, {'ok': True, 'last_line',
  'stdout'} or {'ok': False, 'error'} (the traceback). Programs must not depend on running
  first: jax is imported once, so a program's XLA_FLAGS must also be in `env`.
  """
  tmp_path.mkdir(parents=True, exist_ok=True)
  listing = tmp_path / ('after_programs.json' if isolated else 'before_programs.json')
  listing.write_text(json.dumps([{'name': p.name, 'path': str(p.path), 'args': [str(a) for a in p.args],
                                  'cwd': str(p.cwd) if p.cwd else None} for p in programs]))
  if isolated:
    proc = _isolated.run_isolated(_BATCH_RUNNER, args=[str(listing)], cwd=str(tmp_path),
                                  env=isolated_env(**(env or {})), timeout=timeout)
  else:
    proc = subprocess.run([sys.executable, '-c', _BATCH_RUNNER, str(listing)], cwd=tmp_path,
                          env=legacy_env(tmp_path, **(env or {})), capture_output=True, text=True,
                          timeout=timeout, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
  return json.loads(proc.stdout.strip().splitlines()[-1])


def result_trajectory(results: Dict[str, dict], name: str) -> np.ndarray:
  """The trajectory of one program of `run_programs`, or its traceback as the failure."""
  result = results[name]
  assert result['ok'], f'{name} failed:\n{result["error"]}\nstdout:\n{result["stdout"]}'
  return trajectory(result['last_line'])


# For a child that runs a pmap script among others (jax reads XLA_FLAGS once, at import).
EIGHT_DEVICES = {'XLA_FLAGS': '--xla_force_host_platform_device_count=8'}


# --- the corpus, one side at a time ---------------------------------------------------------

MLP_SCRIPT = REPO / 'tests' / 'legacy_scripts' / 'train_mlp_legacy.py'
MLP_STEPS = 25   # its three phases: jit [0, 10), pmap + pmean [10, 20), replicate() [20, 25)
# Run in a fresh process of their own: pmap_replicate.py sets XLA_FLAGS itself before it
# imports jax, which a shared child (jax already imported) would not test.
STANDALONE = ('pmap_replicate.py',)


def all_scripts() -> List[pathlib.Path]:
  """The corpus and the package's own legacy script, train_mlp_legacy.py."""
  return [CORPUS / name for name in SCRIPTS] + [MLP_SCRIPT]


def script_args(path: pathlib.Path, workdir) -> List[str]:
  if path.name == MLP_SCRIPT.name:
    return [str(workdir), str(MLP_STEPS)]
  return corpus_args(path.name, workdir)


def mlp_trajectory(workdir: pathlib.Path, params_key: str) -> np.ndarray:
  """train_mlp_legacy.py prints no trajectory: its losses (metrics.json) and final params."""
  losses = json.loads((workdir / 'metrics.json').read_text())
  state = serialization.msgpack_restore((workdir / f'checkpoint_{MLP_STEPS}').read_bytes())
  leaves = [np.ravel(np.asarray(leaf)) for leaf in jax.tree_util.tree_leaves(state[params_key])]
  return np.concatenate([[losses[str(i)] for i in range(MLP_STEPS)], *leaves]).astype(np.float64)


def run_corpus(scripts: Sequence[pathlib.Path], root: pathlib.Path, *,
               isolated: bool) -> Dict[str, object]:
  """Runs every script of one side; returns name -> trajectory, or name -> error text.

  One child for all, except STANDALONE scripts (one fresh process each).
  """
  params_key = 'params' if isolated else 'target'   # TrainState / legacy Optimizer
  batch = [Program(p.name, p, script_args(p, root / 'work' / p.stem))
           for p in scripts if p.name not in STANDALONE]
  results = run_programs(batch, root, isolated=isolated, env=EIGHT_DEVICES)
  out = {}
  for program in batch:
    result = results[program.name]
    if not result['ok']:
      out[program.name] = f'{program.name} failed:\n{result["error"]}'
    elif program.name == MLP_SCRIPT.name:
      out[program.name] = mlp_trajectory(root / 'work' / program.path.stem, params_key)
    else:
      out[program.name] = trajectory(result['last_line'])
  for path in scripts:
    if path.name in STANDALONE:
      try:
        # Without the suite's own XLA_FLAGS: the script must set them itself.
        if isolated:
          proc = run_after(path, script_args(path, root / 'work'), cwd=root,
                                   env={'XLA_FLAGS': ''})
        else:
          proc = run_before(path, script_args(path, root / 'work'), cwd=root,
                                    env=legacy_env(root, XLA_FLAGS=''))
        out[path.name] = trajectory(proc.stdout)
      except AssertionError as e:
        out[path.name] = str(e)
  return out


# --- the checkpoint path --------------------------------------------------------------------

def convert_command(migration: Migration, script: pathlib.Path) -> List[str]:
  """The report's convert command for the script's one optimizer, as an argv."""
  optimizers = migration.optimizers(script)
  assert len(optimizers) == 1, optimizers
  argv = shlex.split(optimizers[0]['command'])
  assert argv[:2] == ['flax-optim-compat', 'convert'], argv
  # The optimizer is a field of the script's train-state dataclass, saved with its siblings.
  assert '--keep-layout' in argv, argv
  assert argv.count('<IN>') == 1 and argv.count('<OUT>') == 1, argv
  return argv


def resume_both_ways(migration: Migration, migrated_script: pathlib.Path,
                     root: pathlib.Path) -> Tuple[np.ndarray, np.ndarray]:
  """CHECKPOINT_SCRIPT's checkpoint, resumed by legacy and, converted, by the migrated script.

  Legacy trains to CHECKPOINT_STEP (its checkpoint is saved there), then a copy of its folder
  resumes to RESUME_STEP. The checkpoint is converted with the report's command, only `<IN>` and
  `<OUT>` filled in (this checkout's command line, `run_command_line`), into a new folder
  that the migrated script (isolated) resumes from, to RESUME_STEP. Returns both trajectories.
  """
  script = CORPUS / CHECKPOINT_SCRIPT
  legacy_dir, legacy_resume_dir, new_dir = root / 'legacy', root / 'legacy_resume', root / 'new'
  root.mkdir(parents=True)
  env = legacy_env(root)
  run_before(script, [legacy_dir, CHECKPOINT_STEP], cwd=root, env=env)
  checkpoint = legacy_dir / f'checkpoint_{CHECKPOINT_STEP}'
  assert checkpoint.is_file(), sorted(legacy_dir.iterdir())
  shutil.copytree(legacy_dir, legacy_resume_dir)
  legacy = run_before(script, [legacy_resume_dir, RESUME_STEP], cwd=root, env=env)
  assert f'starting at step {CHECKPOINT_STEP}' in legacy.stdout, legacy.stdout

  new_dir.mkdir()
  argv = [str(checkpoint) if a == '<IN>' else str(new_dir / checkpoint.name) if a == '<OUT>'
          else a for a in convert_command(migration, script)]
  returncode, stdout, stderr = run_command_line(argv[1:], cwd=root)
  assert returncode == 0, f'{shlex.join(argv)}\n{stdout}\n{stderr}'

  migrated = run_after(migrated_script, [new_dir, RESUME_STEP], cwd=root)
  assert f'starting at step {CHECKPOINT_STEP}' in migrated.stdout, migrated.stdout
  return trajectory(legacy.stdout), trajectory(migrated.stdout)
