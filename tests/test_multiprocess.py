"""Several processes, one training run: the legacy API on ``jax.distributed`` (multi-host).

tests/legacy_scripts/multiprocess_worker.py is started once per process on 127.0.0.1; the
processes join with ``jax.distributed.initialize`` (gloo CPU collectives) and together own 8
simulated CPU devices (2 processes x 4; and 4 x 2). One pair of processes runs every scenario
in turn and writes its results per process; the tests here compare them with the legacy
oracle's single-process 8-device runs (tests/fixtures/pmap, generated in the oracle venv), with
each other, and with the checkpoint files on disk:

* ``jax_utils.replicate`` + ``pmap`` + ``lax.pmean`` over all 8 devices of both processes;
  ``if jax.process_index() == 0: checkpoints.save_checkpoint(dir, unreplicate(optimizer))``,
  then a restore on every process and training on; the same checkpoint written with orbax by
  every process;
* ``optimizer.replicate()`` (ReplicatedOptimizer): the same, saving the replicated optimizer
  itself (its state dict is one copy);
* ``jax.jit`` on a mesh whose 'model' axis crosses the processes, the state sharded like the
  params; orbax checkpoint written and restored shard by shard; the msgpack idiom after a
  ``process_allgather``;
* ``DynamicScale.value_and_grad(axis_name=...)`` under that pmap;
* a process that dies, or never connects, makes the others exit with a named error instead of
  hanging (``jax.distributed`` timeouts of a few seconds; every process is waited for with a
  deadline, and killed and reaped whatever happens).
"""
import contextlib
import importlib.metadata
import inspect
import json
import os
import pathlib
import socket
import subprocess
import sys
import time

import jax
import numpy as np
import pytest
from flax import serialization

from tests import _utils
from tests import pmap_specs
from tests import test_import_alias

REPO = pathlib.Path(__file__).resolve().parents[1]
WORKER = REPO / 'tests' / 'legacy_scripts' / 'multiprocess_worker.py'
# The worker's scenarios (keep in sync with its PMEAN_CASES, REPLICATED_CASES, MESH_CASES).
PMEAN_CASES = ['Momentum', 'MultiOptimizer']
REPLICATED_CASES = ['Adam']
MESH_CASES = ['Adam']
STEPS, STEPS_AFTER = pmap_specs.STEPS, pmap_specs.STEPS_AFTER
STEP_KEYS = ['created'] + [str(i) for i in range(STEPS + STEPS_AFTER)]
# Generous bounds for a loaded 2-core machine: a hang fails the test at these, never passes.
TRAIN_TIMEOUT_S = 300
FAILURE_TIMEOUT_S = 120
# jax.distributed timeouts of the failure runs: a join that must fail fast, a join all processes
# of a loaded machine make, and the silence after which a process counts as dead.
SHORT_JOIN_TIMEOUT_S = 4
JOIN_TIMEOUT_S = 120
HEARTBEAT_TIMEOUT_S = 4
# jax >= 0.7 lets the worker set it (and then names the silent task); older jax: its default.
HEARTBEAT_TIMEOUT_SETTABLE = 'heartbeat_timeout_seconds' in inspect.signature(
    jax.distributed.initialize).parameters
if not HEARTBEAT_TIMEOUT_SETTABLE:  # its default counts a process dead after about 100 s
  FAILURE_TIMEOUT_S = 240

pytestmark = pytest.mark.skipif(sys.platform != 'linux',
                                reason='CPU collectives across processes: gloo on Linux')

# jaxlib before GLOO_FIXED_JAXLIB (seen on 0.5.1, 0.5.3, 0.6.0, 0.6.1) aborts in about half the
# runs here, inside a gloo all-gather of the two-process run's mesh scenario: `terminate called
# after throwing an instance of 'gloo::EnforceNotMet' ... op.preamble.length <= op.nbytes`
# (signal 6). The two-process run is skipped there; 0.6.2 and later passed every run.
GLOO_FIXED_JAXLIB = (0, 6, 2)
JAXLIB_VERSION = tuple(
    int(p) for p in importlib.metadata.version('jaxlib').split('.')[:3] if p.isdigit())
needs_gloo_fix = pytest.mark.skipif(
    JAXLIB_VERSION < GLOO_FIXED_JAXLIB,
    reason=f'jaxlib {".".join(map(str, JAXLIB_VERSION))} < '
           f'{".".join(map(str, GLOO_FIXED_JAXLIB))}: its gloo CPU collectives abort at random '
           '(gloo::EnforceNotMet: op.preamble.length <= op.nbytes, signal 6)')


