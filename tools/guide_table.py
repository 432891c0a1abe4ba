"""How far is each legacy optimizer from its closest plain optax expression? (docs/optimizers.md)

For every row of ROWS (the ``guide`` rows of tests/catalogue.py) it runs the legacy API
(``flax_optim_compat``, i.e. flax 0.5.3's ``flax.optim`` numerics) and the optax expression shown
in the row side by side: the param tree ``a/kernel f32[5,3]``, ``a/bias f32[7]``, ``scalar
f32[]``, ``t3 f32[4,3,2]``, ``big f32[200,160]`` (normal * 0.5), the same fresh N(0, 1)
gradients each step, both jitted, optax applied with ``optax.apply_updates``. It prints the Markdown table that
docs/optimizers.md contains:

* max abs: max over steps, leaves and elements of |legacy - optax|;
* max rel: max over steps and leaves of (max abs diff in the leaf / max |legacy| in the leaf);
* exact?: ``bit-exact`` (0), ``rounding`` (max rel <= 1e-5: same formula, float32 rounding of a
  different operation order) or ``**no**`` (a different formula; the row says which term);
* ``.optax_transform()``: max abs of the same legacy optimizer run as a plain optax
  transformation (``opt_def.optax_transform()`` + ``optax.apply_updates``) vs the legacy API:
  what a migration that needs legacy numerics can use instead of the closest optax.

The expressions are evaluated from the very strings printed, so the table shows what was run.

Usage, from the repository root (about a minute on 2 CPU cores)::

  python tools/guide_table.py                 # the table (stdout); or python -m tools.guide_table
  python tools/guide_table.py --steps 5 --only Adagrad LAMB   # a quick look at some rows
"""
import argparse
import os
import sys
import time
import warnings

os.environ.setdefault('JAX_PLATFORMS', 'cpu')
# Run as a script (`python tools/guide_table.py`), the repository root is not on sys.path.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # pylint: disable=g-import-not-at-top
import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
import numpy as np  # pylint: disable=g-import-not-at-top
import optax  # pylint: disable=g-import-not-at-top

import flax_optim_compat as optim  # pylint: disable=g-import-not-at-top
from tests import catalogue  # pylint: disable=g-import-not-at-top

ROUNDING_REL = 1e-5


def label_by_path(params):
  """The labels for the MultiOptimizer row: the last key of each leaf's path."""
  def label(path, _):
    key = getattr(path[-1], 'key', None)
    return key if key in ('kernel', 'bias') else 'none'
  return jax.tree_util.tree_map_with_path(label, params)


def mask_for(label):
  """A mask function for ``optax.masked``: True at the leaves ``label_by_path`` calls ``label``."""
  return lambda params: jax.tree_util.tree_map(lambda l: l == label, label_by_path(params))


NAMESPACE = {'optim': optim, 'optax': optax, 'jnp': jnp, 'jax': jax,
             'label_by_path': label_by_path, 'mask_for': mask_for}

ROWS = catalogue.GUIDE_ROWS


def guide_params(tree: str):
  """The guide's param tree (see the module docstring), with the row's variation."""
  shapes = {'a': {'kernel': (5, 3), 'bias': (7,)}, 'scalar': (), 't3': (4, 3, 2),
            'big': (200, 160)}
  leaves, treedef = jax.tree_util.tree_flatten(shapes, is_leaf=lambda x: isinstance(x, tuple))
  keys = jax.random.split(jax.random.PRNGKey(0), len(leaves))
  params = treedef.unflatten(
      [0.5 * jax.random.normal(k, s, jnp.float32) for k, s in zip(keys, leaves)])
  if tree == 'zero_leaf':
    params['zero'] = jnp.zeros((7,), jnp.float32)
  elif tree == 'no_scalar':
    del params['scalar']
  return params


def gradients(params, steps):
  leaves, treedef = jax.tree_util.tree_flatten(params)
  out = []
  for step in range(steps):
    keys = jax.random.split(jax.random.fold_in(jax.random.PRNGKey(1), step), len(leaves))
    out.append(treedef.unflatten(
        [jax.random.normal(k, l.shape, jnp.float32) for k, l in zip(keys, leaves)]))
  return out


@jax.jit
def _leaf_diffs(reference, other):
  """Per leaf: (max |reference - other|, max |reference|)."""
  ref_leaves = jax.tree_util.tree_leaves(reference)
  other_leaves = jax.tree_util.tree_leaves(other)
  return (jnp.stack([jnp.max(jnp.abs(a - b)) for a, b in zip(ref_leaves, other_leaves)]),
          jnp.stack([jnp.max(jnp.abs(a)) for a in ref_leaves]))


