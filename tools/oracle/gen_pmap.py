"""Golden data-parallel runs of the legacy flax.optim on 8 simulated CPU devices.

Run in the legacy oracle venv, from the repository root::

    ~/.cache/legacy-flax-oracle/bin/python -m tools.oracle.gen_pmap [CASE ...]

Writes tests/fixtures/pmap/<CASE>.msgpack for each case of ``catalogue.PMAP`` (all by default):
the case itself and what legacy produced on the three routes of tests/pmap_specs.py (single
device, ``jax_utils.replicate`` + ``lax.pmean``, ``optimizer.replicate()``), i.e. the state dict
after creation and after every step, the ``to_bytes`` of the freshly replicated optimizers and
the checkpoint bytes each pmap route wrote mid-run (then restored and trained on). The pmean
route keeps legacy's device axis only in its last step's state dict (to keep the files small);
for the other steps it stores the first device's copy after checking that all eight copies are
bitwise equal.
"""
import os
import warnings

from tools import oracle

oracle.use_eight_cpu_devices()
warnings.simplefilter('ignore')

import flax  # noqa: E402
import jax  # noqa: E402
from flax import jax_utils  # noqa: E402
from flax import optim  # noqa: E402
from flax import serialization  # noqa: E402

from tests import catalogue  # noqa: E402
from tests import pmap_specs  # noqa: E402

warnings.simplefilter('ignore')  # flax.optim re-enables its DeprecationWarnings on import

OUT_DIR = os.path.join(oracle.FIXTURES, 'pmap')
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


def generate(name, out_dir=OUT_DIR):
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
             'versions': {'flax': flax.__version__, 'jax': jax.__version__},
             'single': single, 'pmean': _compact_pmean(pmean), 'replicated': replicated}
  oracle.write_msgpack(os.path.join(out_dir, f'{name}.msgpack'), fixture)


def main(argv=None):
  oracle.main_over(__doc__, catalogue.PMAP, generate, OUT_DIR, 'cases of catalogue.PMAP', argv)


if __name__ == '__main__':
  main()