def _free_port():
  with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
    s.bind(('127.0.0.1', 0))
    return s.getsockname()[1]


def _env(workdir, devices_per_process):
  env = test_import_alias._clean_env()  # pylint: disable=protected-access
  flags = [f for f in env.get('XLA_FLAGS', '').split()
           if not f.startswith('--xla_force_host_platform_device_count')]
  env['XLA_FLAGS'] = ' '.join(flags + [
      f'--xla_force_host_platform_device_count={devices_per_process}'])
  env['JAX_PLATFORMS'] = 'cpu'
  env['PYTHONUNBUFFERED'] = '1'
  path = [str(REPO)]  # the worker imports tests.pmap_specs
  if not test_import_alias._installed_here():  # pylint: disable=protected-access
    hook_dir = workdir / 'site_hook'  # stands in for the installed .pth (`from flax import optim`)
    hook_dir.mkdir(exist_ok=True)
    (hook_dir / 'sitecustomize.py').write_text('import _flax_optim_compat_alias\n')
    path.insert(0, str(hook_dir))
  env['PYTHONPATH'] = os.pathsep.join(path)
  return env


class Cluster:
  """The worker processes of one run, started at once; leaving the ``with`` kills and reaps them.

  Process i runs ``modes[i]``; ``num_processes`` (default: one per mode) is how many the
  workers are told to wait for.
  """

  def __init__(self, workdir, modes, *, devices_per_process, timeouts_s=(), num_processes=None):
    self.workdir = pathlib.Path(workdir)
    self.procs, self._logs = [], []
    port = _free_port()
    env = _env(self.workdir, devices_per_process)
    self.started = time.monotonic()
    try:
      for i, mode in enumerate(modes):
        args = [sys.executable, str(WORKER), str(self.workdir), str(i),
                str(num_processes or len(modes)), str(port), mode]
        args += [str(t) for t in timeouts_s]  # the worker's JOIN_ and HEARTBEAT_TIMEOUT_S
        self._logs.append(open(self.workdir / f'process_{i}.log', 'w'))  # no pipe to fill up
        self.procs.append(subprocess.Popen(args, cwd=self.workdir, env=env,
                                           stdout=self._logs[-1], stderr=subprocess.STDOUT))
    except BaseException:
      self.close()
      raise

  def wait(self, timeout_s):
    """Exit codes (``None``: still running ``timeout_s`` after the start) and logs."""
    deadline = self.started + timeout_s
    codes = []
    for proc in self.procs:
      try:
        codes.append(proc.wait(timeout=max(0.1, deadline - time.monotonic())))
      except subprocess.TimeoutExpired:
        codes.append(None)
    self.close()
    return codes, [(self.workdir / f'process_{i}.log').read_text()
                   for i in range(len(self.procs))]

  def close(self):
    for proc in self.procs:
      if proc.poll() is None:
        proc.kill()
    for proc in self.procs:
      proc.wait(timeout=60)
    for log in self._logs:
      log.close()

  def __enter__(self):
    return self

  def __exit__(self, *exc_info):
    self.close()


def _report(codes, logs):
  return '\n'.join(
      f'--- process {i}: ' + ('still running at the deadline, killed' if code is None
                             else f'exit code {code}') + f'\n{log[-6000:]}'
      for i, (code, log) in enumerate(zip(codes, logs)))


