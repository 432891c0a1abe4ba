"""One process of a multi-process data-parallel run, written in the flax.optim idiom.

tests/test_multiprocess.py starts N copies of this script on 127.0.0.1 (one per process, each
with its own simulated CPU devices); they join with ``jax.distributed.initialize`` and train
together the way legacy pod/multi-host code did: ``from flax import optim``,
``jax_utils.replicate`` + ``jax.pmap`` over every device of every process, ``lax.pmean``,
``optimizer.replicate()``, and ``if jax.process_index() == 0: checkpoints.save_checkpoint(...)``
followed by a restore on every process. It also trains with ``jax.jit`` on a ``Mesh`` spanning
all processes (state sharded like the params) and checkpoints that with orbax.

Usage: python multiprocess_worker.py OUTDIR PROCESS_ID NUM_PROCESSES PORT MODE
         [JOIN_TIMEOUT_S [HEARTBEAT_TIMEOUT_S]]

MODE:
  train      every scenario in turn; writes OUTDIR/process_<id>.msgpack (results as state dicts
             of numpy arrays) and OUTDIR/process_<id>.done (wall and CPU seconds of the start-up
             and of each scenario, as JSON).
  train:A,B  only the scenarios named (keys as in the .done file, e.g. pmean/Momentum).
  die        joins, then this process exits at once with status 17 (a crashed host).
  survive    joins, then waits in a cross-process collective for a host that never arrives.
JOIN_TIMEOUT_S bounds ``jax.distributed.initialize`` (default 120 s: the processes of a loaded
machine start at different times); HEARTBEAT_TIMEOUT_S is how long a silent process is waited
for before the others are stopped (default 30 s).

The problem is that of tests/pmap_specs.py and the optimizers are its cases (catalogue.PMAP),
whose legacy goldens the test compares with; the batch of 16 examples is split over the 8
global devices, and each process feeds the slices of its own devices, as a multi-host input
pipeline does.
"""
import inspect
import json
import os
import sys
import time
import warnings

START = time.perf_counter(), time.process_time()

import jax  # after START: the import is part of the start-up time reported

OUTDIR, PROCESS_ID, NUM_PROCESSES, PORT, MODE = sys.argv[1:6]
PROCESS_ID, NUM_PROCESSES = int(PROCESS_ID), int(NUM_PROCESSES)
JOIN_TIMEOUT_S = int(sys.argv[6]) if len(sys.argv) > 6 else 120
HEARTBEAT_TIMEOUT_S = int(sys.argv[7]) if len(sys.argv) > 7 else 30

# Cross-process collectives on CPU: gloo (jax's default today, named so that a jax without it
# fails on this line instead of later inside the first collective).
jax.config.update('jax_cpu_collectives_implementation', 'gloo')
print(f'process {PROCESS_ID} of {NUM_PROCESSES}: joining 127.0.0.1:{PORT} '
      f'(join timeout {JOIN_TIMEOUT_S} s, heartbeat timeout {HEARTBEAT_TIMEOUT_S} s)',
      flush=True)
# jax < 0.7 has no heartbeat / shutdown timeouts to set (its own defaults apply).
TIMEOUTS = {name: HEARTBEAT_TIMEOUT_S for name in ('heartbeat_timeout_seconds',
                                                   'shutdown_timeout_seconds')
            if name in inspect.signature(jax.distributed.initialize).parameters}
jax.distributed.initialize(coordinator_address=f'127.0.0.1:{PORT}', num_processes=NUM_PROCESSES,
                           process_id=PROCESS_ID, initialization_timeout=JOIN_TIMEOUT_S,
                           **TIMEOUTS)

import jax.numpy as jnp
import numpy as np
from flax import config as flax_config
from flax import jax_utils
from flax import optim
from flax import serialization
from flax.training import checkpoints
from flax.optim import dynamic_scale as dynamic_scale_lib
from jax.experimental import multihost_utils
from jax.sharding import Mesh
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from tests import catalogue
from tests import pmap_specs

# The optimizers trained on each route (cases of catalogue.PMAP; each one costs compiles).
PMEAN_CASES = ['Momentum', 'MultiOptimizer']
REPLICATED_CASES = ['Adam']
MESH_CASES = ['Adam']
# Megatron-style params over a ('data', 'model') mesh; tests/test_mesh.py does the same on one
# process. Here the 'model' axis pairs devices of different processes, so every parameter and
# its state are split across processes.
PARAM_SPECS = {'hidden': {'kernel': P(None, 'model'), 'bias': P('model')},
               'out': {'kernel': P('model', None), 'bias': P()}}
