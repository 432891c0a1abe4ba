"""``opt_def.plain_optax()``: a valid plain optax expression for every built-in, rendered from data;
and every catalogue optimizer against plain optax from step 0 (its guide rows' expressions and
its plain forms), the expected values of an optimizer flax 0.5.3 never had."""
import ast
import dataclasses
import functools
import inspect
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import flax_optim_compat as optim
from flax_optim_compat._expr import _tx as _expr_tx
from flax_optim_compat import _plain_optax
from flax_optim_compat._adapter import PlainOptax
from tests import catalogue
from tests import test_docs as docs_checks
from tools import guide_table

with warnings.catch_warnings():
  warnings.simplefilter('ignore', optim.FlaxOptimDeprecationWarning)
  DEFS = [
      optim.GradientDescent(0.1),
      optim.Momentum(0.1), optim.Momentum(0.1, beta=0.8, weight_decay=0.01, nesterov=True),
      optim.Adam(0.01), optim.Adam(0.01, beta1=0.85, weight_decay=0.01),
      optim.AdaBelief(0.01), optim.AdaBelief(0.01, weight_decay=0.01),
      optim.AdaBelief(0.01, beta1=0.8, beta2=0.99, eps=1e-12, weight_decay=0.01),
      optim.Adadelta(0.5), optim.Adadelta(0.5, weight_decay=0.01),
      optim.Adadelta(0.5, rho=0.8, eps=1e-5, weight_decay=0.01),
      optim.Adafactor(0.05), optim.Adafactor(0.05, beta1=0.9, weight_decay_rate=1e-3),
      optim.Adafactor(0.05, epsilon2=2e-3, clipping_threshold=None, beta1=0.9,
                      weight_decay_rate=1e-3),
      optim.Adafactor(0.05, epsilon2=2e-3, multiply_by_parameter_scale=False),
      # min_dim_size_to_factor=2: the (3, 2) param below is factored.
      optim.Adafactor(0.05, epsilon2=2e-3, clipping_threshold=0.5, min_dim_size_to_factor=2,
                      decay_rate=0.7, epsilon1=1e-20),
      optim.Adagrad(0.1), optim.Adagrad(0.1, eps=1e-6),
      optim.LAMB(0.01), optim.LAMB(0.01, weight_decay=0.01),
      optim.LAMB(0.01, beta1=0.8, beta2=0.99, weight_decay=0.01, eps=1e-5),
      optim.LARS(0.1), optim.LARS(0.1, weight_decay=0.01),
      optim.LARS(0.1, beta=0.8, trust_coefficient=0.002, eps=1e-6, nesterov=True),
      optim.RMSProp(0.01), optim.RMSProp(0.01, centered=True),
      optim.RMSProp(0.01, beta2=0.95, eps=1e-6, centered=True),
  ]


def _form(opt_def):
  """The plain form ``opt_def.plain_optax()`` renders (the first whose conditions hold)."""
  forms = opt_def.plain_optax_forms
  return _plain_optax._select(opt_def, forms, {})[0]  # pylint: disable=protected-access


def test_defs_reach_every_plain_form_of_every_builtin():
  """DEFS is written by hand to reach each plain form (the catalogue's specs, chosen for other
  checks, do not reach every one): every form of every catalogue built-in is chosen for one of
  DEFS, so a new built-in is named here until its defs are added."""
  chosen = {(type(d).__name__, _form(d)) for d in DEFS}
  missing = [f'{name}.plain_optax_forms[{i}]' for name in catalogue.BUILTINS
             for i, form in enumerate(getattr(optim, name).plain_optax_forms)
             if (name, form) not in chosen]
  assert not missing, f'no def of DEFS reaches {missing}: add one'


def _calls(expression):
  """Every ``optax.name(keyword=...)`` call of the expression, checked to be keywords only."""
  tree = ast.parse(expression, mode='eval')
  out = []
  for node in ast.walk(tree):
    if isinstance(node, ast.Call):
      assert isinstance(node.func, ast.Attribute) and ast.unparse(node.func.value) == 'optax'
      if node.func.attr != 'chain':
        assert not node.args, expression
      out.append((node.func.attr, [k.arg for k in node.keywords]))
  return out


