"""The data-parallel driver shared by the fixture generator (oracle) and tests/test_pmap.py.

A small two-layer regression model is trained for a few steps on a batch of 16 examples in three
ways, each of which legacy code used:

* ``single``: one device, ``jax.jit`` step on the full batch (the reference computation);
* ``pmean``: ``flax.jax_utils.replicate(optimizer)`` and a ``jax.pmap`` step that averages the
  per-device gradients with ``lax.pmean(grads, 'batch')`` (the route the deprecation message
  recommended);
* ``replicated``: ``optimizer.replicate()`` (a ``ReplicatedOptimizer``, which averages the
  gradients itself) and a ``jax.pmap`` step that applies the per-device gradients; after the
  first steps the optimizer is checkpointed with ``to_bytes``, restored with ``from_bytes`` into
  a zeroed replicated template and trained on.

The cases are ``catalogue.PMAP``. The same functions run against the real legacy ``flax.optim``
(oracle venv: jax 0.4.13, ``python -m tools.oracle.gen_pmap``) and against ``flax_optim_compat``
(today's jax); only the modules passed in differ. The batch is
split evenly over however many devices are used, so the per-device mean gradients averaged over
the devices equal the full-batch gradient up to rounding, whatever the device count.

This module must import on both sides and imports neither library itself.
"""
import numpy as np

from tests import catalogue
from tests import oracle_specs

BATCH = 16
SHAPES = {'hidden': {'kernel': (3, 4), 'bias': (4,)}, 'out': {'kernel': (4, 2), 'bias': (2,)}}
STEPS = 3           # steps before the checkpoint
STEPS_AFTER = 2     # steps after restoring it (replicated route)


def case_names():
  return list(catalogue.PMAP)


def make_case(name):
  """The optimizer spec, the initial target and the per-step batches of case ``name``."""
  spec, lrs = catalogue.PMAP[name]
  rng = np.random.RandomState(1000 + sum(map(ord, name)))
  target = oracle_specs.make_target(rng, SHAPES)
  batches = {}
  for i in range(STEPS + STEPS_AFTER):
    x = rng.standard_normal((BATCH, 3)).astype(np.float32)
    y = rng.standard_normal((BATCH, 2)).astype(np.float32)
    batches[str(i)] = {'x': x, 'y': y}
  case = {'optimizer': spec, 'target': target, 'batches': batches}
  if lrs is not None:
    case['learning_rates'] = {str(i): np.float32(lr) for i, lr in enumerate(lrs)}
  return case


def loss_fn(jax, params, batch):
  """Mean squared error of a tanh two-layer net (full float32 matmuls, also on GPUs)."""
  jnp = jax.numpy
  dot = lambda a, b: jnp.dot(a, b, precision=jax.lax.Precision.HIGHEST)
  hidden = jnp.tanh(dot(batch['x'], params['hidden']['kernel']) + params['hidden']['bias'])
  pred = dot(hidden, params['out']['kernel']) + params['out']['bias']
  return jnp.mean((pred - batch['y']) ** 2)


def _overrides(case, i):
  lrs = case.get('learning_rates')
  return {} if lrs is None else {'learning_rate': lrs[str(i)]}