STEPS, STEPS_AFTER = pmap_specs.STEPS, pmap_specs.STEPS_AFTER

warnings.filterwarnings('ignore', category=optim.FlaxOptimDeprecationWarning)
warnings.filterwarnings('ignore', message='`flax.traverse_util.Traversal` will be deprecated')
warnings.filterwarnings('ignore', message='Flax Checkpointing will soon be deprecated')


def local_batch(batch):
  """This process's devices' slices of the global batch: ``(local devices, 16 / 8, ...)``."""
  n_local = jax.local_device_count()
  sharded = pmap_specs.shard(batch, jax.device_count())
  first = jax.process_index() * n_local
  return {k: v[first:first + n_local] for k, v in sharded.items()}


def overrides(case, i):
  lrs = case.get('learning_rates')
  return {} if lrs is None else {'learning_rate': lrs[str(i)]}


def create(case, target=None):
  spec = case['optimizer']
  focus = {'focus': catalogue.build_traversal(spec['focus'])} if 'focus' in spec else {}
  target = case['target'] if target is None else target
  return catalogue.build_def(optim, spec).create(
      jax.tree_util.tree_map(jnp.asarray, target), **focus)


def host(tree):
  return jax.tree_util.tree_map(np.asarray, tree)


def barrier(name):
  multihost_utils.sync_global_devices(name)


def train_step_pmean(optimizer, batch, hyper_params):
  grad = jax.grad(lambda p: pmap_specs.loss_fn(jax, p, batch))(optimizer.target)
  grad = jax.lax.pmean(grad, axis_name='batch')
  return optimizer.apply_gradient(grad, **hyper_params)


def train_step_replicated(optimizer, batch, hyper_params):
  # optimizer.replicate() averages the gradients itself (ReplicatedOptimizer).
  grad = jax.grad(lambda p: pmap_specs.loss_fn(jax, p, batch))(optimizer.target)
  return optimizer.apply_gradient(grad, **hyper_params)


p_train_step_pmean = jax.pmap(train_step_pmean, axis_name='batch', in_axes=(0, 0, None))
p_train_step_replicated = jax.pmap(train_step_replicated, axis_name='batch',
                                   in_axes=(0, 0, None))


# ----------------------------------------------------------------------------- pmap routes


def save_both(workdir, optimizer, single_copy):
  """Process 0 writes the legacy msgpack file; every process takes part in the orbax save.

  Orbax writes one checkpoint together (process 0 calling it alone would wait for the others
  forever) and refuses the process-local arrays ``pmap`` returns: it gets host copies, which it
  takes as replicated and process 0 writes.
  """
  flax_config.update('flax_use_orbax_checkpointing', False)
  if jax.process_index() == 0:
    checkpoints.save_checkpoint(os.path.join(workdir, 'msgpack'), optimizer, STEPS)
  flax_config.update('flax_use_orbax_checkpointing', True)
  checkpoints.save_checkpoint_multiprocess(os.path.join(workdir, 'orbax'),
                                           jax.device_get(single_copy), STEPS)
  barrier(f'saved {workdir}')


def run_pmean(case, workdir):
  """``jax_utils.replicate`` + ``pmean``; process 0 saves the unreplicated copy, all restore."""
  out = {}
  optimizer = jax_utils.replicate(create(case))
  out['created'] = host(serialization.to_state_dict(optimizer))
  for i in range(STEPS):
    optimizer = p_train_step_pmean(optimizer, local_batch(case['batches'][str(i)]),
                                   overrides(case, i))
    out[str(i)] = host(serialization.to_state_dict(optimizer))
  single_copy = jax_utils.unreplicate(optimizer)
  save_both(workdir, single_copy, single_copy)
  template = create(case, jax.tree_util.tree_map(np.zeros_like, case['target']))
  restored = checkpoints.restore_checkpoint(os.path.join(workdir, 'msgpack'), template)
  out['restored'] = host(serialization.to_state_dict(restored))
  restored_orbax = checkpoints.restore_checkpoint(os.path.join(workdir, 'orbax'), template)
  out['restored_orbax'] = host(serialization.to_state_dict(restored_orbax))
  optimizer = jax_utils.replicate(restored)
  for i in range(STEPS, STEPS + STEPS_AFTER):
    optimizer = p_train_step_pmean(optimizer, local_batch(case['batches'][str(i)]),
                                   overrides(case, i))
    out[str(i)] = host(serialization.to_state_dict(optimizer))
  return out


