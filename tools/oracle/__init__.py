"""Golden fixtures from the REAL legacy flax.optim (flax 0.5.3), run in the legacy oracle venv.

Build the venv once with ``tools/oracle/setup.sh`` (see tools/oracle/README.md), then, from the
repository root::

    ~/.cache/legacy-flax-oracle/bin/python -m tools.oracle            # every fixture
    ~/.cache/legacy-flax-oracle/bin/python -m tools.oracle.gen_trajectories [FAMILY ...]
    ~/.cache/legacy-flax-oracle/bin/python -m tools.oracle.gen_pmap [CASE ...]
    ~/.cache/legacy-flax-oracle/bin/python -m tools.oracle.gen_checkpoints \\
        --modern-python .venv/bin/python [CASE ...]
    ~/.cache/legacy-flax-oracle/bin/python -m tools.oracle.gen_convert \\
        --modern-python .venv/bin/python [CASE ...]

The cases come from tests/catalogue.py and the drivers from tests/oracle_specs.py,
tests/checkpoint_specs.py and tests/pmap_specs.py, the very code the suite runs against
flax_optim_compat; this package imports none of flax_optim_compat except where a generator
runs itself in the modern venv (``gen_checkpoints`` / ``gen_convert --write-ours``).
"""
import argparse
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(ROOT, 'tests', 'fixtures')


def use_eight_cpu_devices():
  """Eight simulated CPU devices for pmap; call before anything imports jax."""
  os.environ['XLA_FLAGS'] = ' '.join(
      [os.environ.get('XLA_FLAGS', ''), '--xla_force_host_platform_device_count=8']).strip()
  os.environ.setdefault('JAX_PLATFORMS', 'cpu')


def write_msgpack(path, tree, what=''):
  """Writes ``tree`` to ``path`` with flax's msgpack serializer; prints the path and size."""
  from flax import serialization  # pylint: disable=g-import-not-at-top
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, 'wb') as f:
    f.write(serialization.msgpack_serialize(tree))
  print(f'{path}: {what}{os.path.getsize(path)} bytes')


def update_msgpack(path, entries):
  """Merges ``entries`` into the msgpack dict at ``path`` (created if absent): regenerating some
  cases keeps the others. Prints the path, the number of cases and the size."""
  from flax import serialization  # pylint: disable=g-import-not-at-top
  previous = {}
  if os.path.exists(path):
    with open(path, 'rb') as f:
      previous = serialization.msgpack_restore(f.read())
  previous.update(entries)
  with open(path, 'wb') as f:
    f.write(serialization.msgpack_serialize(previous))
  print(f'{path}: {len(previous)} cases, {os.path.getsize(path)} bytes')


def main_over(doc, known, generate, out_dir, what, argv=None):
  """Command line of a generator: ``[--out DIR] [NAME ...]``, NAMEs from ``known`` (default
  all); calls ``generate(name, out)`` for each."""
  parser = argparse.ArgumentParser(description=doc.split('\n')[0])
  parser.add_argument('--out', default=out_dir, help=f'output directory (default: {out_dir})')
  parser.add_argument('names', nargs='*', help=f'{what} (default: all)')
  args = parser.parse_args(argv)
  unknown = sorted(set(args.names) - set(known))
  if unknown:
    parser.error(f'unknown {what} {unknown}; known: {sorted(known)}')
  for name in args.names or list(known):
    generate(name, args.out)
