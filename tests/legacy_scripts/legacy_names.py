"""A flax 0.4/0.5-era training script that uses the jax names and flax defaults of its time.

Run unchanged by tests/test_legacy_names.py (today's jax with flax_optim_compat installed) and by
tools/oracle/gen_legacy_names.py (flax 0.5.3 on jax 0.4.13). Prints one JSON line of values;
writes its checkpoint under the current directory (a relative path, as old scripts did).
"""
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
from flax import linen as nn
from flax import optim
from flax.training import checkpoints
from jax.config import config
from jax.experimental import optimizers

config.enable_omnistaging()
config.update('jax_enable_x64', False)
out = {'x64': bool(config.jax_enable_x64)}

# --- pytrees -----------------------------------------------------------------------------
tree = {'a': jnp.arange(3.0), 'b': (jnp.ones(2), 2.0)}
out['tree_map'] = jax.tree_map(lambda x: (x * 2).tolist() if hasattr(x, 'tolist') else x * 2,
                               tree)
out['tree_multimap'] = jax.tree_multimap(lambda x, y: float(jnp.sum(x + y)), tree, tree)
out['tree_leaves'] = [np.asarray(x).tolist() for x in jax.tree_leaves(tree)]
leaves, treedef = jax.tree_flatten(tree)
out['tree_flatten'] = len(leaves)
out['tree_unflatten'] = jax.tree_unflatten(treedef, list(range(len(leaves))))
out['tree_structure'] = jax.tree_structure(tree).num_leaves
pairs = [(1, 2), (3, 4), (5, 6)]
out['tree_transpose'] = jax.tree_transpose(jax.tree_structure([0, 0, 0]),
                                           jax.tree_structure((0, 0)), pairs)
out['tree_util_multimap'] = jax.tree_util.tree_multimap(lambda x, y: x * y, [2, 3], [4, 5])
out['host'] = [jax.host_id(), jax.host_count()]

# --- jax.ops.index_* ---------------------------------------------------------------------
x = jnp.arange(5.0)
out['index_update'] = jax.ops.index_update(x, jax.ops.index[1:3], 10.0).tolist()
out['index_add'] = jax.ops.index_add(x, jax.ops.index[0], 5.0).tolist()
out['index_mul'] = jax.ops.index_mul(x, jax.ops.index[-1], 3.0).tolist()
out['index_min'] = jax.ops.index_min(x, jax.ops.index[2:], 2.5).tolist()
out['index_max'] = jax.ops.index_max(x, jax.ops.index[:2], 0.5).tolist()
out['index_numpy_input'] = jax.ops.index_update(np.zeros(3), 1, 7.0).tolist()

# --- the rest of jax ---------------------------------------------------------------------
out['clip'] = jnp.clip(jnp.exp(jnp.arange(4.0)), a_max=10.0).tolist()
out['clip_both'] = jnp.clip(jnp.arange(-2.0, 3.0), a_min=-1.0, a_max=1.0).tolist()
# jnp.fix rounds toward zero; an integer or bool array comes back as a float array.
out['fix'] = [[str(r.dtype), np.asarray(r, np.float64).tolist()] for r in (
    jnp.fix(jnp.asarray([-2.5, -0.5, 0.5, 1.7, 3.0])),
    jnp.fix(jnp.asarray([-1.5, 2.5], jnp.bfloat16)))]
out['fix_integer'] = [[str(r.dtype), np.asarray(r, np.float64).tolist()] for r in (
    jnp.fix(jnp.asarray([-3, 4])), jnp.fix(jnp.asarray([True, False])))]
out['tie_in'] = float(jax.lax.tie_in(x, jnp.float32(3.0)))
out['device_array'] = [isinstance(x, jnp.DeviceArray),
                       isinstance(x, jax.interpreters.xla.DeviceArray),
                       isinstance(np.ones(2), jnp.DeviceArray)]


# --- pmap inputs: jax.device_put_sharded / jax.device_put_replicated ----------------------
devices = jax.local_devices()
batch = jax.device_put_sharded(
    [{'image': np.full((2, 3), i, np.float32), 'label': i, 'weight': np.float64(i) / 2}
     for i in range(len(devices))], devices)