def run_replicated(case, workdir):
  """``optimizer.replicate()``; process 0 saves it as is (one copy), all restore into one."""
  out = {}
  optimizer = create(case).replicate()
  out['created'] = host(serialization.to_state_dict(optimizer))
  for i in range(STEPS):
    optimizer = p_train_step_replicated(optimizer, local_batch(case['batches'][str(i)]),
                                        overrides(case, i))
    out[str(i)] = host(serialization.to_state_dict(optimizer))
  save_both(workdir, optimizer, optimizer.unreplicate())
  template = create(case, jax.tree_util.tree_map(np.zeros_like, case['target'])).replicate()
  restored = checkpoints.restore_checkpoint(os.path.join(workdir, 'msgpack'), template)
  out['restored'] = host(serialization.to_state_dict(restored))
  out['restored_local_copies'] = host(restored.target)  # the device axis, on this process
  # Orbax gives back a state dict; the replicated template puts it on this process's devices.
  state_dict = checkpoints.restore_checkpoint(os.path.join(workdir, 'orbax'), None)
  restored_orbax = serialization.from_state_dict(template, state_dict)
  out['restored_orbax'] = host(serialization.to_state_dict(restored_orbax))
  out['restored_orbax_local_copies'] = host(restored_orbax.target)
  optimizer = restored
  for i in range(STEPS, STEPS + STEPS_AFTER):
    optimizer = p_train_step_replicated(optimizer, local_batch(case['batches'][str(i)]),
                                        overrides(case, i))
    out[str(i)] = host(serialization.to_state_dict(optimizer))
  out['unreplicated'] = host(serialization.to_state_dict(optimizer.unreplicate()))
  return out


# ----------------------------------------------------------------------------- jit on a mesh


def _mesh():
  # Column j of the (4, 2) device grid holds process j's devices (2 processes), so the 'model'
  # axis crosses processes; with more processes the devices are simply laid out in order.
  devices = np.array(jax.devices())
  if jax.process_count() == 2:
    return Mesh(devices.reshape(2, 4).T, ('data', 'model'))
  return Mesh(devices.reshape(4, 2), ('data', 'model'))


def global_array(x, sharding):
  """A global array from the (identical) full value every process holds."""
  x = np.asarray(x)
  return jax.make_array_from_callback(x.shape, sharding, lambda index: x[index])


def state_shardings(optimizer, mesh):
  """The whole optimizer's shardings: params by PARAM_SPECS, same-shape state like its param."""
  params = jax.tree_util.tree_map(lambda s: NamedSharding(mesh, s), PARAM_SPECS)
  treedef = jax.tree_util.tree_structure(optimizer.target)
  flat_params = treedef.flatten_up_to(optimizer.target)
  flat_shardings = treedef.flatten_up_to(params)
  flat_states = treedef.flatten_up_to(optimizer.state.param_states)
  states = [jax.tree_util.tree_map(
      lambda x, p=p, s=s: s if x.shape == p.shape else NamedSharding(mesh, P()), st)
            for p, s, st in zip(flat_params, flat_shardings, flat_states)]
  return optimizer.replace(target=params, state=optimizer.state.replace(
      step=NamedSharding(mesh, P()), param_states=treedef.unflatten(states)))


def gathered(optimizer):
  """The full values of a cross-process optimizer, on every process (numpy state dict)."""
  return host(multihost_utils.process_allgather(serialization.to_state_dict(optimizer),
                                                tiled=True))


