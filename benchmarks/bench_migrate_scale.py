"""How `migrate`'s analysis grows with the size of a project: seconds per file as files are added.

A generated project of N files: every tenth an agent that holds a `flax.optim` optimizer in a
field and steps it through a field bound to a jitted method (TD3's `self.step =
jax.jit(self._step)`), the others ordinary code (classes with fields and methods, fields
called as functions as a network module calls its layers, functions calling each other across
files), which the analysis must read to know that none of them reaches
an optimizer. A question the analysis asks about
one field or one function must not walk every file (before 2026-12-03 it did: a public repository
of 545 files took 400 s, 160 s after). Run from a clone, with the README's venv:

    .venv/bin/python benchmarks/bench_migrate_scale.py                  # this checkout
    .venv/bin/python benchmarks/bench_migrate_scale.py --package OTHER   # another checkout's

Each size is migrated in a fresh process (`--sizes 50,100,200,400`), the time the minimum of
`--repeat` runs; it prints one line per size and checks the result (each agent's file rewritten,
every site rewritten). Not part of the test suite.
"""
import argparse
import json
import subprocess
import sys
import time

AGENT = '''import jax
import jax.numpy as jnp
from flax import optim


class Agent{i}:

  def __init__(self):
    self.optimizer = optim.Adam(learning_rate=1e-2).create({{'w': jnp.ones((3,))}})
    self.step_{i} = jax.jit(self._step_{i})

  def _step_{i}(self, optimizer, x):
    grad = jax.grad(lambda p: jnp.sum(p['w'] * x))(optimizer.target)
    return optimizer.apply_gradient(grad)

  def train(self, x):
    self.optimizer = self.step_{i}(self.optimizer, x)
    return self.optimizer.target
'''

FILLER = '''import numpy as np
from lib import m{prev} as prev


class Worker{i}:

  def __init__(self, n):
    self.size = n
    self.buffer = np.zeros(n)
    self.count = 0
    self.helper = prev.Worker{prev}(n)
    self.scale = np.sqrt
    self.shift = np.tanh
    self.clip = np.abs

  def update_{i}(self, x):
    self.buffer = self.clip(self.shift(self.scale(self.buffer + x)))
    self.count += 1
    return self.helper.update_{prev}(x)

  def reset(self):
    self.buffer = np.zeros(self.size)


def make_{i}(n):
  return Worker{i}(n).update_{i}(prev.make_{prev}(n))
'''


def project(n: int) -> dict:
  """``n`` files: every tenth an agent (``agents/a<i>.py``), the others ordinary code."""
  files = {'lib/__init__.py': '', 'agents/__init__.py': ''}
  for i in range(n - 2):
    if i % 10 == 0:
      files[f'agents/a{i}.py'] = AGENT.format(i=i)
    else:
      prev = i - 1 if (i - 1) % 10 else i - 2   # the file before, an ordinary one
      files[f'lib/m{i}.py'] = FILLER.format(i=i, prev=prev if prev > 0 else i)
  return files


CHILD = '''
import json, sys, time
package = sys.argv[1]
if package:
  sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f).lower()]
  sys.path.insert(0, package)
from flax_optim_compat._migrate import _engine
sources = json.load(sys.stdin)
start = time.perf_counter()
changed, report = _engine.migrate_sources(sources)
seconds = time.perf_counter() - start
sites = report.as_dict()['sites']
print(json.dumps({'seconds': seconds, 'changed': sorted(changed),
                  'sites': len(sites), 'rewritten': sum(s['status'] == 'rewritten' for s in sites)}))
'''


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--sizes', default='50,100,200,400')
  parser.add_argument('--repeat', type=int, default=1)
  parser.add_argument('--package', default='', help='a checkout whose package to time')
  args = parser.parse_args()
  print(f'{"files":>6} {"seconds":>8} {"ms/file":>8}  result')
  for n in (int(s) for s in args.sizes.split(',')):
    sources = json.dumps(project(n))
    best = None
    for _ in range(args.repeat):
      out = subprocess.run([sys.executable, '-c', CHILD, args.package], input=sources,
                           capture_output=True, text=True, check=True)
      result = json.loads(out.stdout.strip().splitlines()[-1])
      best = result if best is None or result['seconds'] < best['seconds'] else best
    agents = sorted(f for f in json.loads(sources) if f.startswith('agents/a'))
    ok = best['changed'] == agents and best['sites'] == best['rewritten'] > 0
    print(f'{n:>6} {best["seconds"]:>8.1f} {1000 * best["seconds"] / n:>8.1f}  '
          f'{best["rewritten"]}/{best["sites"]} sites rewritten in {len(best["changed"])} files'
          + ('' if ok else '  UNEXPECTED'))


if __name__ == '__main__':
  main()