embed = jax.device_put_replicated({'w': jnp.arange(3.0), 'scale': 2.0, 'n': np.int64(3)},
                                  devices[::-1])   # row i on the i-th device from the end


def placed(a):
  """Each row's index and the index of the device that holds it; the array's type."""
  rows = []
  for shard in a.addressable_shards:
    row = shard.index[0]
    rows.append([row if isinstance(row, int) else row.start, devices.index(shard.device)])
  return [list(a.shape), str(a.dtype), bool(a.weak_type), sorted(rows), np.asarray(a).tolist()]


out['devices'] = len(devices)
out['device_put_sharded'] = jax.tree_map(placed, batch)
out['device_put_replicated'] = jax.tree_map(placed, embed)
out['device_put_pmap'] = jax.pmap(
    lambda b, e: jnp.sum(b['image']) * b['label'] + b['weight'] + jnp.sum(e['w']) * e['scale']
    + e['n'])(batch, embed).tolist()
errors = []
for bad in (lambda: jax.device_put_sharded([np.ones(2)], devices + devices),
            lambda: jax.device_put_sharded([np.ones(2), np.ones(3)], devices[:1] * 2),
            lambda: jax.device_put_sharded(iter([np.ones(2)]), devices[:1]),
            lambda: jax.device_put_replicated(np.ones(2), [])):
  try:
    bad()
    errors.append(None)
  except Exception as e:  # pylint: disable=broad-except
    errors.append([type(e).__name__, str(e)])
out['device_put_errors'] = errors
out['device_put_module'] = jax.device_put_sharded.__module__   # jax's own, or the table's


def split(key: jax.random.KeyArray):  # the annotation is evaluated at definition
  return jax.random.split(key)


out['key_annotation'] = len(split(jax.random.PRNGKey(0)))
out['shuffle'] = jax.random.shuffle(jax.random.PRNGKey(1), jnp.arange(12.0).reshape(4, 3)).tolist()
init_fun, update_fun, get_params = optimizers.sgd(0.5)
opt_state = update_fun(0, {'w': jnp.ones(2)}, init_fun({'w': jnp.ones(2)}))
out['experimental_optimizers'] = get_params(opt_state)['w'].tolist()

# --- flax of the time: FrozenDict from init, flax.optim, msgpack checkpoints ----------------
variables = nn.Dense(3).init(jax.random.PRNGKey(0), jnp.ones((1, 2)))
out['init_type'] = type(variables).__name__
unfrozen = variables.unfreeze()
out['unfreeze'] = [type(unfrozen).__name__, sorted(unfrozen['params'])]
params = {'kernel': jnp.asarray([[0.5, -1.0, 0.25], [1.5, 0.0, -0.5]]),
          'bias': jnp.asarray([0.1, 0.2, 0.3])}
data = jnp.asarray([[1.0, 2.0], [-1.0, 0.5]])
target = jnp.asarray([[1.0, 0.0, -1.0], [0.5, 0.5, 0.5]])


def loss_fn(p):
  pred = nn.Dense(3).apply({'params': p}, data)
  return jnp.mean(jnp.square(pred - target))


@jax.jit
def train_step(optimizer):
  grads = jax.grad(loss_fn)(optimizer.target)
  grads = jax.tree_map(lambda g: jnp.clip(g, a_min=-1.0, a_max=1.0), grads)
  return optimizer.apply_gradient(grads)


optimizer = optim.Momentum(learning_rate=0.1, beta=0.9).create(params)
for step in range(5):
  with jax.profiler.StepTraceContext('train', step_num=step):
    optimizer = train_step(optimizer)
out['trained'] = jax.tree_map(lambda a: np.asarray(a).tolist(), optimizer.target)
out['loss'] = float(loss_fn(optimizer.target))
checkpoints.save_checkpoint('ckpt', optimizer, step=5)
out['checkpoint_is_file'] = os.path.isfile(os.path.join('ckpt', 'checkpoint_5'))
restored = checkpoints.restore_checkpoint('ckpt', optimizer)
out['restored_step'] = int(restored.state.step)
out['restored_equal'] = bool(jax.tree_util.tree_all(
    jax.tree_multimap(lambda a, b: bool(jnp.all(a == b)), restored.target, optimizer.target)))
print(json.dumps(out, sort_keys=True))
