import json

import jax
import jax.numpy as jnp
import numpy as np


def describe(tree, devices):
  """Each leaf's values, then 1.0 / 0.0 for: float32, weakly typed, row i on devices[i]."""
  out = []
  for leaf in jax.tree_util.tree_leaves(tree):
    out += [float(v) for v in np.asarray(leaf).ravel()]
    # A PmapSharding's shard is indexed by its row, a NamedSharding's by a slice of rows.
    rows = {(s.index[0] if isinstance(s.index[0], int) else s.index[0].start or 0): s.device
            for s in leaf.addressable_shards}
    on_devices = all(rows.get(i) == d for i, d in enumerate(devices))
    out += [float(leaf.dtype == jnp.float32), float(leaf.weak_type), float(on_devices),
            float(leaf.shape[0] == len(devices))]
  return out


def main():
  devices = jax.local_devices()
  n = len(devices)
  # Input rows as a pipeline makes them: float64 numpy batches, Python scalars, jax arrays.
  batches = [{'x': np.arange(3.0) / (i + 3.0), 'y': (i, 0.5 * i)} for i in range(n)]
  sharded = jax.device_put(jax.tree_util.tree_map(lambda *xs: jax.numpy.stack(xs), *batches), jax.sharding.NamedSharding(jax.sharding.Mesh(devices, ('i',)), jax.sharding.PartitionSpec('i')))
  # (divided on the host: jax 0.4.13's XLA and today's may round a division differently)
  rows = jax.device_put(jax.tree_util.tree_map(lambda *xs: jax.numpy.stack(xs), *list(jnp.asarray(np.arange(2.0 * n, dtype=np.float32).reshape(n, 2) / np.float32(7)))), jax.sharding.NamedSharding(jax.sharding.Mesh(devices, ('i',)), jax.sharding.PartitionSpec('i')))
  params = {'w': np.full((2,), 1.0 / 3.0), 'b': 0.25, 'k': jnp.asarray(2, jnp.int32)}
  replicated = jax.device_put(jax.tree_util.tree_map(lambda leaf: jax.numpy.stack([leaf] * len(devices)), params), jax.sharding.NamedSharding(jax.sharding.Mesh(devices, ('i',)), jax.sharding.PartitionSpec('i')))
  embed = jax.device_put(jax.tree_util.tree_map(lambda leaf: jax.numpy.stack([leaf] * len(jax.local_devices())), jnp.linspace(0.0, 1.0, 3)), jax.sharding.NamedSharding(jax.sharding.Mesh(jax.local_devices(), ('i',)), jax.sharding.PartitionSpec('i')))

  @jax.pmap
  def step(p, batch, row, e):
    loss = jnp.sum(p['w'] * batch['x'][:2]) + p['b'] * batch['y'][1] + jnp.sum(row * e[:2])
    return loss * p['k']

  losses = step(replicated, sharded, rows, embed)
  print(json.dumps(describe(sharded, devices) + describe(rows, devices)
                   + describe(replicated, devices) + describe(embed, devices)
                   + [float(v) for v in losses]))


if __name__ == '__main__':
  main()