@pytest.mark.parametrize('opt_def', DEFS, ids=repr)
def test_expression_is_valid_optax(opt_def):
  plain = opt_def.plain_optax()
  assert isinstance(plain, PlainOptax)
  assert plain.exact in ('bit-exact', '1e-6', 'not exact')
  assert (plain.difference is None) == (plain.exact != 'not exact')
  for name, keywords in _calls(plain.expression):
    parameters = inspect.signature(getattr(optax, name)).parameters
    assert set(keywords) <= set(parameters), (name, keywords)
  tx = eval(plain.expression, {'optax': optax})  # pylint: disable=eval-used
  params = {'w': jnp.ones((3, 2)), 'b': jnp.ones(2)}
  updates, _ = tx.update(params, tx.init(params), params)
  assert set(updates) == {'w', 'b'}


def test_literal_values_and_legacy_defaults_written_out():
  assert optim.LAMB(0.01).plain_optax().expression == (
      'optax.lamb(learning_rate=0.01, b1=0.9, b2=0.999, eps=1e-06, weight_decay=0)')
  assert optim.RMSProp(0.01).plain_optax().expression == (
      'optax.rmsprop(learning_rate=0.01, decay=0.9, eps=1e-08, centered=False, '
      'eps_in_sqrt=False)')
  assert optim.Adam(0.01).plain_optax().expression.startswith('optax.adam(')
  assert optim.Adam(0.01, weight_decay=0.1).plain_optax().expression.startswith('optax.adamw(')


def test_arg_sources_are_used_verbatim_and_choose_conservatively():
  plain = optim.Adam().plain_optax({'learning_rate': 'config.lr', 'beta1': '0.95'})
  assert plain.expression == 'optax.adam(learning_rate=config.lr, b1=0.95, b2=0.999, eps=1e-08)'
  # The decay is only source text: adamw is right for every value (0 included).
  plain = optim.Adam(0.1).plain_optax({'weight_decay': 'config.wd'})
  assert plain.expression.startswith('optax.adamw(') and 'weight_decay=config.wd' in plain.expression
  assert optim.Adam(0.1).plain_optax({'weight_decay': '0.0'}).expression.startswith('optax.adam(')
  plain = optim.LARS(0.1).plain_optax({'weight_decay': 'wd'})
  assert plain.exact == 'not exact' and 'weight_decay=wd' in plain.expression
  assert optim.LARS(0.1).plain_optax().exact == '1e-6'


def test_bad_arg_sources_and_schedules():
  with pytest.raises(ValueError, match="no hyper-parameter 'lr'"):
    optim.Adam(0.1).plain_optax({'lr': 'x'})
  with pytest.raises(ValueError, match="'learning_rate'.*arg_sources"):
    optim.Adam(optax.linear_schedule(1.0, 0.0, 10)).plain_optax()
  assert optim.Adam(optax.linear_schedule(1.0, 0.0, 10)).plain_optax(
      {'learning_rate': 'schedule'}).expression.startswith('optax.adam(learning_rate=schedule,')


def test_no_plain_optax_for_wrappers():
  with pytest.raises(NotImplementedError):
    optim.WeightNorm(optim.Momentum(0.1)).plain_optax()


PARAMS = {'w': jnp.array([[1.0, -2.0], [0.5, 3.0], [-1.5, 0.25]]), 'b': jnp.array([0.5, -0.75])}
GRADS = [{'w': jnp.array([[0.3, -0.1], [0.2, 0.4], [-0.5, 0.05]]), 'b': jnp.array([0.1, 0.2])},
         {'w': jnp.array([[-0.2, 0.3], [0.1, -0.4], [0.6, 0.15]]), 'b': jnp.array([-0.3, 0.05])}]


def _two_steps(tx):
  """The updates of two steps of ``tx`` from its own init on ``PARAMS``."""
  params, state, out = PARAMS, tx.init(PARAMS), []
  for grads in GRADS:
    updates, state = tx.update(grads, state, params)
    params = optax.apply_updates(params, updates)
    out.append(updates)
  return out


def test_the_cli_cases_include_unannotated_optax_transforms():
  """The Adafactor chain for epsilon2 != 1e-3 starts with optax.scale_by_factored_rms, which
  declares no return type (the `--tx` allowlist names it: _expr_optax.UNANNOTATED_TRANSFORMS)."""
  chains = [d.plain_optax().expression for d in DEFS
            if d.plain_optax().expression.startswith('optax.chain(optax.scale_by_factored_rms(')]
  assert len(chains) == 3 and any('optax.clip_by_block_rms(threshold=0.5)' in c for c in chains)
  assert (inspect.signature(optax.scale_by_factored_rms).return_annotation
          is inspect.Signature.empty)


