"""Fixtures for the conversion probe, made with the REAL legacy flax.optim (flax 0.5.3).

Run in the legacy oracle venv, from the repository root::

    ~/.cache/legacy-flax-oracle/bin/python -m tools.oracle.gen_probe [CASE ...]

Each case trains a small model ``TRAINED`` steps with flax 0.5.3's own optimizer (at the rate
its ``rates`` gives each step where the run set its rate per step, as flax's examples did),
writes the optimizer as the legacy checkpoint ``tests/fixtures/probe/<case>.msgpack``, then
continues it ``STEPS`` (``LONG``) more steps on fresh gradients. ``tests/fixtures/probe/expected.msgpack``
holds, per case, those gradients and the params after each continued step: what a converted
state continued in plain optax must reproduce (tests/checkpoint/test_probe_oracle.py), and what
a refused conversion would have missed.
"""
import os
import sys
import warnings

from tools import oracle

os.environ.setdefault('JAX_PLATFORMS', 'cpu')
warnings.simplefilter('ignore')

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from flax import serialization  # noqa: E402

OUT = os.path.join(oracle.FIXTURES, 'probe')
TRAINED = 5    # steps before the checkpoint
STEPS = 20     # steps after it
LONG = 200     # steps after it where a difference of 1e-4 of an update must show (a decay)


def _decay(count):
  """``optax.exponential_decay(0.01, 1, 0.9)`` at ``count``: the per-step rate of the runs
  that set one."""
  return 0.01 * 0.9 ** count


def _cases(optim):
  kernels = optim.ModelParamTraversal(lambda path, _: 'kernel' in path)
  biases = optim.ModelParamTraversal(lambda path, _: 'bias' in path)
  # name: (def, params dtype, gradient scale, first step, per-step rates of the groups or None)
  return {
      'adam-decay': (optim.Adam(1e-3, weight_decay=1e-4), 'float32', 1.0, 0, None),
      'adam': (optim.Adam(2e-3), 'float32', 1.0, 0, None),
      # Gradients of global norm ~20 with elements above 2.5: clipping at 5.0 or 2.5 shows.
      'adam-clip': (optim.Adam(0.01), 'float32', 3.0, 0, None),
      'momentum-bf16': (optim.Momentum(0.01, beta=0.9), 'bfloat16', 1.0, 0, None),
      # A fine-tuning run: its step starts at 20, its decay counts from 10.
      'adafactor-offset': (optim.Adafactor(0.05, step_offset=10), 'float32', 1.0, 20, None),
      'adam-schedule': (optim.Adam(), 'float32', 1.0, 0, (_decay,)),
      'multi-schedule': (optim.MultiOptimizer((kernels, optim.Adam()),
                                              (biases, optim.Momentum(0.05, beta=0.9))),
                         'float32', 1.0, 0, (_decay, None)),
  }


def _params(rng, dtype):
  return {'dense': {'kernel': jnp.asarray(rng.standard_normal((8, 6)) * 0.5, dtype),
                    'bias': jnp.asarray(rng.standard_normal((6,)) * 0.1, dtype)}}


def _grads(rng, params, scale):
  return jax.tree_util.tree_map(
      lambda p: jnp.asarray(rng.standard_normal(p.shape) * scale, p.dtype), params)


def _apply(opt_def, rates):
  """One jitted legacy step at ``rates(step)`` (per group) where the run set its rates."""
  if rates is None:
    return jax.jit(lambda opt, g: opt.apply_gradient(g))
  multi = len(rates) > 1

  def step(opt, g):
    count = opt.state.step
    if not multi:
      return opt.apply_gradient(g, learning_rate=rates[0](count))
    hps = [hp if r is None else hp.replace(learning_rate=r(count))
           for hp, r in zip(opt.optimizer_def.hyper_params, rates)]
    return opt.apply_gradient(g, hyper_params=hps)
  return jax.jit(step)


def generate(names):
  from flax import optim
  warnings.simplefilter('ignore')
  cases = _cases(optim)
  expected = {}
  for name in names or cases:
    opt_def, dtype, scale, first, rates = cases[name]
    rng = np.random.RandomState(sum(map(ord, name)))
    opt = opt_def.create(_params(rng, dtype))
    if first:
      opt = opt.replace(state=opt.state.replace(step=jnp.asarray(first, jnp.int32)))
    apply = _apply(opt_def, rates)
    for _ in range(TRAINED):
      opt = apply(opt, _grads(rng, opt.target, scale))
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, f'{name}.msgpack'), 'wb') as f:
      f.write(serialization.to_bytes(opt))
    grads, continued = {}, {}
    steps = LONG if name.startswith('adam-decay') or name == 'adam' else STEPS
    for i in range(steps):
      grads[str(i)] = _grads(rng, opt.target, scale)
      opt = apply(opt, grads[str(i)])
      continued[str(i)] = opt.target
    expected[name] = {'grads': grads, 'continued': continued,
                      'step': int(opt.state.step) - steps}
    print(f'{name}: trained {TRAINED}, continued {steps} steps')
  path = os.path.join(OUT, 'expected.msgpack')
  if os.path.exists(path) and names:
    with open(path, 'rb') as f:
      expected = dict(serialization.msgpack_restore(f.read()), **expected)
  oracle.write_msgpack(path, jax.tree_util.tree_map(np.asarray, expected))


if __name__ == '__main__':
  generate(sys.argv[1:])
