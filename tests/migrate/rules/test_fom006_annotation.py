"""The rule FOM006 (_migrate/rules/fom006_annotation.py): its examples, in the folder beside
this file (run both ways by tests/migrate/test_migrate_equivalence.py), and its own tests."""

# Example name -> how closely its legacy and migrated runs agree.
EXAMPLES = {
    'dataclass_field': 'bit-exact',
}

import pytest  # noqa: E402

libcst = pytest.importorskip('libcst')

from flax_optim_compat._migrate import migrate_source  # noqa: E402


def test_the_class_anywhere_in_an_annotation_is_rewritten():
  source = ('from typing import Tuple\n\nimport jax.numpy as jnp\nfrom flax import optim\n\n\n'
            'def step(o, g) -> Tuple[optim.Optimizer, jnp.ndarray]:\n'
            '  return o.apply_gradient(g), g\n\n\n'
            'def run(p, g):\n  return step(optim.Adam(0.1).create(p), g)[0].target\n')
  new, report = migrate_source(source)
  assert report.exit_status() == 1, report.summary(written=False)
  assert '-> Tuple[train_state.TrainState, jnp.ndarray]:' in new
  assert 'optim' not in new.replace('optax', '')


# Types Python evaluates when the module runs (jaxfg): the author's def class in a return
# annotation (``make_mlp() -> Tuple[MLP, flax.optim.Adam]``) becomes the rewritten def's type,
# a TypeVar's bound the rewritten optimizer's; the migrated module then runs where
# ``flax.optim`` does not exist.
EVALUATED_TYPES = {
    'def_class_annotation': (
        'from typing import Tuple\n\nimport flax\n\n\n'
        'def make(params) -> Tuple[int, flax.optim.Adam]:\n'
        '  return 0, flax.optim.Adam(learning_rate=1e-3).create(params)\n\n\n'
        'def run(params, g):\n  _, opt = make(params)\n  return opt.apply_gradient(g).target\n',
        '-> Tuple[int, optax.GradientTransformation]:'),
    'typevar_bound': (
        'from typing import TypeVar\n\nimport flax\n\n'
        "OptimizerType = TypeVar('OptimizerType', bound=flax.optim.Optimizer)\n\n\n"
        'def step(opt: OptimizerType, g) -> OptimizerType:\n  return opt.apply_gradient(g)\n\n\n'
        'def run(params, g):\n'
        '  return step(flax.optim.Adam(learning_rate=1e-3).create(params), g).target\n',
        "TypeVar('OptimizerType', bound=train_state.TrainState)"),
    # t5x's "transitional type definitions" (copied into facebookresearch/flip): the module's
    # only flax.optim names, in aliases beside the project's own classes. They were refused
    # (FOM112 "a def passed to a function", FOM104 "legacy internals"), leaving the import.
    'type_alias': (
        'from typing import Optional, Union\n\nfrom flax import optim\n\n\n'
        'class OptimizerState:\n  pass\n\n\nclass OptimizerDef:\n  pass\n\n\n'
        'OptimizerType = Optional[optim.Optimizer]\n'
        'OptimizerStateType = Union[optim.OptimizerState, OptimizerState]\n'
        'OptimizerDefType = Union[optim.OptimizerDef, OptimizerDef]\n\n\n'
        'def run(opt_def: OptimizerDefType) -> OptimizerDefType:\n  return opt_def\n',
        'OptimizerType = Optional[train_state.TrainState]\n'
        'OptimizerStateType = Union[optax.OptState, OptimizerState]\n'
        'OptimizerDefType = Union[optax.GradientTransformation, OptimizerDef]\n'),
    # ethanabrooks/jax-rl's SAC.py: the alias in a class body, read by a field's annotation
    # (it was refused FOM112, "a def passed to a function", leaving `from flax import optim`).
    'class_body_alias': (
        'from dataclasses import dataclass\nfrom typing import Union\n\nfrom flax import optim\n'
        '\n\n@dataclass\nclass Optimizers:\n  T = Union[optim.Adam, optim.Optimizer]\n'
        '  critic: T\n\n\n'
        'def run(params, g):\n  opts = Optimizers(critic=optim.Adam(1e-3).create(params))\n'
        '  opts.critic = opts.critic.apply_gradient(g)\n  return opts.critic.target\n',
        '  T = Union[optax.GradientTransformation, train_state.TrainState]\n'),
    # unified-io-inference's uio/model.py (from t5x): the class bound alone to a module-level
    # name, read nowhere or in annotations (it was refused FOM112, "a def passed to a function",
    # and the file kept `from flax import optim`).
    'bare_alias': (
        'from flax import optim\n\nOptimizer = optim.Optimizer\n\n\n'
        'def run(opt: Optimizer) -> Optimizer:\n  return opt\n',
        'Optimizer = train_state.TrainState\n'),
}


@pytest.mark.parametrize('case', sorted(EVALUATED_TYPES))
def test_a_type_evaluated_at_import_is_rewritten(case):
  source, expected = EVALUATED_TYPES[case]
  new, report = migrate_source(source, f'{case}.py')
  assert report.exit_status() == 1, report.summary(written=False)
  assert expected in new
  assert 'optim.' not in new.replace('optax', '')
  namespace = {}
  exec(compile(new, f'{case}.py', 'exec'), namespace)   # the types are evaluated here
  assert callable(namespace['run'])


def test_legacy_internals_outside_a_type_alias_stay_refused():
  """``OptimizerState`` / ``OptimizerDef`` name a type only in an alias; in a function's
  annotation beside a state built by hand they go with the body (FOM104), and a call of them
  is no type."""
  source = ('from typing import Union\n\nfrom flax import optim\n\n'
            'Made = Union[optim.OptimizerState(0, {}), int]\n\n\n'
            'def zero(state: optim.OptimizerState):\n'
            '  return optim.OptimizerState(state.step, {})\n')
  _, report = migrate_source(source)
  assert [(r.line, r.code, r.status) for r in report.records] == [
      (5, 'FOM104', 'refused'), (8, 'FOM104', 'refused'), (9, 'FOM104', 'refused')]


@pytest.mark.parametrize('use', ['Optimizer(opt_def, state, target)', 'isinstance(x, Optimizer)'])
def test_a_bare_alias_read_outside_annotations_stays_refused(use):
  """Legacy's constructor (``Optimizer(opt_def, state, target)``) has no TrainState form, and a
  read that is no annotation is left with the name it reads: the alias stays legacy, refused."""
  source = ('from flax import optim\n\nOptimizer = optim.Optimizer\n\n\n'
            f'def run(opt_def, state, target, x):\n  return {use}\n')
  new, report = migrate_source(source)
  assert [(r.line, r.code, r.status) for r in report.records] == [(3, 'FOM112', 'refused')], (
      report.summary(written=False))
  assert 'Optimizer = optim.Optimizer\n' in new