def _train(workdir, n_processes, mode='train'):
  with Cluster(workdir, [mode] * n_processes, devices_per_process=8 // n_processes) as cluster:
    codes, logs = cluster.wait(TRAIN_TIMEOUT_S)
  assert codes == [0] * n_processes, _report(codes, logs)
  results, seconds = [], []
  for i in range(n_processes):
    results.append(serialization.msgpack_restore(
        (workdir / f'process_{i}.msgpack').read_bytes()))
    seconds.append(json.loads((workdir / f'process_{i}.done').read_text()))
  return results, seconds


@pytest.fixture(scope='module')
def two_processes(tmp_path_factory):
  """Both processes' results of every scenario (one pair of processes for the whole file)."""
  workdir = tmp_path_factory.mktemp('two_processes')
  results, seconds = _train(workdir, 2)
  return workdir, results, seconds


_assert_close = _utils.assert_trees_close_as
_legacy = _utils.pmap_fixture


def _assert_processes_agree(results, select, what):
  """Every process computed bitwise the same values (they hold copies of one state)."""
  for i, result in enumerate(results[1:], 1):
    _assert_close(select(result), select(results[0]), f'{what}: process {i} vs process 0', rtol=0)


def _checkpoint_file(directory):
  """The one legacy msgpack checkpoint file in ``directory``, as a state dict."""
  names = sorted(os.listdir(directory))
  assert names == [f'checkpoint_{STEPS}'], f'{directory}: {names}'
  return serialization.msgpack_restore((pathlib.Path(directory) / names[0]).read_bytes())


# ----------------------------------------------------------------------------- the runs


@needs_gloo_fix
def test_two_processes_join_and_share_eight_devices(two_processes):
  _, results, seconds = two_processes
  for i, result in enumerate(results):
    assert {k: int(v) for k, v in result['process'].items()} == {
        'index': i, 'count': 2, 'local_devices': 4, 'devices': 8}
  # Every scenario the tests below read ran (the lists here match the worker's).
  expected = (['start-up'] + [f'pmean/{n}' for n in PMEAN_CASES]
              + [f'replicated/{n}' for n in REPLICATED_CASES] + [f'mesh/{n}' for n in MESH_CASES]
              + ['dynamic_scale', 'cross_process_restore'])
  for i, timings in enumerate(seconds):
    assert list(timings) == expected, f'process {i} ran {list(timings)}'
  print('seconds (wall, CPU) per scenario, per process:', seconds)


@needs_gloo_fix
@pytest.mark.parametrize('name', PMEAN_CASES)
def test_pmean_route_across_processes_matches_legacy(two_processes, name):
  """``jax_utils.replicate`` + ``pmap`` + ``pmean`` over 2 x 4 devices = legacy on 8 devices."""
  _, results, _ = two_processes
  legacy = _legacy(name)['pmean']
  for p, result in enumerate(results):
    ours = result['pmean'][name]
    for step in STEP_KEYS:
      differ = pmap_specs.replicas_differ(ours[step])
      assert not differ, f'{name} process {p} step {step}: device copies differ at {differ}'
      assert np.shape(ours[step]['state']['step']) == (4,)  # this process's 4 devices
      _assert_close(pmap_specs.first_replica(ours[step]), legacy[step],
                    f'{name} process {p} step {step} vs legacy')
  _assert_processes_agree(results, lambda r: r['pmean'][name], name)


@needs_gloo_fix
@pytest.mark.parametrize('name', PMEAN_CASES)
def test_pmean_route_checkpoint_by_process_0_restored_everywhere(two_processes, name):
  """Process 0 writes the legacy msgpack file; every process restores it and trains on."""
  workdir, results, _ = two_processes
  saved = _checkpoint_file(workdir / 'ckpt' / 'pmean' / name / 'msgpack')
  _assert_close(saved, serialization.msgpack_restore(_legacy(name)['pmean']['checkpoint']),
                f'{name} checkpoint file vs legacy checkpoint')
  before = pmap_specs.first_replica(results[0]['pmean'][name][str(STEPS - 1)])
  _assert_close(saved, before, f'{name} checkpoint file vs state saved', rtol=0)
  for p, result in enumerate(results):
    ours = result['pmean'][name]
    _assert_close(ours['restored'], before, f'{name} process {p} restored (msgpack)', rtol=0)
    _assert_close(ours['restored_orbax'], before, f'{name} process {p} restored (orbax)', rtol=0)
  # Steps after the restore were checked against legacy above; the orbax checkpoint is a
  # directory written by both processes.
  assert (workdir / 'ckpt' / 'pmean' / name / 'orbax' / f'checkpoint_{STEPS}').is_dir()


@needs_gloo_fix
@pytest.mark.parametrize('name', REPLICATED_CASES)
def test_replicated_optimizer_across_processes_matches_legacy(two_processes, name):
  """``optimizer.replicate()`` over 2 x 4 devices: legacy's numbers, one-copy checkpoint."""
  workdir, results, _ = two_processes
  legacy = _legacy(name)['replicated']
  for p, result in enumerate(results):
    ours = result['replicated'][name]
    for step in STEP_KEYS + ['restored']:
      _assert_close(ours[step], legacy[step], f'{name} process {p} {step} vs legacy')
    _assert_close(ours['restored'], ours[str(STEPS - 1)], f'{name} process {p} restored', rtol=0)
    _assert_close(ours['restored_orbax'], ours['restored'],
                  f'{name} process {p} restored (orbax)', rtol=0)
    for key in ('restored_local_copies', 'restored_orbax_local_copies'):
      copies = ours[key]
      assert not pmap_specs.replicas_differ(copies), f'{name} process {p} {key}'
      assert np.shape(copies['hidden']['kernel']) == (4, 3, 4)  # on this process's devices
      _assert_close(pmap_specs.first_replica(copies), ours['restored']['target'],
                    f'{name} process {p} {key}', rtol=0)
    _assert_close(ours['unreplicated'], ours[str(STEPS + STEPS_AFTER - 1)],
                  f'{name} process {p} unreplicate()', rtol=0)
  saved = _checkpoint_file(workdir / 'ckpt' / 'replicated' / name / 'msgpack')
  _assert_close(saved, serialization.msgpack_restore(legacy['checkpoint']),
                f'{name} checkpoint file vs legacy checkpoint')
  _assert_processes_agree(results, lambda r: r['replicated'][name], name)


@needs_gloo_fix
@pytest.mark.parametrize('name', MESH_CASES)
def test_jit_on_a_mesh_across_processes_matches_legacy_and_checkpoints(two_processes, name):
  """``jax.jit`` on a ('data', 'model') mesh whose 'model' axis spans both processes."""
  workdir, results, _ = two_processes
  legacy = _legacy(name)['single']
  for p, result in enumerate(results):
    ours = result['mesh'][name]
    # Each process holds half of every 'model'-sharded parameter: (3, 4) as 4 x (3, 2).
    assert not ours['kernel_fully_addressable']
    np.testing.assert_array_equal(ours['kernel_local_shard_shapes'], [[3, 2]] * 4)
    for step in STEP_KEYS:
      _assert_close(ours[step], legacy[step], f'{name} process {p} step {step} vs legacy')
    before = ours[str(STEPS - 1)]
    _assert_close(ours['orbax_restored'], before, f'{name} process {p} orbax restore', rtol=0)
    assert ours['orbax_restored_sharding_kept'], f'{name} process {p}: restored resharded'
    _assert_close(ours['msgpack_restored'], before, f'{name} process {p} msgpack restore',
                  rtol=0)
    # Writing a cross-process array from one process cannot work; jax says what to do.
    assert 'non-addressable' in ours['msgpack_sharded_error'], ours['msgpack_sharded_error']
    assert 'process_allgather' in ours['msgpack_sharded_error']
  saved = _checkpoint_file(workdir / 'ckpt' / 'mesh' / name / 'msgpack')
  _assert_close(saved, results[0]['mesh'][name][str(STEPS - 1)], f'{name} msgpack file', rtol=0)
  assert (workdir / 'ckpt' / 'mesh' / name / 'orbax' / f'checkpoint_{STEPS}').is_dir()
  _assert_processes_agree(results, lambda r: {
      k: v for k, v in r['mesh'][name].items() if k != 'msgpack_sharded_error'}, name)


@needs_gloo_fix
def test_dynamic_scale_under_pmap_across_processes(two_processes):
  """Device d's loss is ``p * (d + 1)``: the grad is the mean over all 8 devices."""
  _, results, _ = two_processes
  for p, result in enumerate(results):
    ds = result['dynamic_scale']
    np.testing.assert_array_equal(ds['aux'], np.arange(4 * p, 4 * p + 4) + 1.0)
    np.testing.assert_array_equal(ds['grad'], [4.5] * 4)  # mean(1..8), unscaled
    np.testing.assert_array_equal(ds['finite'], [True] * 4)
    np.testing.assert_array_equal(ds['scale'], [2.0] * 4)
    # One non-finite device (global device 5, on process 1): every device of every process
    # sees a non-finite step and halves the scale (backoff_factor 0.5).
    np.testing.assert_array_equal(ds['bad_finite'], [False] * 4)
    np.testing.assert_array_equal(ds['bad_scale'], [1.0] * 4)


# ReplicatedOptimizer.restore_state replicates the state dict onto this process's devices: a
# cross-process array is first replaced by this process's copy (fully replicated) or refused.
@needs_gloo_fix
def test_replicated_restore_takes_fully_replicated_cross_process_arrays(two_processes):
  """E.g. the state dict of a mesh-trained optimizer whose state is replicated on the mesh."""
  _, results, _ = two_processes
  target = pmap_specs.make_case('Momentum')['target']
  for p, result in enumerate(results):
    outcome = result['cross_process_restore']['replicated_arrays']
    assert outcome['error'] == '', f'process {p}: {outcome["error"]}'
    assert not pmap_specs.replicas_differ(outcome['target'])
    _assert_close(pmap_specs.first_replica(outcome['target']), target, f'process {p}', rtol=0)


@needs_gloo_fix
def test_replicated_restore_refuses_sharded_cross_process_arrays_naming_the_leaf(two_processes):
  _, results, _ = two_processes
  for p, result in enumerate(results):
    error = result['cross_process_restore']['sharded_arrays']['error']
    assert error.startswith('ValueError: ') and '/target/out/kernel' in error, (
        f'process {p}: {error}')
    assert 'process_allgather' in error, f'process {p}: {error}'


def test_four_processes_pmean_route_and_checkpoint(tmp_path):
  """4 processes x 2 devices: legacy's 8-device numbers, checkpoint restored by all four."""
  results, _ = _train(tmp_path, 4, 'train:pmean/Momentum')
  legacy = _legacy('Momentum')['pmean']
  for p, result in enumerate(results):
    assert {k: int(v) for k, v in result['process'].items()} == {
        'index': p, 'count': 4, 'local_devices': 2, 'devices': 8}
    ours = result['pmean']['Momentum']
    for step in STEP_KEYS:
      assert not pmap_specs.replicas_differ(ours[step]), f'process {p} step {step}'
      _assert_close(pmap_specs.first_replica(ours[step]), legacy[step],
                    f'Momentum process {p} step {step} vs legacy')
    before = pmap_specs.first_replica(ours[str(STEPS - 1)])
    _assert_close(ours['restored'], before, f'process {p} restored (msgpack)', rtol=0)
    _assert_close(ours['restored_orbax'], before, f'process {p} restored (orbax)', rtol=0)
  _assert_processes_agree(results, lambda r: r['pmean']['Momentum'], '4 processes')


# ----------------------------------------------------------------------------- failures


# (modes, processes the workers wait for, join timeout) of each failure run.
FAILURES = {'never_connects': (['train'], 2, SHORT_JOIN_TIMEOUT_S),
            'worker_dies': (['survive', 'die'], 2, JOIN_TIMEOUT_S),
            'coordinator_dies': (['die', 'survive'], 2, JOIN_TIMEOUT_S)}


@pytest.fixture(scope='module')
def failures(tmp_path_factory):
  """Exit codes and logs of the failure runs, started together (they mostly wait)."""
  with contextlib.ExitStack() as stack:
    clusters = {
        name: stack.enter_context(Cluster(
            tmp_path_factory.mktemp(name), modes, devices_per_process=4, num_processes=n,
            timeouts_s=(join, HEARTBEAT_TIMEOUT_S)))
        for name, (modes, n, join) in FAILURES.items()}
    return {name: cluster.wait(FAILURE_TIMEOUT_S) for name, cluster in clusters.items()}


# A lone process's failed join ends when jax's runtime decides: jax < 0.7 cannot shorten the
# heartbeat, and on jaxlib 0.5.1 the same run (its worker imports nothing of this package before
# jax.distributed.initialize) was seen aborting after 7 s, after 104 s, and once still waiting in
# the C++ client.connect() after 240 s. Newer jax names the missing task within the timeouts set.
@pytest.mark.skipif(not HEARTBEAT_TIMEOUT_SETTABLE,
                    reason='jax < 0.7: a failed join may wait on in client.connect()')
def test_a_process_that_never_connects_fails_the_others(failures):
  """Process 0 of 2 starts alone: the join times out with a named error, no hang."""
  (code,), (log,) = failures['never_connects']
  assert code is not None, 'process 0 still waited for the missing process:\n' + log
  assert code != 0, log
  assert 'DEADLINE_EXCEEDED' in log and 'RegisterTask' in log, log
  assert ' done in ' not in log, log  # no scenario ran


@pytest.mark.parametrize('dead', [1, 0], ids=['worker_dies', 'coordinator_dies'])
def test_a_process_that_dies_fails_the_others(failures, dead):
  """One process exits after joining; the other, waiting in a collective, exits too."""
  codes, logs = failures['worker_dies' if dead else 'coordinator_dies']
  alive = 1 - dead
  assert codes[dead] == 17, _report(codes, logs)
  assert codes[alive] is not None, 'the survivor hung:\n' + _report(codes, logs)
  assert codes[alive] != 0, _report(codes, logs)
  assert 'Terminating process because the JAX distributed service detected fatal errors' in (
      logs[alive]), _report(codes, logs)
  if dead == 0:
    assert 'leader task was preempted/died' in logs[alive], logs[alive]
  elif HEARTBEAT_TIMEOUT_SETTABLE:  # the coordinator names the task that went silent
    assert 'tasks are unhealthy (stopped sending heartbeats):\n1\n' in logs[alive], logs[alive]
  else:  # older jax names it by its task path
    assert 'stopped sending heartbeats' in logs[alive] and 'task:1' in logs[alive], logs[alive]
