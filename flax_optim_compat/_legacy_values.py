"""The values of the removed names that today's jax computes in a few lines (``_legacy_jax``'s
table names them by their function here: ``jax.host_ids``, ``jax.random.shuffle``,
``jnp.fix``, ``jax.device_put_sharded`` / ``device_put_replicated``, ``np.NINF``; and
``jax.lax.tie_in``, the one ``'second_argument'`` entry).

Loaded by ``_legacy_jax._sibling`` from this file, like ``_legacy_jax`` itself: it imports
nothing at load time but the standard library (each function imports jax when called).
"""

# numpy.NINF: -inf (numpy < 2.0 defined it as this float).
NINF = float('-inf')


def host_ids():
  """Legacy ``jax.host_ids()``: ``list(range(jax.process_count()))``."""
  import jax  # pylint: disable=import-outside-toplevel
  return list(range(jax.process_count()))


def _pmap_sharding(devices):
  """Today's sharding of the pmap inputs jax 0.4.13 built: row ``i`` on ``devices[i]``, a 1-d
  mesh of ``devices`` (as ``flax.jax_utils.replicate`` makes)."""
  import jax  # pylint: disable=import-outside-toplevel
  import numpy as np  # pylint: disable=import-outside-toplevel
  axis = '_device_put_sharded'
  return jax.sharding.NamedSharding(jax.sharding.Mesh(np.array(devices), (axis,)),
                                    jax.sharding.PartitionSpec(axis))


def _stacked(xs, dtype, sharding):
  """``xs`` (one value per device, of one shape and of jax's ``dtype``) stacked along a new
  leading axis, placed by ``sharding``. Host arrays are stacked on the host and sent once, each
  slice to its device; a jax array or a Python scalar is stacked by jax, which keeps a weak
  type."""
  import jax  # pylint: disable=import-outside-toplevel
  import numpy as np  # pylint: disable=import-outside-toplevel
  if all(isinstance(x, (np.ndarray, np.generic)) for x in xs):
    return jax.device_put(np.stack([np.asarray(x, dtype) for x in xs]), sharding)
  return jax.device_put(jax.numpy.stack([jax.numpy.asarray(x) for x in xs]), sharding)


def _aval(x):
  """jax's type of ``x`` (x64 off: float64 data is float32), whose repr is jax 0.4.13's text:
  ``jax.typeof``, or ``jax.core.get_aval`` on a jax before it (the floors' 0.5.1, where only
  the doctests call these functions: jax still has its own device_put_*)."""
  import jax  # pylint: disable=import-outside-toplevel
  typeof = getattr(jax, 'typeof', None)
  return typeof(x) if typeof is not None else jax.core.get_aval(x)


def device_put_sharded(shards, devices):
  """Legacy ``jax.device_put_sharded``: ``shards`` (a sequence of pytrees of one structure, one
  per device) as one pytree whose leaves stack the shards' leaves along a new leading axis,
  slice ``i`` on ``devices[i]``. Its checks and messages are jax 0.4.13's: a sequence of
  ``len(devices)`` shards whose leaves agree in shape, dtype and weak type (dtype, weak type and
  device of every slice measured against jax 0.4.13: tests/test_legacy_names.py).

  >>> import jax, numpy as np
  >>> devices = jax.local_devices()[:1]
  >>> y = device_put_sharded([{'x': np.ones(2, np.float32)}], devices)
  >>> y['x'].shape, y['x'].dtype.name
  ((1, 2), 'float32')"""
  import collections.abc  # pylint: disable=import-outside-toplevel
  import jax  # pylint: disable=import-outside-toplevel
  if not isinstance(shards, collections.abc.Sequence):
    raise ValueError('device_put_sharded `shards` input must be a sequence; '
                     f'got {type(shards)}')
  if len(shards) != len(devices):
    raise ValueError(f'len(shards) = {len(shards)} must equal len(devices) = {len(devices)}.')
  sharding = _pmap_sharding(devices)

  def put(*xs):
    avals = [_aval(x) for x in xs]
    for a, b in zip(avals[:-1], avals[1:]):
      if (a.shape, a.dtype, a.weak_type) != (b.shape, b.dtype, b.weak_type):
        raise ValueError('the shards passed to device_put_sharded must have consistent shape '
                         f'and dtype, but got {a!r} and {b!r}.')
    return _stacked(xs, avals[0].dtype, sharding)

  return jax.tree_util.tree_map(put, *shards)


def device_put_replicated(x, devices):
  """Legacy ``jax.device_put_replicated``: each leaf of ``x`` stacked ``len(devices)`` times
  along a new leading axis, slice ``i`` on ``devices[i]`` (jax 0.4.13's check and message for
  ``devices``).

  >>> import jax, jax.numpy as jnp
  >>> y = device_put_replicated(jnp.arange(3.0), jax.local_devices()[:1])
  >>> y.shape, y.tolist()
  ((1, 3), [[0.0, 1.0, 2.0]])"""
  import collections.abc  # pylint: disable=import-outside-toplevel
  import jax  # pylint: disable=import-outside-toplevel
  if not isinstance(devices, collections.abc.Sequence) or not devices:
    raise ValueError('`devices` argument to `device_put_replicated must be a non-empty '
                     'sequence.')
  sharding = _pmap_sharding(devices)
  return jax.tree_util.tree_map(
      lambda leaf: _stacked([leaf] * len(devices), _aval(leaf).dtype, sharding), x)


def shuffle(key, x, axis=0):
  """Legacy ``jax.random.shuffle``: each slice along ``axis`` shuffled on its own.

  jax 0.4.13's ``shuffle`` and today's ``permutation(..., independent=True)`` are the same
  sort-based shuffle (``jax.random.shuffle``'s own deprecation message names it)."""
  import jax  # pylint: disable=import-outside-toplevel
  return jax.random.permutation(key, x, axis=axis, independent=True)


def fix(x, out=None):
  """Legacy ``jnp.fix``: ``jnp.trunc`` of ``x / True``, which is ``x`` itself for a float (-0.0,
  infinities, NaN kept) and the float jax 0.4.13 made of an integer or bool ``x`` (weak for a
  Python int; today's ``trunc`` keeps integers). Measured against jax 0.4.13: dtype, weak type
  and bits on every dtype, with and without x64, on jax 0.10 and 0.5.1."""
  import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
  if out is not None:
    raise NotImplementedError("The 'out' argument to jnp.fix is not supported.")
  if isinstance(x, (list, tuple)):
    raise TypeError(f'fix requires ndarray or scalar arguments, got {type(x)} at position 0.')
  return jnp.trunc(jnp.true_divide(x, True))


def tie_in(x, y):  # pylint: disable=unused-argument
  """Legacy ``jax.lax.tie_in``: returns ``y`` (a no-op since jax 0.2.0)."""
  return y
