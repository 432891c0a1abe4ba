"""Golden fixtures for flax_optim_compat.convert, made with the REAL legacy flax.optim.

Run in the legacy oracle venv, from the repository root::

    ~/.cache/legacy-flax-oracle/bin/python -m tools.oracle.gen_convert \\
        [--modern-python PY] [CASE ...]

Inputs are the committed legacy checkpoints tests/fixtures/checkpoints/legacy/<case>/ (written
by flax 0.5.3 with tools/oracle/gen_checkpoints.py; not modified here). The cases are
``catalogue.CONVERT``: the checkpoint cases of one built-in alone or a MultiOptimizer of built-ins
(train-state cases also round-trip, see ``ROUND_TRIPS``). For every case

1. the legacy library restores the file and continues ``STEPS`` steps with fresh gradients
   (jit): the trajectory a converted optax run must reproduce;
2. this module runs itself in the modern venv (``--write-ours``; PY is ``--modern-python`` or
   ``FLAX_OPTIM_COMPAT_DEV_PYTHON``): ``convert.to_train_state`` of the legacy file,
   ``BACK_AFTER`` optax steps on the same gradients, then
   ``convert.to_legacy(..., path=tests/fixtures/convert/ours/<case>.msgpack)``;
3. the legacy library restores that file (``flax.serialization.from_bytes`` into a fresh
   legacy optimizer), records what it restored, and continues the remaining steps.

Everything is stored in tests/fixtures/convert/expected.msgpack (cases not named keep their
entries); tests/checkpoint/test_convert.py checks our conversions against it without the oracle venv.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import warnings

from tools import oracle

os.environ.setdefault('JAX_PLATFORMS', 'cpu')
warnings.simplefilter('ignore')

import jax  # noqa: E402
import numpy as np  # noqa: E402
from flax import serialization  # noqa: E402

from tests import catalogue  # noqa: E402

ROOT = oracle.ROOT
OUT = os.path.join(oracle.FIXTURES, 'convert')
LEGACY = os.path.join(oracle.FIXTURES, 'checkpoints', 'legacy')
STEPS = 6        # legacy steps after the restore (and optax steps after the conversion)
BACK_AFTER = 3   # optax steps before converting back to a legacy file


def _spec(name):
  return catalogue.CONVERT[name].spec


# Train-state files: their conversion (flat, and with keep_layout) converted back by
# `convert.legacy_from_converted` must restore into the original dataclass in flax 0.5.3.
ROUND_TRIPS = tuple(name for name, case in catalogue.CONVERT.items() if case.kind == 'train_state')


def cli_string(spec):
  """The ``--optimizer`` string of a spec: 'Adam(learning_rate=0.01, ...)'.

  A MultiOptimizer's groups are ``(ModelParamTraversal('REGEX'), optimizer)`` pairs.
  """
  if spec['name'] == 'MultiOptimizer':
    pairs = ', '.join(f"(ModelParamTraversal({t['value']!r}), {cli_string(o)})"
                      for t, o in spec['groups'])
    return f'MultiOptimizer({pairs})'
  return f"{spec['name']}({', '.join(f'{k}={v!r}' for k, v in spec['kwargs'].items())})"


def legacy_file(name):
  directory = os.path.join(LEGACY, name)
  (file_name,) = [n for n in os.listdir(directory) if n.startswith('checkpoint_')]
  return os.path.join(directory, file_name)


def optimizer_state_dict(raw):
  return raw['optimizer'] if 'optimizer' in raw else raw


def _like(rng, tree):
  if isinstance(tree, dict):
    return {k: _like(rng, v) for k, v in tree.items()}
  return rng.standard_normal(np.shape(tree)).astype(np.float32)


def make_inputs(name):
  rng = np.random.RandomState(1000 + sum(map(ord, name)))
  params = optimizer_state_dict(load(legacy_file(name)))['target']
  return {'optimizer': _spec(name), 'cli': cli_string(_spec(name)),
          'file': os.path.relpath(legacy_file(name), ROOT),
          'grads': {str(i): _like(rng, params) for i in range(STEPS)}}


def load(path):
  with open(path, 'rb') as f:
    return serialization.msgpack_restore(f.read())


def write_ours(inputs_file):
  """Modern venv: legacy file -> TrainState -> BACK_AFTER optax steps -> legacy file."""
  import flax_optim_compat as optim
  from flax_optim_compat import convert

  inputs = load(inputs_file)
  report = {}
  for name, item in inputs.items():
    opt_def = catalogue.build_def(optim, item['optimizer'])
    state = convert.to_train_state(legacy_file(name), opt_def)
    step = jax.jit(lambda s, g: s.apply_gradients(grads=g))
    for i in range(BACK_AFTER):
      state = step(state, jax.tree_util.tree_map(jax.numpy.asarray, item['grads'][str(i)]))
    path = os.path.join(OUT, 'ours', f'{name}.msgpack')
    if os.path.exists(path):
      os.remove(path)
    # The legacy optimizer's step (a train state's own step may count skipped updates too).
    legacy_step = int(optimizer_state_dict(load(legacy_file(name)))['state']['step']) + BACK_AFTER
    convert.to_legacy(state.params, state.opt_state, opt_def, step=legacy_step, path=path)
    if name in ROUND_TRIPS:
      for layout in ('flat', 'keep'):
        path = os.path.join(OUT, 'ours', f'{name}.roundtrip-{layout}.msgpack')
        if os.path.exists(path):
          os.remove(path)
        converted = convert.convert_checkpoint(legacy_file(name), opt_def,
                                               keep_layout=layout == 'keep')
        convert.legacy_from_converted(converted.state_dict, opt_def, path=path)
    report[name] = 'written'
  print(json.dumps(report))


def generate(names, modern_python):
  from flax import optim
  warnings.simplefilter('ignore')  # flax.optim re-enables its DeprecationWarnings on import

  apply = jax.jit(lambda opt, g: opt.apply_gradient(g))

  def fresh(item, params):
    return catalogue.build_def(optim, item['optimizer']).create(
        jax.tree_util.tree_map(jax.numpy.asarray, params))

  def continue_(opt, item, steps):
    out = []
    for i in steps:
      opt = apply(opt, jax.tree_util.tree_map(jax.numpy.asarray, item['grads'][str(i)]))
      out.append(serialization.to_state_dict(opt))
    return out

  def train_state(optimizer):
    """The dataclass the train-state fixtures were saved from (tests/checkpoint_specs.py)."""
    from flax import struct  # pylint: disable=g-import-not-at-top
    from flax.optim import dynamic_scale  # pylint: disable=g-import-not-at-top
    from tests import checkpoint_specs  # pylint: disable=g-import-not-at-top
    return checkpoint_specs.train_state_class(struct)(
        step=jax.numpy.asarray(0, jax.numpy.int32), optimizer=optimizer,
        model_state={'batch_stats': {'mean': jax.numpy.zeros((4,), jax.numpy.float32)}},
        dynamic_scale=dynamic_scale.DynamicScale(growth_interval=2))

  inputs = {name: make_inputs(name) for name in names}
  expected = {}
  for name, item in inputs.items():
    raw = optimizer_state_dict(load(legacy_file(name)))
    restored = serialization.from_state_dict(fresh(item, raw['target']), raw)
    expected[name] = dict(item, continued=continue_(restored, item, range(STEPS)))
    print(f'{name}: legacy continued {STEPS} steps')

  os.makedirs(os.path.join(OUT, 'ours'), exist_ok=True)
  with tempfile.TemporaryDirectory() as tmp:
    inputs_file = os.path.join(tmp, 'inputs.msgpack')
    with open(inputs_file, 'wb') as f:
      f.write(serialization.msgpack_serialize(inputs))
    env = dict(os.environ, PYTHONPATH=ROOT)
    done = subprocess.run([modern_python, '-m', 'tools.oracle.gen_convert', '--write-ours',
                           inputs_file],
                          env=env, cwd=ROOT, capture_output=True, text=True)
    if done.returncode:
      sys.exit(f'--write-ours failed:\n{done.stderr}')
  report = json.loads(done.stdout.strip().splitlines()[-1])

  for name, item in inputs.items():
    assert report.get(name) == 'written', (name, report.get(name))
    with open(os.path.join(OUT, 'ours', f'{name}.msgpack'), 'rb') as f:
      written = f.read()
    raw = serialization.msgpack_restore(written)
    opt = serialization.from_bytes(fresh(item, raw['target']), written)
    expected[name]['from_ours'] = {
        'restored': serialization.to_state_dict(opt),
        'continued': continue_(opt, item, range(BACK_AFTER, STEPS))}
    print(f'{name}: legacy restored our file and continued {STEPS - BACK_AFTER} steps')
    if name in ROUND_TRIPS:
      expected[name]['round_trip'] = {}
      for layout in ('flat', 'keep'):
        with open(os.path.join(OUT, 'ours', f'{name}.roundtrip-{layout}.msgpack'), 'rb') as f:
          written = f.read()
        raw = serialization.msgpack_restore(written)
        restored = serialization.from_bytes(
            train_state(fresh(item, raw['optimizer']['target'])), written)
        expected[name]['round_trip'][layout] = serialization.to_state_dict(restored)
      print(f'{name}: legacy restored both round trips into its train-state dataclass')

  oracle.update_msgpack(os.path.join(OUT, 'expected.msgpack'), expected)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--write-ours', metavar='INPUTS_FILE', help=argparse.SUPPRESS)
  parser.add_argument('--modern-python', default=os.environ.get('FLAX_OPTIM_COMPAT_DEV_PYTHON'),
                      help='python of a venv with flax_optim_compat installed (.ci/run makes .venv)')
  parser.add_argument('cases', nargs='*', help='cases of catalogue.CONVERT (default: all)')
  args = parser.parse_args(argv)
  unknown = sorted(set(args.cases) - set(catalogue.CONVERT))
  if unknown:
    parser.error(f'unknown cases {unknown}; known: {sorted(catalogue.CONVERT)}')
  if args.write_ours:
    write_ours(args.write_ours)
  elif not args.modern_python:
    parser.error('pass --modern-python PY (or set FLAX_OPTIM_COMPAT_DEV_PYTHON)')
  else:
    generate(args.cases or list(catalogue.CONVERT), args.modern_python)


if __name__ == '__main__':
  main()
