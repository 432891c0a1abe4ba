"""The legacy columns of ``bench.py``: flax 0.5.3's own ``flax.optim`` on jax 0.4.13.

Run by ``bench.py`` as a subprocess under the legacy oracle venv (see tools/ for its recipe);
not meant to be run by hand. Reads a JSON job from argv (rows of ``[case, optimizer, metrics]``), prints one JSON line per row as soon as
it is measured (so the parent can give up on a row that takes too long and restart after it):

  {"case": ..., "optimizer": ..., "eager_s": ..., "step_s": ..., "lower_s": ..., "compile_s": ...}

and, where the job asks for it, writes ``serialization.to_bytes(optimizer)`` of the optimizer
after one step to ``<ckpt_dir>/<case>--<optimizer>/checkpoint_1`` (the legacy file that
``bench.py`` restores).
"""
import json
import os
import sys
import warnings

warnings.simplefilter('ignore')  # jax 0.4.13 / flax 0.5.3 deprecation noise

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax  # pylint: disable=g-import-not-at-top
from flax import optim  # pylint: disable=g-import-not-at-top
from flax import serialization  # pylint: disable=g-import-not-at-top

import _cases  # pylint: disable=g-import-not-at-top


def row(case, opt_name, metrics, job):
  shapes = _cases.case_shapes(case, job['quick'])
  params = _cases.make_tree(shapes, 0)
  grads = _cases.make_tree(shapes, 1, scale=1e-2)
  opt_def = _cases.make_def(optim, opt_name)
  out = {'case': case, 'optimizer': opt_name}
  if opt_def is None:
    out['skipped'] = 'not in flax 0.5.3'
    return out
  optimizer = _cases.block(opt_def.create(params))
  if 'eager' in metrics:
    eager = lambda: optimizer.apply_gradient(grads)
    _cases.timed(eager)
    out['eager_s'] = _cases.interleaved(
        {'legacy': eager}, *_cases.samples_for(case, job['eager_rounds'], job['eager_reps'])
    )['legacy']
  if job.get('ckpt_dir') and opt_name in job.get('ckpt_optimizers', ()):
    directory = os.path.join(job['ckpt_dir'], f'{case}--{opt_name}')
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, 'checkpoint_1'), 'wb') as f:
      f.write(serialization.to_bytes(optimizer.apply_gradient(grads)))
  if 'compile' in metrics or 'step' in metrics:
    lowers, compiles = [], []
    for _ in range(job['compile_reps']):
      lower_s, compile_s, compiled = _cases.cold_compile(
          lambda: _cases.legacy_api_step, (optimizer, grads), donate=(0,))
      lowers.append(lower_s)
      compiles.append(compile_s)
    out['lower_s'], out['compile_s'] = min(lowers), min(compiles)
    if 'step' in metrics:
      step = _cases.chained(compiled, _cases.block(opt_def.create(params)), grads, n_carry=1)
      _cases.timed(step)
      out['step_s'] = _cases.interleaved(
          {'legacy': step}, *_cases.samples_for(case, job['step_rounds'], job['step_reps'])
      )['legacy']
  return out


def main():
  job = json.loads(sys.argv[1])
  print(json.dumps({'versions': {'jax': jax.__version__, 'flax': __import__('flax').__version__}}),
        flush=True)
  for case, opt_name, metrics in job['rows']:
    print(json.dumps(row(case, opt_name, metrics, job)), flush=True)


if __name__ == '__main__':
  main()