@pytest.mark.parametrize('opt_def', DEFS, ids=repr)
def test_expression_parses_as_a_cli_tx(opt_def):
  """What `convert` prints as `load it with tx=...` is accepted back by `--tx`, and builds the
  transformation that plain optax (the expression evaluated, or `plain_optax_transform()` built
  from the same data) is: the same updates, bit for bit, over two steps."""
  expression = opt_def.plain_optax().expression
  parsed = _two_steps(_expr_tx.parse_tx(expression))
  evaluated = _two_steps(eval(expression, {'optax': optax}))  # pylint: disable=eval-used
  built = _two_steps(opt_def.plain_optax_transform())
  for step in range(len(GRADS)):
    for name in PARAMS:
      np.testing.assert_array_equal(parsed[step][name], evaluated[step][name])
      np.testing.assert_array_equal(parsed[step][name], built[step][name])


# ----------------------------------------------------------------------------- from step 0
# Every catalogue entry against public optax alone, from the same start, its updates compared
# at every step within the exactness claimed. Plain optax is the expected value, so an
# optimizer flax 0.5.3 never had (no oracle fixture) is checked against something other than
# our own code: its guide rows' optax expressions (written out in tests/catalogue.py, shown in
# docs/optimizers.md with their measured exactness) and the expression `plain_optax()` prints.
# The guide's param tree (its big leaf takes Adafactor's factored path) and fresh N(0, 1)
# gradients; a few steps, as an Adam-family step 1 is ~lr * sign(g) whatever the betas.

FROM_STEP_0_STEPS = 4
# A claimed class -> the bound on |legacy update - optax update| per leaf, relative to the
# leaf's largest optax update. The guide's 'rounding' rows (<= 1e-5 relative to the params
# over 50 steps) are `plain_optax()`'s 1e-6 class: one formula, float32 operations in another
# order.
_UPDATE_RTOL = {'bit-exact': 0.0, 'rounding': 1e-6, '1e-6': 1e-6}


def _documented_exactness():
  """``{(legacy cell, optax cell): exact? cell}`` of docs/optimizers.md's table."""
  rows = docs_checks._guide_rows()  # pylint: disable=protected-access
  return {(cells[0], cells[1]): cells[2] for cells in rows}


def _from_step_0_cases():
  """``(id, entry name, claimed class, legacy def, optax source, guide row or None)``.

  An entry flax 0.5.3 never had: every guide row not documented as **no**; one it had (the
  oracle's trajectories check its legacy API): its first such row. A built-in: one def per
  plain form its catalogue specs reach (guide rows', generic and ``optax_state`` specs), the
  'not exact' forms left out. A case takes 0.2 to 1.4 s (once the first has compiled jax's
  operations), hence one per form.
  """
  documented = _documented_exactness()
  cases = []
  for entry in catalogue.CATALOGUE:
    rows = []
    for row in entry.guide:
      cells = (guide_table._legacy_cell(row), f'`{row.optax}`')  # pylint: disable=protected-access
      claim = documented.get(cells, 'not in docs/optimizers.md')
      if claim != '**no**':
        opt_def = eval(row.legacy, dict(guide_table.NAMESPACE))  # pylint: disable=eval-used
        rows.append((f'{entry.name} guide {row.optax}', entry.name, claim, opt_def, row.optax,
                     row))
    cases += rows if not entry.in_flax_0_5_3 else rows[:1]
    if not entry.builtin:
      continue
    defs = [case[3] for case in rows]
    defs += [catalogue.build_def(optim, case.spec) for case in entry.generic]
    defs += [catalogue.build_def(optim, s) for s in entry.optax_state.values()]
    forms = set()
    for opt_def in defs:
      form = _form(opt_def)
      plain = opt_def.plain_optax()
      if plain.exact != 'not exact' and form not in forms:
        forms.add(form)
        cases.append((f'{entry.name} plain {plain.expression}', entry.name, plain.exact,
                      opt_def, plain.expression, None))
  return cases


with warnings.catch_warnings():
  warnings.simplefilter('ignore', DeprecationWarning)  # flax deprecates its traversals
  FROM_STEP_0 = _from_step_0_cases()


def _unchecked_without_oracle(entries, cases):
  """The entries flax 0.5.3 never had (no oracle fixture) that no case checks from step 0."""
  checked = {case[1] for case in cases}
  return [entry.name for entry in entries if not entry.in_flax_0_5_3 and entry.name not in checked]


