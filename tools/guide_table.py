"""How far is each legacy optimizer from its closest plain optax expression? (migration_guide.md)

For every row of ROWS it runs the legacy API (``flax_optim_compat``, i.e. flax 0.5.3's
``flax.optim`` numerics) and the optax expression shown in the row side by side: the param tree
of spec 12.1 (``a/kernel f32[5,3]``, ``a/bias f32[7]``, ``scalar f32[]``, ``t3 f32[4,3,2]``,
``big f32[200,160]``, normal * 0.5), the same fresh N(0, 1) gradients each step, both jitted,
optax applied with ``optax.apply_updates``. It prints the Markdown table that
migration_guide.md contains:

* max abs: max over steps, leaves and elements of |legacy - optax|;
* max rel: max over steps and leaves of (max abs diff in the leaf / max |legacy| in the leaf);
* exact?: ``bit-exact`` (0), ``rounding`` (max rel <= 1e-5: same formula, float32 rounding of a
  different operation order) or ``**no**`` (a different formula; the row says which term);
* ``.optax_transform()``: max abs of the same legacy optimizer run as a plain optax
  transformation (``opt_def.optax_transform()`` + ``optax.apply_updates``) vs the legacy API:
  what a migration that needs legacy numerics can use instead of the closest optax.

The expressions are evaluated from the very strings printed, so the table shows what was run.

Usage, from the repository root (about a minute on 2 CPU cores)::

  python tools/guide_table.py                 # the table (stdout)
  python tools/guide_table.py --steps 5 --only Adagrad LAMB   # a quick look at some rows
"""
import argparse
import dataclasses
import os
import sys
import time
import warnings
from typing import Optional

os.environ.setdefault('JAX_PLATFORMS', 'cpu')
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # pylint: disable=g-import-not-at-top
import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
import numpy as np  # pylint: disable=g-import-not-at-top
import optax  # pylint: disable=g-import-not-at-top

import flax_optim_compat as optim  # pylint: disable=g-import-not-at-top

ROUNDING_REL = 1e-5


@dataclasses.dataclass(frozen=True)
class Row:
  legacy: str                      # evaluated: the legacy OptimizerDef
  optax: str                       # evaluated: the closest optax GradientTransformation
  why: str = ''                    # what differs, when it does
  tree: str = 'spec'               # 'spec', 'zero_leaf' (+ a zero-initialised f32[7]), 'no_scalar'
  overrides: Optional[str] = None  # evaluated: step -> apply_gradient(**overrides)


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