def _optax_runner(tx):
  @jax.jit
  def step(params, opt_state, grads):
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state
  return step


def measure(row: catalogue.GuideRow, steps: int) -> dict:
  params = guide_params(row.tree)
  grads = gradients(params, steps)
  opt_def = eval(row.legacy, dict(NAMESPACE))  # pylint: disable=eval-used
  tx = eval(row.optax, dict(NAMESPACE))  # pylint: disable=eval-used
  overrides = (eval(row.overrides, dict(NAMESPACE))  # pylint: disable=eval-used
               if row.overrides else (lambda step: {}))

  legacy_step = jax.jit(lambda opt, g, ov: opt.apply_gradient(g, **ov))
  optimizer = opt_def.create(params)
  optax_step = _optax_runner(tx)
  optax_params, optax_state = params, tx.init(params)

  own = None
  if row.overrides is None:
    try:
      own_tx = opt_def.optax_transform()
    except NotImplementedError:
      own_tx = None
    if own_tx is not None:
      own_step = _optax_runner(own_tx)
      own = [params, own_tx.init(params)]

  max_abs = max_rel = own_abs = 0.0
  for step in range(steps):
    ov = {k: jnp.asarray(v, jnp.float32) for k, v in overrides(step).items()}
    optimizer = legacy_step(optimizer, grads[step], ov)
    optax_params, optax_state = optax_step(optax_params, optax_state, grads[step])
    diff, scale = jax.device_get(_leaf_diffs(optimizer.target, optax_params))
    max_abs = max(max_abs, float(diff.max()))
    rel = np.where(scale > 0, diff / np.where(scale > 0, scale, 1.0),
                   np.where(diff > 0, np.inf, 0.0))
    max_rel = max(max_rel, float(rel.max()))
    if own is not None:
      own[0], own[1] = own_step(own[0], own[1], grads[step])
      own_diff, _ = jax.device_get(_leaf_diffs(optimizer.target, own[0]))
      own_abs = max(own_abs, float(own_diff.max()))
  return {'max_abs': max_abs, 'max_rel': max_rel,
          'own_abs': own_abs if own is not None else None}


def exactness(result: dict) -> str:
  if result['max_abs'] == 0.0:
    return 'bit-exact'
  if result['max_rel'] <= ROUNDING_REL:
    return 'rounding'
  return '**no**'


def _num(x) -> str:
  if x is None:
    return 'n/a'
  return '0' if x == 0.0 else f'{x:.1e}'


def _legacy_cell(row: catalogue.GuideRow) -> str:
  cell = f'`{row.legacy}`'
  if row.overrides:
    cell += f' with `apply_gradient(grads, **({row.overrides})(step))`'
  if row.tree == 'zero_leaf':
    cell += ', plus a zero-initialised `f32[7]` leaf'
  elif row.tree == 'no_scalar':
    cell += ', without the `scalar` leaf'
  return cell


def table(rows, steps: int, log=sys.stderr) -> str:
  lines = ['| legacy (`flax.optim` = `flax_optim_compat`) | closest optax | exact? | max abs | '
           'max rel | `.optax_transform()` max abs | what differs |',
           '|---|---|---|---|---|---|---|']
  for row in rows:
    start = time.time()
    result = measure(row, steps)
    print(f'{row.legacy[:60]:60s} {exactness(result):12s} {_num(result["max_abs"])} '
          f'({time.time() - start:.1f}s)', file=log)
    assert '|' not in row.legacy + row.optax + row.why, 'a | would split the Markdown cell'
    lines.append(
        f'| {_legacy_cell(row)} | `{row.optax}` | {exactness(result)} | '
        f'{_num(result["max_abs"])} | {_num(result["max_rel"])} | '
        f'{"—" if row.overrides else _num(result["own_abs"])} | {row.why} |')
  return '\n'.join(lines)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--steps', type=int, default=50)
  parser.add_argument('--only', nargs='*', default=None,
                      help='rows whose legacy expression contains one of these words')
  args = parser.parse_args(argv)
  rows = ROWS if not args.only else [r for r in ROWS if any(w in r.legacy for w in args.only)]
  warnings.simplefilter('ignore', DeprecationWarning)  # legacy API, flax traversals
  print(f'<!-- generated by `python tools/guide_table.py` ({args.steps} steps; jax '
        f'{jax.__version__}, optax {optax.__version__}, {jax.default_backend()}) -->')
  print(table(rows, args.steps))


if __name__ == '__main__':
  main()
