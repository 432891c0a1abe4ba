"""The rule FOM001 (_migrate/rules/fom001_create.py): its examples, in the folder beside
this file (run both ways by tests/migrate/test_migrate_equivalence.py), and its own tests."""

# Example name -> how closely its legacy and migrated runs agree.
# A def chosen in if/elif branches by a helper, created in another function, its learning
# rate set per step: every branch injected, one convert command per branch (def_branches).
# A def given its keywords by ``**kw`` from a dict assigned once and never changed
# (def_kwargs_dict): a literal value inlined, any other read from the dict.
# A create called through jax.jit (uncertainty-baselines' jft) or jax.vmap (FFGB_JAX's
# population of optimizers, then stepped under jit(vmap(...))): the rewritten create called
# through the same transform (create_jit, create_vmap).
EXAMPLES = {
    'create_adamw': '1e-6',
    'def_variable_jit': 'bit-exact',
    'def_branches': '1e-6',
    'shared_def': '1e-6',
    'def_kwargs_dict': '1e-6',
    'create_jit': 'bit-exact',
    'create_vmap': 'bit-exact',
}

import pytest  # noqa: E402

libcst = pytest.importorskip('libcst')

import jax.numpy as jnp  # noqa: E402
import optax  # noqa: E402
from flax.training import train_state  # noqa: E402

from flax_optim_compat._migrate import migrate_source  # noqa: E402


@pytest.mark.parametrize('target', ['0.05', '-1', 'target=0.05'])
def test_a_number_as_the_whole_target_is_refused(target):
  """jaxfg's ``flax.optim.Adam().create(target=0.05)``: the rewrite would be
  ``TrainState.create(params=0.05, ...)``, which flax refuses (checked below on the installed
  flax), so the create is refused (FOM115) with the object's other sites, never claimed."""
  source = ('import flax\nimport jax.numpy as jnp\n\n'
            f'opt = flax.optim.Adam().create({target})\n'
            'opt = opt.apply_gradient(jnp.asarray(1.0), learning_rate=0.1)\nprint(opt.target)\n')
  _, report = migrate_source(source, 'scalar.py')
  assert report.exit_status() == 2, report.summary(False)
  assert [(r.line, r.code, r.status) for r in report.records] == [
      (4, 'FOM115', 'refused'), (5, 'FOM115', 'refused'), (6, 'FOM115', 'refused')]
  assert 'a Python number as the whole target' in report.records[0].message
  with pytest.raises(TypeError):
    train_state.TrainState.create(apply_fn=None, params=0.05, tx=optax.adam(0.1))


@pytest.mark.parametrize('target', ['jnp.asarray(0.05)', 'jnp.zeros(3)', 'target=np.ones(2)'])
def test_a_single_array_as_the_whole_target_is_refused(target):
  """``create(jnp.asarray(0.05))``: legacy steps a bare array, but the rewrite's
  ``TrainState.apply_gradients`` fails on one (checked below on the installed flax), so the
  create is refused (FOM115) with the object's other sites, and the advice is a dict."""
  source = ('import flax\nimport jax.numpy as jnp\nimport numpy as np\n\n'
            f'opt = flax.optim.Adam().create({target})\n'
            'opt = opt.apply_gradient(opt.target * 0 + 1.0, learning_rate=0.1)\n'
            'print(opt.target)\n')
  _, report = migrate_source(source, 'array.py')
  assert report.exit_status() == 2, report.summary(False)
  assert [(r.line, r.code, r.status) for r in report.records] == [
      (5, 'FOM115', 'refused'), (6, 'FOM115', 'refused'), (6, 'FOM115', 'refused'),
      (7, 'FOM115', 'refused')], report.summary(False)
  assert 'a single array as the whole target' in report.records[0].message
  assert "create({'x': ...})" in report.records[0].message
  state = train_state.TrainState.create(apply_fn=None, params=jnp.zeros(3), tx=optax.adam(0.1))
  # flax's apply_gradients asks `OVERWRITE_WITH_GRADIENT in grads`: newer jax raises on `str in
  # Array` (the newest lane), jax 0.5.1 (the floors) answers False and the step runs, so the
  # refusal keeps the migrated program from failing on the jax users install today.
  try:
    state.apply_gradients(grads=jnp.ones(3))
  except TypeError as e:
    assert '__contains__' in str(e), e
  state = train_state.TrainState.create(apply_fn=None, params={'x': jnp.zeros(3)},
                                        tx=optax.adam(0.1))
  state.apply_gradients(grads={'x': jnp.ones(3)})  # the advice runs


TRANSFORMED = (
    'import jax\nimport jax.numpy as jnp\nfrom flax import optim\n\n\n'
    'def main(params, g, lr):\n'
    '  opt_def = {opt_def}\n'
    '  opt = {transform}(opt_def.create)({args})\n'
    '  return opt.apply_gradient(g{override})\n')


@pytest.mark.parametrize('transform', ['jax.jit', 'jax.vmap'])
@pytest.mark.parametrize('opt_def, args, override, why', [
    ('optim.Adam(0.1)', 'params', ', learning_rate=lr', 'with a learning rate set per step'),
    ('optim.Adam(0.1)', 'target=params', '', 'with other arguments than its params'),
    ("optim.MultiOptimizer((optim.ModelParamTraversal(lambda p, _: 'w' in p), optim.Adam(0.1)))",
     'params', '', 'creates a MultiOptimizer (or a focus)'),
])
def test_a_create_through_a_transform_no_example_measured_is_refused(transform, opt_def, args,
                                                                      override, why):
  """The examples measured a create through ``jax.jit`` / ``jax.vmap`` called with its params
  alone, of a built-in def without groups, whose updates set no learning rate; any other such
  create is refused (FOM107) at that line, saying which, and the file is left as it was."""
  source = TRANSFORMED.format(opt_def=opt_def, transform=transform, args=args,
                              override=override)
  new, report = migrate_source(source)
  assert report.exit_status() == 2, report.summary(False)
  (site,) = [r for r in report.records if r.line == 8 and r.status == 'refused']
  assert site.code == 'FOM107' and why in site.message, report.summary(False)
  assert [l for l in new.splitlines() if 'TODO(flax-optim-compat)' not in l] == (
      source.splitlines())