def shard(batch, n):
  """``(BATCH, ...)`` arrays -> ``(n, BATCH // n, ...)`` (one slice per device)."""
  assert BATCH % n == 0, f'{BATCH} examples cannot be split over {n} devices'
  return {k: np.reshape(v, (n, BATCH // n) + v.shape[1:]) for k, v in batch.items()}


def first_replica(tree):
  """The first device's copy of every leaf of a state dict with a leading device axis."""
  if isinstance(tree, dict):
    return {k: first_replica(v) for k, v in tree.items()}
  return None if tree is None else np.asarray(tree)[0]


def replicas_differ(tree, path=''):
  """Paths of the leaves whose device copies are not all bitwise equal to the first one."""
  if isinstance(tree, dict):
    return [p for k, v in tree.items() for p in replicas_differ(v, f'{path}/{k}')]
  if tree is None:
    return []
  arr = np.asarray(tree)
  return [] if np.array_equal(arr, np.broadcast_to(arr[:1], arr.shape)) else [path]


# ----------------------------------------------------------------------------- the routes


def _create(optim, case, jax):
  spec = case['optimizer']
  focus = {'focus': catalogue.build_traversal(spec['focus'])} if 'focus' in spec else {}
  return catalogue.build_def(optim, spec).create(
      jax.tree_util.tree_map(jax.numpy.asarray, case['target']), **focus)


def run_single(optim, case, *, jax, to_state_dict):
  """Reference: one device, the full batch, ``jax.jit``. Returns the state dict per step."""
  optimizer = _create(optim, case, jax)

  @jax.jit
  def step(opt, batch, overrides):
    grads = jax.grad(lambda p: loss_fn(jax, p, batch))(opt.target)
    return opt.apply_gradient(grads, **overrides)

  out = {'created': to_state_dict(optimizer)}
  for i in range(STEPS + STEPS_AFTER):
    optimizer = step(optimizer, case['batches'][str(i)], _overrides(case, i))
    out[str(i)] = to_state_dict(optimizer)
  return out


def run_pmean(optim, case, *, jax, jax_utils, to_state_dict, to_bytes, from_bytes, devices):
  """``jax_utils.replicate`` + ``pmap`` with ``lax.pmean`` of the grads.

  After ``STEPS`` steps the optimizer is saved the way such loops did it (``to_bytes`` of
  ``jax_utils.unreplicate(optimizer)``), restored into a zeroed unreplicated template,
  replicated again and trained on.

  Returns:
    the state dicts (leading device axis, as legacy kept it) per step, 'created_bytes' (the
    ``to_bytes`` of the freshly replicated optimizer) and 'checkpoint'.
  """
  n = len(devices)
  optimizer = _create(optim, case, jax)
  optimizer = jax_utils.replicate(optimizer, devices=devices)

  def step(opt, batch, overrides):
    grads = jax.grad(lambda p: loss_fn(jax, p, batch))(opt.target)
    grads = jax.lax.pmean(grads, 'batch')
    return opt.apply_gradient(grads, **overrides)

  p_step = jax.pmap(step, axis_name='batch', in_axes=(0, 0, None), devices=devices)
  out = {'created': to_state_dict(optimizer), 'created_bytes': to_bytes(optimizer)}
  for i in range(STEPS + STEPS_AFTER):
    if i == STEPS:
      single_copy = jax_utils.unreplicate(optimizer)
      out['checkpoint'] = to_bytes(single_copy)
      template = jax.tree_util.tree_map(jax.numpy.zeros_like, single_copy)
      optimizer = jax_utils.replicate(from_bytes(template, out['checkpoint']), devices=devices)
    optimizer = p_step(optimizer, shard(case['batches'][str(i)], n), _overrides(case, i))
    out[str(i)] = to_state_dict(optimizer)
  return out


def run_replicated(optim, case, *, jax, to_state_dict, to_bytes, from_bytes, devices,
                   checkpoint=None):
  """``optimizer.replicate()`` + ``pmap`` without explicit averaging, checkpoint, restore, go on.

  Args:
    checkpoint: bytes to restore after ``STEPS`` steps instead of this run's own ``to_bytes``
      (e.g. the oracle's checkpoint, restored into this side's replicated optimizer).

  Returns:
    the state dicts (one copy, as ``ReplicatedOptimizer`` stores it) per step, 'created_bytes'
    (``to_bytes`` of the fresh replicated optimizer), 'checkpoint' (``to_bytes`` after
    ``STEPS`` steps) and 'restored' (state dict right after the restore).
  """
  n = len(devices)
  optimizer = _create(optim, case, jax)
  optimizer = optimizer.replicate(devices=devices)

  def step(opt, batch, overrides):
    grads = jax.grad(lambda p: loss_fn(jax, p, batch))(opt.target)
    return opt.apply_gradient(grads, **overrides)

  p_step = jax.pmap(step, axis_name='batch', in_axes=(0, 0, None), devices=devices)
  out = {'created': to_state_dict(optimizer), 'created_bytes': to_bytes(optimizer)}
  for i in range(STEPS + STEPS_AFTER):
    if i == STEPS:
      out['checkpoint'] = to_bytes(optimizer)
      # Restore into a zeroed template with the same (static) def, so the values can only come
      # from the checkpoint and the compiled step is reused.
      template = jax.tree_util.tree_map(jax.numpy.zeros_like, optimizer)
      optimizer = from_bytes(template, out['checkpoint'] if checkpoint is None else checkpoint)
      out['restored'] = to_state_dict(optimizer)
    optimizer = p_step(optimizer, shard(case['batches'][str(i)], n), _overrides(case, i))
    out[str(i)] = to_state_dict(optimizer)
  return out