def run_mesh(case, workdir):
  """``jax.jit`` on a mesh over all processes; orbax and process-0 msgpack checkpoints."""
  mesh = _mesh()
  batch_sharding = NamedSharding(mesh, P('data', None))
  opt_def = catalogue.build_def(optim, case['optimizer'])
  make = lambda: opt_def.create(jax.tree_util.tree_map(jnp.asarray, case['target']))
  shardings = state_shardings(jax.eval_shape(make), mesh)
  optimizer = jax.jit(make, out_shardings=shardings)()
  step = jax.jit(lambda opt, batch, hps: opt.apply_gradient(
      jax.grad(lambda p: pmap_specs.loss_fn(jax, p, batch))(opt.target), **hps),
                 in_shardings=(shardings, batch_sharding, None), out_shardings=shardings,
                 donate_argnums=0)
  out = {'created': gathered(optimizer)}
  kernel = optimizer.target['hidden']['kernel']
  out['kernel_local_shard_shapes'] = np.array([s.data.shape for s in kernel.addressable_shards])
  out['kernel_fully_addressable'] = np.array(kernel.is_fully_addressable)

  def train(optimizer, steps):
    for i in steps:
      batch = jax.tree_util.tree_map(lambda x: global_array(x, batch_sharding),
                                     case['batches'][str(i)])
      optimizer = step(optimizer, batch, overrides(case, i))
      out[str(i)] = gathered(optimizer)
    return optimizer

  optimizer = train(optimizer, range(STEPS))
  zeros = jax.jit(lambda o: jax.tree_util.tree_map(jnp.zeros_like, o),
                  out_shardings=shardings)(optimizer)

  # orbax: every process writes its own shards of one checkpoint, every process restores its
  # shards (the target's shardings say which).
  flax_config.update('flax_use_orbax_checkpointing', True)
  checkpoints.save_checkpoint_multiprocess(os.path.join(workdir, 'orbax'), optimizer, STEPS)
  restored = checkpoints.restore_checkpoint(os.path.join(workdir, 'orbax'), zeros)
  out['orbax_restored'] = gathered(restored)
  out['orbax_restored_sharding_kept'] = np.array(all(
      a.sharding.is_equivalent_to(b, a.ndim) for a, b in zip(
          jax.tree_util.tree_leaves(restored), jax.tree_util.tree_leaves(shardings))))

  # Legacy msgpack: a cross-process array cannot be written by process 0 alone; gather the
  # full values on the host first, then the legacy idiom applies unchanged.
  flax_config.update('flax_use_orbax_checkpointing', False)
  try:
    serialization.to_bytes(optimizer)
    out['msgpack_sharded_error'] = ''
  except Exception as e:  # pylint: disable=broad-except
    out['msgpack_sharded_error'] = f'{type(e).__name__}: {e}'
  full = multihost_utils.process_allgather(optimizer, tiled=True)
  if jax.process_index() == 0:
    checkpoints.save_checkpoint(os.path.join(workdir, 'msgpack'), full, STEPS)
  barrier(f'saved {workdir}/msgpack')
  host_template = jax.tree_util.tree_map(np.zeros_like, full)
  from_file = checkpoints.restore_checkpoint(os.path.join(workdir, 'msgpack'), host_template)
  restored_msgpack = jax.jit(lambda o: o, out_shardings=shardings)(
      jax.tree_util.tree_map(lambda x, s: global_array(x, s), from_file, shardings))
  out['msgpack_restored'] = gathered(restored_msgpack)
  # Training continues from the orbax-restored state.
  train(restored, range(STEPS, STEPS + STEPS_AFTER))
  return out


def run_cross_process_restore():
  """Cross-process state dicts (what a mesh run or orbax hands back) into ``replicate()``.

  A fully replicated cross-process array holds the whole value on every process, so a
  replicated optimizer can take this process's copy; a sharded one cannot be restored by one
  process alone and should be refused naming the leaf. Records the outcome of both.
  """
  case = pmap_specs.make_case('Momentum')
  replicated = NamedSharding(Mesh(np.array(jax.devices()), ('all',)), P())
  # Rows split between the two halves of the devices, i.e. between processes.
  split = NamedSharding(Mesh(np.array(jax.devices()).reshape(2, -1), ('half', 'rest')), P('half'))
  state_dict = host(serialization.to_state_dict(create(case)))
  outcomes = {}
  for kind in ('replicated_arrays', 'sharded_arrays'):
    global_state_dict = jax.tree_util.tree_map(lambda x: global_array(x, replicated), state_dict)
    if kind == 'sharded_arrays':
      global_state_dict['target']['out']['kernel'] = global_array(
          state_dict['target']['out']['kernel'], split)
    try:
      restored = serialization.from_state_dict(create(case).replicate(), global_state_dict)
      outcomes[kind] = {'error': '', 'target': host(restored.target)}
    except Exception as e:  # pylint: disable=broad-except
      outcomes[kind] = {'error': f'{type(e).__name__}: {e}'}
  return outcomes


