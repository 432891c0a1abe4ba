"""What ``bench.py`` times, written once for both interpreters.

Imported by ``bench.py`` (this package, today's jax/optax) and by ``legacy_side.py`` (flax 0.5.3's
``flax.optim`` on jax 0.4.13, in the legacy oracle venv), so the trees, the optimizer settings and
the timing loops are the same code on both sides. Only ``jax.tree_util``, ``jax.jit(...).lower``
and NumPy are used: APIs that both jax versions have.
"""
import statistics
import time
import warnings

import jax
import numpy as np

# ----------------------------------------------------------------------------- trees

CASES = ('tiny', 'many_small', 'resnet_like', 'few_large')


def resnet50_shapes(width_div=1):
  """The 161 parameter shapes of ResNet-50 (25,557,032 params at ``width_div=1``).

  Stem conv + BN, 16 bottleneck blocks (3, 4, 6, 3) of three convs + BNs each, one projection
  conv + BN per stage, and the 2048 -> 1000 classifier; convs carry no bias, BNs a scale and a
  bias. ``width_div`` divides every channel count (the quick mode's smaller variant).
  """
  c = lambda n: max(1, n // width_div)
  shapes = {'conv_init': {'kernel': (7, 7, 3, c(64))},
            'bn_init': {'scale': (c(64),), 'bias': (c(64),)}}
  in_ch = c(64)
  for stage, (blocks, width) in enumerate(zip((3, 4, 6, 3), (64, 128, 256, 512))):
    for block in range(blocks):
      w = c(width)
      layers = {}
      for i, (k, cin, cout) in enumerate(((1, in_ch, w), (3, w, w), (1, w, 4 * w))):
        layers[f'conv{i}'] = {'kernel': (k, k, cin, cout)}
        layers[f'bn{i}'] = {'scale': (cout,), 'bias': (cout,)}
      if block == 0:
        layers['proj_conv'] = {'kernel': (1, 1, in_ch, 4 * w)}
        layers['proj_bn'] = {'scale': (4 * w,), 'bias': (4 * w,)}
      shapes[f'stage{stage}_block{block}'] = layers
      in_ch = 4 * w
  shapes['head'] = {'kernel': (in_ch, 1000), 'bias': (1000,)}
  return shapes


def case_shapes(name, quick=False):
  """Nested dict of shapes for a case; ``quick`` shrinks resnet_like and few_large."""
  if name == 'tiny':
    return {'dense': {'kernel': (4, 3), 'bias': (3,)}, 'scale': (3,)}
  if name == 'many_small':  # 1000 leaves of 32x32 in a nested dict (10 x 100)
    return {f'block{i}': {f'layer{j:02d}': (32, 32) for j in range(100)} for i in range(10)}
  if name == 'resnet_like':
    return resnet50_shapes(width_div=4 if quick else 1)
  if name == 'few_large':
    n = 1024 if quick else 4096
    return {f'w{i}': (n, n) for i in range(4)}
  raise ValueError(f'unknown case {name!r}')


def _map_shapes(fn, shapes):
  return jax.tree_util.tree_map(fn, shapes, is_leaf=lambda x: isinstance(x, tuple))


def make_tree(shapes, seed, scale=1.0):
  rng = np.random.default_rng(seed)
  return _map_shapes(lambda s: jax.numpy.asarray(
      (scale * rng.standard_normal(s)).astype(np.float32)), shapes)


def count(tree):
  leaves = jax.tree_util.tree_leaves(tree)
  return len(leaves), int(sum(np.size(x) for x in leaves)), max(x.nbytes for x in leaves)


# ----------------------------------------------------------------------------- optimizers

OPTIMIZERS = ('Adam', 'Momentum', 'LAMB', 'Adafactor', 'SGD', 'WeightNorm(Adam)',
              'MultiOptimizer(Adam,Momentum)', 'from_optax(adamw)')

LR = 1e-3


def is_vector_path(path):
  """MultiOptimizer groups: BN scales and biases (Momentum) vs every other leaf (Adam)."""
  return path.rsplit('/', 1)[-1] in ('bias', 'scale')


def make_def(optim, name):
  """The legacy-API def ``name`` from ``optim`` (ours or flax 0.5.3's ``flax.optim``), or None."""
  with warnings.catch_warnings():
    warnings.simplefilter('ignore', DeprecationWarning)
    if name == 'Adam':
      return optim.Adam(learning_rate=LR, weight_decay=1e-4)
    if name == 'Momentum':
      return optim.Momentum(learning_rate=LR, beta=0.9)
    if name == 'LAMB':
      return optim.LAMB(learning_rate=LR)
    if name == 'Adafactor':
      return optim.Adafactor(learning_rate=LR)
    if name == 'SGD':
      return optim.GradientDescent(learning_rate=LR)
    if name == 'WeightNorm(Adam)':
      return optim.WeightNorm(optim.Adam(learning_rate=LR, weight_decay=1e-4))
    if name == 'MultiOptimizer(Adam,Momentum)':
      # Path-based: legacy MultiOptimizer calls filters with stand-ins, states or None.
      kernels = optim.ModelParamTraversal(lambda path, _: not is_vector_path(path))
      vectors = optim.ModelParamTraversal(lambda path, _: is_vector_path(path))
      return optim.MultiOptimizer((kernels, optim.Adam(learning_rate=LR, weight_decay=1e-4)),
                                  (vectors, optim.Momentum(learning_rate=LR, beta=0.9)))
    if name == 'from_optax(adamw)':
      if not hasattr(optim, 'from_optax'):
        return None
      import optax  # pylint: disable=g-import-not-at-top
      return optim.from_optax(optax.adamw, learning_rate=LR, weight_decay=1e-4)
  raise ValueError(f'unknown optimizer {name!r}')


def make_optax(name):
  """The same update written with public optax (what a migrated user writes)."""
  import optax  # pylint: disable=g-import-not-at-top
  if name == 'Adam':
    return optax.adamw(LR, b1=0.9, b2=0.999, eps=1e-8, weight_decay=1e-4)
  if name == 'from_optax(adamw)':
    # from_optax injects the numeric hyper-params (per-step overrides, as legacy loops use):
    # what a user writes in optax for the same is inject_hyperparams.
    return optax.inject_hyperparams(optax.adamw)(learning_rate=LR, weight_decay=1e-4)
  if name == 'WeightNorm(Adam)':
    return weight_norm_transform(optax.adamw(LR, b1=0.9, b2=0.999, eps=1e-8, weight_decay=1e-4))
  if name == 'Momentum':
    return optax.sgd(LR, momentum=0.9)
  if name == 'LAMB':
    return optax.lamb(LR, b1=0.9, b2=0.999, eps=1e-6, weight_decay=0.0)
  if name == 'Adafactor':
    return optax.adafactor(LR)
  if name == 'SGD':
    return optax.sgd(LR)
  if name == 'MultiOptimizer(Adam,Momentum)':
    labels = lambda tree: jax.tree_util.tree_map_with_path(
        lambda path, _: 'mom' if is_vector_path(jax.tree_util.keystr(path, simple=True,
                                                                       separator='/'))
        else 'adam', tree)
    return optax.multi_transform({'adam': optax.adamw(LR, weight_decay=1e-4),
                                  'mom': optax.sgd(LR, momentum=0.9)}, labels)
  raise ValueError(f'unknown optimizer {name!r}')


def weight_norm_transform(inner, wn_decay=0.0, wn_eps=1e-8):
  """Weight normalisation around ``inner``, hand-written with public optax and jax.

  Optax has no weight normalisation; this is what a migrated user would write for the legacy
  ``WeightNorm``: the state keeps the direction ``v``, the scale ``s`` (leaves with more than
  one row, all axes but the last) and ``inner``'s state of ``{'v': v, 's': s}``; an update
  takes the VJP of ``w = v * s / sqrt(sum(v**2) + eps)``, adds ``wn_decay * v``, steps
  ``inner`` and returns ``merge(v', s') - w``.
  """
  import optax  # pylint: disable=g-import-not-at-top
  jnp = jax.numpy

  def normalised(p):
    return p.ndim > 0 and p.size > p.shape[-1]

  def sum_sq(v):
    return jnp.square(v).sum(tuple(range(v.ndim - 1)), keepdims=True)

  def merge(vs, ss):
    return [v * (s * jax.lax.rsqrt(sum_sq(v) + wn_eps)) if s is not None else v
            for v, s in zip(vs, ss)]

  def init(params):
    leaves = jax.tree_util.tree_leaves(params)
    ss = [jnp.sqrt(sum_sq(p) + wn_eps) if normalised(p) else None for p in leaves]
    vs = [p / s if s is not None else p for p, s in zip(leaves, ss)]
    return vs, ss, inner.init({'v': vs, 's': ss})

  def update(grads, state, params):
    vs, ss, inner_state = state
    leaves, treedef = jax.tree_util.tree_flatten(params)
    _, vjp = jax.vjp(merge, vs, ss)
    gv, gs = vjp(jax.tree_util.tree_leaves(grads))
    gv = [g + wn_decay * v if s is not None else g for g, v, s in zip(gv, vs, ss)]
    inner_params = {'v': vs, 's': ss}
    updates, inner_state = inner.update({'v': gv, 's': gs}, inner_state, inner_params)
    new = optax.apply_updates(inner_params, updates)
    new_w = merge(new['v'], new['s'])
    return (treedef.unflatten([w - p for w, p in zip(new_w, leaves)]),
            (new['v'], new['s'], inner_state))

  return optax.GradientTransformation(init, update)


# ----------------------------------------------------------------------------- steps

def legacy_api_step(optimizer, grads):
  return optimizer.apply_gradient(grads)


def optax_step_fn(tx):
  import optax  # pylint: disable=g-import-not-at-top

  def step(params, opt_state, grads):
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state
  return step


# ----------------------------------------------------------------------------- timing

def block(x):
  return jax.block_until_ready(x)


def timed(fn):
  t0 = time.perf_counter()
  out = block(fn())
  return time.perf_counter() - t0, out


def returned(fn):
  """Seconds until ``fn()`` returns (jax dispatches asynchronously: the host-side cost)."""
  t0 = time.perf_counter()
  out = fn()
  elapsed = time.perf_counter() - t0
  block(out)
  return elapsed, out


def samples_for(case, rounds, reps):
  """``(rounds, reps)`` for timing one step of ``case``: at least 7 x 100 samples on ``tiny``.

  A tiny step takes 20-300 µs, so a mode's few samples (sized for the 0.1-2 s steps of the large
  trees) are decided by one disturbance of this shared machine: between two runs the same
  eager step measured 0.06 and 0.15 ms. Both sides (ours/optax here, legacy in the oracle)
  take the same schedule.
  """
  if case == 'tiny':
    return max(rounds, 7), max(reps, 100)
  return rounds, reps


def interleaved(fns, rounds, reps, clock=timed):
  """``{name: seconds}``: minimum over rounds of the median of ``reps`` calls, names interleaved.

  The machine is shared and noisy: each round runs every function ``reps`` times in turn, so
  all of them see the same background; the minimum of round medians is the least disturbed
  estimate.
  """
  medians = {name: [] for name in fns}
  for _ in range(rounds):
    for name, fn in fns.items():
      samples = [clock(fn)[0] for _ in range(reps)]
      medians[name].append(statistics.median(samples))
  return {name: min(values) for name, values in medians.items()}


def chained(step, *carry_and_rest, n_carry):
  """A no-argument callable running ``carry = step(*carry, *rest)``, the carry kept between calls.

  Needed for donated steps: each call consumes the previous call's outputs.
  """
  box = [tuple(carry_and_rest[:n_carry])]
  rest = tuple(carry_and_rest[n_carry:])

  def call():
    out = step(*box[0], *rest)
    box[0] = out if n_carry > 1 else (out,)
    return out
  return call


def cold_compile(make_step, args, donate):
  """``(trace+lower seconds, compile seconds, compiled)`` of a fresh jit of a fresh function.

  The step is wrapped in a new function object on every call: jax caches traces and compiled
  executables by function identity, so a second ``jit`` of the same module-level function would
  time a cache hit, not a cold compile.
  """
  step = make_step()
  jitted = jax.jit(lambda *a: step(*a), donate_argnums=donate)  # pylint: disable=unnecessary-lambda
  t0 = time.perf_counter()
  lowered = jitted.lower(*args)
  t1 = time.perf_counter()
  compiled = lowered.compile()
  t2 = time.perf_counter()
  return t1 - t0, t2 - t1, compiled