def test_every_optimizer_flax_0_5_3_never_had_is_checked_from_step_0():
  """Plain optax is all such an optimizer's expected values: a catalogue entry whose guide rows
  and plain_optax() are all not exact would have none here, and is named."""
  assert {'Adam', 'AdaBelief', 'MultiOptimizer'} <= {case[1] for case in FROM_STEP_0}
  assert _unchecked_without_oracle(catalogue.CATALOGUE, FROM_STEP_0) == []
  # Adagrad's expressions are all not exact (the oracle's trajectories check it instead).
  adagrad = next(e for e in catalogue.CATALOGUE if e.name == 'Adagrad')
  assert _unchecked_without_oracle([dataclasses.replace(adagrad, in_flax_0_5_3=False)],
                                   FROM_STEP_0) == ['Adagrad']


@functools.lru_cache(maxsize=None)
def _guide_inputs(tree):
  """The guide's param tree (its row's variation) and N(0, 1) gradients, made by numpy."""
  params = jax.tree_util.tree_map(np.asarray, guide_table.guide_params(tree))
  rng = np.random.default_rng(1)
  gradients = [jax.tree_util.tree_map(lambda p: rng.standard_normal(p.shape, np.float32), params)
               for _ in range(FROM_STEP_0_STEPS)]
  return params, gradients


def _updates(new, old):
  """``new - old`` per leaf (float32; exact where the two are within a factor 2 of each other)."""
  return [np.asarray(a) - np.asarray(b)
          for a, b in zip(jax.tree_util.tree_leaves(new), jax.tree_util.tree_leaves(old))]


@pytest.mark.parametrize('case', FROM_STEP_0, ids=[case[0] for case in FROM_STEP_0])
def test_the_legacy_api_is_its_plain_optax_from_step_0(case):
  """The legacy API and plain optax (the expression's source evaluated) from the same params:
  each step's update is the same bits (bit-exact) or within the claimed class of optax's own;
  NaN is never equal. The legacy API shows its update only through the params, so both sides'
  updates are ``new - old`` params, and the 1e-6 class gets one float32 spacing of the leaf's
  params more (each side rounds ``p + u`` to the params' grid). Both sides run op by op (no
  jit: each operation rounded as written, and jax's compiled operations are shared between
  cases: a case takes 0.2 to 1.4 s, where compiling both steps took 1.5 to 1.8 s)."""
  name, _, claim, opt_def, optax_source, row = case
  assert claim in _UPDATE_RTOL, (
      f'{name}: the guide row is not in docs/optimizers.md (python tools/guide_table.py)')
  namespace = dict(guide_table.NAMESPACE)
  tx = eval(optax_source, namespace)  # pylint: disable=eval-used
  overrides = (eval(row.overrides, namespace)  # pylint: disable=eval-used
               if row and row.overrides else (lambda step: {}))
  params, gradients = _guide_inputs(row.tree if row else 'default')
  paths = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(params)[0]]
  with jax.disable_jit(), warnings.catch_warnings():
    warnings.simplefilter('ignore', optim.FlaxOptimDeprecationWarning)
    optimizer, target, opt_state = opt_def.create(params), params, tx.init(params)
    for step, grads in enumerate(gradients):
      new_optimizer = optimizer.apply_gradient(
          grads, **{k: jnp.asarray(v, jnp.float32) for k, v in overrides(step).items()})
      updates, opt_state = tx.update(grads, opt_state, target)
      new_target = optax.apply_updates(target, updates)
      for path, got, want, leaf in zip(paths, _updates(new_optimizer.target, optimizer.target),
                                       _updates(new_target, target),
                                       jax.tree_util.tree_leaves(new_target)):
        where = f'{name} (claimed {claim}), step {step + 1}, {path}'
        assert np.isfinite(got).all() and np.isfinite(want).all(), f'{where}: not finite'
        diff = float(np.max(np.abs(got - want), initial=0.0))
        largest = float(np.max(np.abs(want), initial=0.0))
        bound = _UPDATE_RTOL[claim] * largest
        if bound:
          bound += float(np.spacing(np.max(np.abs(np.asarray(leaf)), initial=0.0)))
        assert diff <= bound, (
            f'{where}: the legacy update differs from plain optax by {diff:.3g} (largest '
            f'optax update {largest:.3g}, bound {bound:.3g})')
      optimizer, target = new_optimizer, new_target