# ----------------------------------------------------------------------------- DynamicScale


def run_dynamic_scale():
  """``DynamicScale.value_and_grad(axis_name=...)`` under a pmap over every process's devices.

  Device ``d`` (global index) has the loss ``p * (d + 1)``; with one non-finite device the
  whole step is non-finite everywhere and the scale backs off on every device.
  """
  first = jax.process_index() * jax.local_device_count()
  xs = np.arange(first, first + jax.local_device_count(), dtype=np.float32) + 1.0

  def per_device(ds, x):
    return ds.value_and_grad(lambda p: p * x, axis_name='batch')(jnp.float32(1.0))

  p_step = jax.pmap(per_device, axis_name='batch', in_axes=(None, 0))
  ds = dynamic_scale_lib.DynamicScale(scale=2.0)
  finite = p_step(ds, xs)
  xs_bad = np.where(xs == 6.0, np.float32(np.inf), xs)  # global device 5
  bad = p_step(ds, xs_bad)
  return {'grad': np.asarray(finite.grad), 'finite': np.asarray(finite.finite),
          'scale': np.asarray(finite.dynamic_scale.scale), 'aux': np.asarray(finite.aux),
          'bad_finite': np.asarray(bad.finite), 'bad_scale': np.asarray(bad.dynamic_scale.scale)}


# ----------------------------------------------------------------------------- main


def _write(name, data):
  path = os.path.join(OUTDIR, f'process_{PROCESS_ID}.{name}')
  with open(path + '.tmp', 'wb') as f:
    f.write(data)
  os.replace(path + '.tmp', path)


def train_all(only=None):
  results, seconds = {}, {}
  scenarios = [(f'pmean/{name}', lambda n=name: run_pmean(
      pmap_specs.make_case(n), os.path.join(OUTDIR, 'ckpt', 'pmean', n))) for name in PMEAN_CASES]
  scenarios += [(f'replicated/{name}', lambda n=name: run_replicated(
      pmap_specs.make_case(n), os.path.join(OUTDIR, 'ckpt', 'replicated', n)))
                for name in REPLICATED_CASES]
  scenarios += [(f'mesh/{name}', lambda n=name: run_mesh(
      pmap_specs.make_case(n), os.path.join(OUTDIR, 'ckpt', 'mesh', n))) for name in MESH_CASES]
  scenarios += [('dynamic_scale', run_dynamic_scale),
                ('cross_process_restore', run_cross_process_restore)]
  if only is not None:
    unknown = set(only) - {key for key, _ in scenarios}
    if unknown:
      raise ValueError(f'unknown scenarios {sorted(unknown)}')
    scenarios = [(key, run) for key, run in scenarios if key in only]
  seconds['start-up'] = {'wall': round(time.perf_counter() - START[0], 3),
                         'cpu': round(time.process_time() - START[1], 3)}
  for key, run in scenarios:
    start = time.perf_counter(), time.process_time()
    group, _, name = key.partition('/')
    value = run()
    if name:
      results.setdefault(group, {})[name] = value
    else:
      results[group] = value
    seconds[key] = {'wall': round(time.perf_counter() - start[0], 3),
                    'cpu': round(time.process_time() - start[1], 3)}
    print(f'process {PROCESS_ID}: {key} done in {seconds[key]["wall"]:.1f} s', flush=True)
  results['process'] = {'index': np.array(jax.process_index()),
                        'count': np.array(jax.process_count()),
                        'local_devices': np.array(jax.local_device_count()),
                        'devices': np.array(jax.device_count())}
  _write('msgpack', serialization.msgpack_serialize(results))
  _write('done', json.dumps(seconds).encode())


def main():
  if MODE == 'train':
    train_all()
  elif MODE.startswith('train:'):
    train_all(MODE[len('train:'):].split(','))
  elif MODE == 'die':
    print(f'process {PROCESS_ID}: exiting without a word', flush=True)
    os._exit(17)  # pylint: disable=protected-access
  elif MODE == 'survive':
    barrier('the dead process never reaches this')
    raise AssertionError('a barrier with a dead process returned')
  else:
    raise ValueError(f'unknown MODE {MODE!r}')


if __name__ == '__main__':
  main()
