"""Regenerates every golden fixture: ``python -m tools.oracle --modern-python PY``.

Runs the generators one after the other, each in its own process of this interpreter (the
pmap and checkpoint generators simulate 8 CPU devices, the others run on the default one); the
convert goldens start from the legacy checkpoints, so they come after them.
"""
import argparse
import os
import subprocess
import sys

from tools import oracle


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--modern-python', default=os.environ.get('FLAX_OPTIM_COMPAT_DEV_PYTHON'),
                      help='python of a venv with flax_optim_compat installed (for checkpoints)')
  args = parser.parse_args(argv)
  if not args.modern_python:
    parser.error('pass --modern-python PY (or set FLAX_OPTIM_COMPAT_DEV_PYTHON)')
  for module, extra in (('gen_trajectories', []), ('gen_pmap', []),
                        ('gen_checkpoints', ['--modern-python', args.modern_python]),
                        ('gen_convert', ['--modern-python', args.modern_python]),
                        ('gen_migrate_corpus', []), ('gen_migrate_branch_defs', []),
                        ('gen_probe', [])):
    print(f'== tools.oracle.{module}', flush=True)
    subprocess.run([sys.executable, '-m', f'tools.oracle.{module}'] + extra, cwd=oracle.ROOT,
                   check=True)


if __name__ == '__main__':
  main()