ROWS = [
    Row('optim.GradientDescent(0.05)', 'optax.sgd(0.05)'),
    Row('optim.Momentum(0.05, beta=0.8)', 'optax.sgd(0.05, momentum=0.8)'),
    Row('optim.Momentum(0.05, beta=0.8, weight_decay=0.01, nesterov=True)',
        'optax.chain(optax.add_decayed_weights(0.01), optax.trace(0.8, nesterov=True), '
        'optax.scale(-0.05))'),
    Row('optim.Adam(0.01, beta1=0.85, beta2=0.99, eps=1e-6)',
        'optax.adam(0.01, b1=0.85, b2=0.99, eps=1e-6)'),
    Row('optim.Adam(0.01, beta1=0.85, beta2=0.99, eps=1e-6, weight_decay=0.01)',
        'optax.adamw(0.01, b1=0.85, b2=0.99, eps=1e-6, weight_decay=0.01)'),
    Row('optim.Adam(0.01)',  # the per-step override of a learning-rate schedule
        'optax.adam(lambda count: 0.01 * 0.95 ** count)',
        overrides="lambda step: {'learning_rate': 0.01 * 0.95 ** step}"),
    Row('optim.AdaBelief(0.01, beta1=0.85, beta2=0.99, eps=1e-10, weight_decay=0.01)',
        'optax.chain(optax.scale_by_belief(0.85, 0.99, eps=1e-10, eps_root=1e-10), '
        'optax.add_decayed_weights(0.01), optax.scale(-0.01))'),
    Row('optim.AdaBelief(0.01, beta1=0.85, beta2=0.99)',
        'optax.adabelief(0.01, b1=0.85, b2=0.99)',
        why='`optax.adabelief` defaults `eps=1e-16, eps_root=1e-16` where legacy adds its one '
            '`eps` (1e-16) both inside the state and outside the sqrt: same here'),
    Row('optim.Adadelta(0.5, rho=0.85, eps=1e-5, weight_decay=0.01)',
        'optax.chain(optax.scale_by_adadelta(0.85, 1e-5), optax.add_decayed_weights(0.01), '
        'optax.scale(-0.5))'),
    Row('optim.Adadelta(0.5, rho=0.85, eps=1e-5, weight_decay=0.01)',
        'optax.adadelta(0.5, rho=0.85, eps=1e-5, weight_decay=0.01)',
        why='`optax.adadelta` adds the decay *before* the adaptive scaling (coupled); legacy '
            'subtracts `lr * wd * p` after it'),
    Row('optim.Adafactor(0.05)', 'optax.adafactor(0.05)'),
    Row('optim.Adafactor(0.05, beta1=0.9, decay_rate=0.7, clipping_threshold=1.5, '
        'weight_decay_rate=1e-3, epsilon2=2e-3)',
        'optax.chain(optax.scale_by_factored_rms(decay_rate=0.7, step_offset=0, '
        'min_dim_size_to_factor=128, epsilon=1e-30), optax.clip_by_block_rms(1.5), '
        'optax.scale(0.05), optax.scale_by_param_block_rms(2e-3), '
        'optax.ema(0.9, debias=False, accumulator_dtype=jnp.float32), '
        'optax.add_decayed_weights(1e-3), optax.scale(-1))'),
    Row('optim.Adafactor(0.05, factored=False, multiply_by_parameter_scale=False, '
        'clipping_threshold=None)',
        'optax.adafactor(0.05, factored=False, multiply_by_parameter_scale=False, '
        'clipping_threshold=None)'),
    Row('optim.Adagrad(0.1)', 'optax.adagrad(0.1, initial_accumulator_value=0.0, eps=1e-8)',
        why='legacy `g / (sqrt(G) + eps)`, optax `g * rsqrt(G + eps)`: eps inside the sqrt; no '
            'optax option reproduces it (differs wherever G is near eps)'),
    Row('optim.Adagrad(0.1, eps=0.01)',
        'optax.adagrad(0.1, initial_accumulator_value=0.0, eps=0.01)',
        why='as above'),
    Row('optim.LAMB(0.01, beta1=0.85, beta2=0.99, weight_decay=0.01, eps=1e-5)',
        'optax.lamb(0.01, b1=0.85, b2=0.99, eps=1e-5, weight_decay=0.01)'),
    Row('optim.LAMB(0.01, beta1=0.85, beta2=0.99, weight_decay=0.01, eps=1e-5)',
        'optax.lamb(0.01, b1=0.85, b2=0.99, eps=1e-5, weight_decay=0.01)',
        tree='zero_leaf',
        why='trust ratio of a zero param: legacy 0 (a zero-initialised param never moves, so '
            'max rel is infinite), optax 1'),
    Row('optim.LARS(0.1, beta=0.8, trust_coefficient=0.01, eps=1e-6, nesterov=True)',
        'optax.lars(0.1, weight_decay=0.0, trust_coefficient=0.01, eps=1e-6, momentum=0.8, '
        'nesterov=True)'),
    Row('optim.LARS(0.1, beta=0.8, weight_decay=0.01, trust_coefficient=0.01, eps=1e-6)',
        'optax.lars(0.1, weight_decay=0.01, trust_coefficient=0.01, eps=1e-6, momentum=0.8)',
        why='trust-ratio denominator: legacy `norm(g) + wd * norm(p) + eps`, optax '
            '`norm(g + wd * p) + eps`'),
    Row('optim.RMSProp(0.01, beta2=0.85)',
        'optax.rmsprop(0.01, decay=0.85, eps=1e-8, eps_in_sqrt=False)'),
    Row('optim.RMSProp(0.01, beta2=0.85, eps=1e-3)',
        'optax.rmsprop(0.01, decay=0.85, eps=1e-3)',
        why="optax's default `eps_in_sqrt=True` puts eps inside the sqrt; legacy outside"),
    Row('optim.RMSProp(0.01, beta2=0.85, eps=1e-3, centered=True)',
        'optax.rmsprop(0.01, decay=0.85, eps=1e-3, centered=True, eps_in_sqrt=False)'),
    Row('optim.WeightNorm(optim.Momentum(0.05, beta=0.8))',
        'optax.sgd(0.05, momentum=0.8)',
        tree='no_scalar',
        why='no optax counterpart: this is the plain inner optimizer, i.e. what dropping '
            'WeightNorm changes (legacy WeightNorm rejects 0-d params, so no `scalar` leaf)'),
    Row("optim.MultiOptimizer("
        "(optim.ModelParamTraversal(lambda path, _: path.endswith('/kernel')), optim.Adam(0.01)), "
        "(optim.ModelParamTraversal(lambda path, _: path.endswith('/bias')), "
        "optim.Momentum(0.05, beta=0.8)))",
        "optax.multi_transform({'kernel': optax.adam(0.01), "
        "'bias': optax.sgd(0.05, momentum=0.8), 'none': optax.set_to_zero()}, label_by_path)"),
    Row("optim.MultiOptimizer("
        "(optim.ModelParamTraversal(lambda path, _: path.endswith('/kernel')), "
        "optim.Momentum(0.05, beta=0.8)), "
        "(optim.ModelParamTraversal(lambda path, _: path.endswith('/bias')), "
        "optim.Momentum(0.005, beta=0.8)))",
        "optax.chain(optax.trace(decay=0.8), optax.masked(optax.scale(-0.05), mask_for('kernel')), "
        "optax.masked(optax.scale(-0.005), mask_for('bias')))",
        why="the masked chain of flax's optax update guide: a param matched by no mask "
            "(`scalar`, `t3`, `big`) still gets the shared `trace` as its update, i.e. moves "
            "*up* the gradient; legacy leaves it untouched. Use `multi_transform` (row above)"),
]


def spec_params(tree: str):
  """The spec 12.1 param tree (plus the row's variation)."""
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


def measure(row: Row, steps: int) -> dict:
  params = spec_params(row.tree)
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


def _legacy_cell(row: Row) -> str:
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
