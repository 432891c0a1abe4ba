"""Golden data-parallel runs of the REAL legacy flax.optim (flax 0.5.3) on 8 simulated devices.

Run in the legacy oracle venv (see ../shared/legacy-oracle/setup.sh), from the repo root:

    ~/.cache/legacy-flax-oracle/bin/python tools/gen_pmap.py [CASE ...]

Writes tests/fixtures/pmap/<CASE>.msgpack for each case of tests/pmap_specs.py (all by default):
the case itself and what legacy produced on the three routes of that module (single device,
``jax_utils.replicate`` + ``lax.pmean``, ``optimizer.replicate()``), i.e. the state dict after
creation and after every step, the ``to_bytes`` of the freshly replicated optimizers and the
checkpoint bytes each pmap route wrote mid-run (then restored and trained on). The pmean route keeps legacy's device axis only in its last
step's state dict (to keep the files small); for the other steps it stores the first device's
copy after checking that all eight copies are bitwise equal.
"""
import os
import sys

# Before jax is imported anywhere: eight CPU devices for pmap.
os.environ['XLA_FLAGS'] = ' '.join(
    [os.environ.get('XLA_FLAGS', ''), '--xla_force_host_platform_device_count=8']).strip()
os.environ['JAX_PLATFORMS'] = 'cpu'

import warnings  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'tests'))
warnings.simplefilter('ignore')

import jax  # noqa: E402
from flax import jax_utils  # noqa: E402
from flax import optim  # noqa: E402
from flax import serialization  # noqa: E402

import pmap_specs  # noqa: E402

warnings.simplefilter('ignore')  # flax.optim re-enables its DeprecationWarnings on import

OUT_DIR = os.path.join(HERE, '..', 'tests', 'fixtures', 'pmap')
N_DEVICES = 8


def _compact_pmean(run):
  """First replica per step (checked identical on all devices); full last step."""
  last = str(pmap_specs.STEPS + pmap_specs.STEPS_AFTER - 1)
  out = {'created_bytes': run['created_bytes'], 'checkpoint': run['checkpoint'],
         'last_full': run[last]}
  for key, state_dict in run.items():
    if key in ('created_bytes', 'checkpoint'):
      continue
    differ = pmap_specs.replicas_differ(state_dict)
    assert not differ, f'legacy replicas differ at step {key}: {differ}'
    out[key] = pmap_specs.first_replica(state_dict)
  return out


def generate(name):
  devices = jax.local_devices()
  assert len(devices) == N_DEVICES, f'need {N_DEVICES} devices, got {devices}'
  case = pmap_specs.make_case(name)
  sd = serialization.to_state_dict
  single = pmap_specs.run_single(optim, case, jax=jax, to_state_dict=sd)
  pmean = pmap_specs.run_pmean(optim, case, jax=jax, jax_utils=jax_utils, to_state_dict=sd,
                               to_bytes=serialization.to_bytes,
                               from_bytes=serialization.from_bytes, devices=devices)
  replicated = pmap_specs.run_replicated(
      optim, case, jax=jax, to_state_dict=sd, to_bytes=serialization.to_bytes,
      from_bytes=serialization.from_bytes, devices=devices)
  fixture = {'name': name, 'case': case, 'n_devices': N_DEVICES,
             'versions': {'flax': __import__('flax').__version__, 'jax': jax.__version__},
             'single': single, 'pmean': _compact_pmean(pmean), 'replicated': replicated}
  os.makedirs(OUT_DIR, exist_ok=True)
  path = os.path.join(OUT_DIR, f'{name}.msgpack')
  with open(path, 'wb') as f:
    f.write(serialization.msgpack_serialize(fixture))
  print(f'{path}: {os.path.getsize(path)} bytes')


if __name__ == '__main__':
  for case_name in sys.argv[1:] or pmap_specs.case_names():
    generate(case_name)
