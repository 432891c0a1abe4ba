"""Command-line expressions (``--optimizer``, ``--tx``): built as the Python they write, never evaluated.

Expected values come from writing the same thing in Python: the hand-written legacy def or the
hand-written optax expression, run on a tiny tree.
"""
import builtins
import functools
import inspect
import os
import pickle
import re
import subprocess
import sys
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import flax_optim_compat as optim
from flax_optim_compat._cli import _main as _cli
from flax_optim_compat._expr import _optax as _expr_optax
from flax_optim_compat._expr import _optimizer as _expr_optimizer
from flax_optim_compat._expr import _tx as _expr_tx
from flax_optim_compat._expr._core import ExpressionError

pytestmark = pytest.mark.filterwarnings('ignore::flax_optim_compat.FlaxOptimDeprecationWarning')

PARAMS = {'dense': {'kernel': jnp.array([[1.0, -2.0], [0.5, 3.0]]), 'bias': jnp.array([0.25, -1.0])},
          'scale': jnp.array([2.0])}
GRADS = [jax.tree_util.tree_map(lambda p, i=i: jnp.cos(p * (i + 1)) - 0.3 * i, PARAMS)
         for i in range(3)]
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _traversal(pattern):
  with warnings.catch_warnings():
    warnings.simplefilter('ignore', DeprecationWarning)
    return optim.ModelParamTraversal(lambda path, _: re.search(pattern, path) is not None)


def _assert_refused(parse, text, culprit, source):
  with pytest.raises(ExpressionError) as info:
    parse(text)
  message = str(info.value)
  assert '\n' not in message and message.isascii(), message
  assert message.startswith(f'{source} '), message
  assert culprit in message, message
  return message


# ----------------------------------------------------------------------------- --optimizer


OPTIMIZERS = [
    ('Adam(learning_rate=0.01, beta1=0.85, beta2=0.99, eps=1e-6, weight_decay=0.01)',
     lambda: optim.Adam(learning_rate=0.01, beta1=0.85, beta2=0.99, eps=1e-6, weight_decay=0.01)),
    ('optim.Adam(-1e-3)', lambda: optim.Adam(-1e-3)),
    ('flax.optim.Momentum(0.1, nesterov=True)', lambda: optim.Momentum(0.1, nesterov=True)),
    ('GradientDescent()', lambda: optim.GradientDescent()),
    ('LARS(0.1, 0.8, 0.01, 0.01, 1e-6, True)', lambda: optim.LARS(0.1, 0.8, 0.01, 0.01, 1e-6, True)),
    ('LAMB(0.01, weight_decay=0)', lambda: optim.LAMB(0.01, weight_decay=0)),
    ('RMSProp(0.01, beta2=0.85, centered=True)', lambda: optim.RMSProp(0.01, beta2=0.85, centered=True)),
    ('AdaBelief(+0.01)', lambda: optim.AdaBelief(0.01)),
    ('Adadelta(0.5, rho=0.85)', lambda: optim.Adadelta(0.5, rho=0.85)),
    ('Adagrad(0.1, eps=0.01)', lambda: optim.Adagrad(0.1, eps=0.01)),
    ('Adafactor(0.05, beta1=None, min_dim_size_to_factor=2, step_offset=3)',
     lambda: optim.Adafactor(0.05, beta1=None, min_dim_size_to_factor=2, step_offset=3)),
    ("Adafactor(0.05, beta1=0.9, dtype_momentum='bfloat16')",
     lambda: optim.Adafactor(0.05, beta1=0.9, dtype_momentum=jnp.bfloat16)),
    ('Adafactor(dtype_momentum=jnp.bfloat16)', lambda: optim.Adafactor(dtype_momentum=jnp.bfloat16)),
    ('Adafactor(dtype_momentum=jax.numpy.float16)',
     lambda: optim.Adafactor(dtype_momentum=jnp.float16)),
    ('WeightNorm(Momentum(0.1, beta=0.8), wn_decay=1e-3)',
     lambda: optim.WeightNorm(optim.Momentum(0.1, beta=0.8), wn_decay=1e-3)),
    ('WeightNorm(wrapped_optimizer=optim.Adam(1e-3))',
     lambda: optim.WeightNorm(wrapped_optimizer=optim.Adam(1e-3))),
]


@pytest.mark.parametrize('text, hand_written', OPTIMIZERS, ids=[t for t, _ in OPTIMIZERS])
def test_optimizer_equals_the_python_it_writes(text, hand_written):
  opt_def, expected = _expr_optimizer.parse_optimizer(text), hand_written()
  assert type(opt_def) is type(expected)
  assert opt_def.hyper_params == expected.hyper_params
  assert repr(opt_def) == repr(expected)
  assert vars(opt_def).keys() == vars(expected).keys()
  for name, value in vars(expected).items():
    if isinstance(value, optim.OptimizerDef):
      assert repr(getattr(opt_def, name)) == repr(value)
    else:
      assert getattr(opt_def, name) == value, name


def _step_both(opt_def, expected_def):
  ours, theirs = opt_def.create(PARAMS), expected_def.create(PARAMS)
  for grads in GRADS[:2]:
    ours, theirs = ours.apply_gradient(grads), theirs.apply_gradient(grads)
  jax.tree_util.tree_map(np.testing.assert_array_equal, ours.target, theirs.target)
  jax.tree_util.tree_map(np.testing.assert_array_equal, ours.state, theirs.state)
  return ours


def test_multi_optimizer_selects_by_regular_expression():
  text = ("MultiOptimizer((ModelParamTraversal('kernel$'), Adam(1e-2, beta1=0.8)),"
          " (optim.ModelParamTraversal('^/dense/b'), GradientDescent(0.1)))")
  opt_def = _expr_optimizer.parse_optimizer(text)
  assert _expr_optimizer.path_regexes(opt_def) == (_expr_optimizer.PathRegex('kernel$'),
                                                   _expr_optimizer.PathRegex('^/dense/b'))
  assert all(isinstance(t, optim.ModelParamTraversal) for t in opt_def.traversals)
  expected = optim.MultiOptimizer((_traversal('kernel$'), optim.Adam(1e-2, beta1=0.8)),
                                  (_traversal('^/dense/b'), optim.GradientDescent(0.1)))
  optimizer = _step_both(opt_def, expected)
  # Hand check of the selection: kernel -> Adam's fields, bias -> GradientDescent's (no
  # state), scale -> selected by no group (None, not moved).
  states = optimizer.state.param_states
  assert sorted(vars(states['dense']['kernel'])) == ['grad_ema', 'grad_sq_ema']
  assert states['scale'] is None
  np.testing.assert_array_equal(optimizer.target['scale'], PARAMS['scale'])
  np.testing.assert_allclose(optimizer.target['dense']['bias'],
                             PARAMS['dense']['bias'] - 0.1 * (GRADS[0]['dense']['bias']
                                                              + GRADS[1]['dense']['bias']),
                             rtol=1e-6)


def test_weight_norm_steps_like_the_python_it_writes():
  text = 'WeightNorm(Momentum(0.1, beta=0.8), wn_decay=1e-3)'
  _step_both(_expr_optimizer.parse_optimizer(text),
             optim.WeightNorm(optim.Momentum(0.1, beta=0.8), wn_decay=1e-3))


def test_optimizer_names_come_from_the_package():
  names = _expr_optimizer.optimizer_classes()
  public = {name for name in optim.__all__ if isinstance(getattr(optim, name), type)
            and issubclass(getattr(optim, name), optim.OptimizerDef)}
  assert set(names) == public - {'OptimizerDef', 'ReplicatedOptimizer'}
  assert all(names[name] is getattr(optim, name) for name in names)


@pytest.mark.parametrize('text, culprit', [
    ("Adam(learning_rate='fast')", "'learning_rate' takes a number or None, got the string 'fast'"),
    ('Adam([1e-3])', "'learning_rate' takes a single literal, not a list"),
    ('Adam({1: 2})', "'learning_rate' takes a single literal, not a dict"),
    ('Adam((1, 2))', 'not a tuple'),
    ('Adam(1j)', 'complex numbers are not accepted'),
    ("Adam(b'1')", 'bytes are not accepted'),
    ('Adam(...)', '... is not accepted'),
    ('Adam(beta1=None)', "Adam argument 'beta1' takes a number, got None"),
    ('Adam(True)', "'learning_rate' takes a number or None, got True"),
    ('Adam(1e999)', 'takes a finite number, got inf'),
    ('Adam(-1e999)', 'takes a finite number, got -inf'),
    ('Adam(10**3)', "only literal arguments are allowed (numbers, strings, True/False/None), not "
                    "arithmetic '10 ** 3'"),
    ('Adafactor(step_offset=99999999999999999999)', 'does not fit in 64 bits'),
    ('Momentum(nesterov="yes")', "'nesterov' takes True or False, got the string 'yes'"),
    ('Momentum(nesterov=1)', "'nesterov' takes True or False, got the number 1"),
    ('RMSProp(centered=None)', "'centered' takes True or False, got None"),
    ('Adafactor(min_dim_size_to_factor=2.5)', "'min_dim_size_to_factor' takes an integer"),
    ("Adafactor(dtype_momentum='int8')", "'dtype_momentum' takes a dtype"),
    ('WeightNorm(0.1)', "WeightNorm argument 'wrapped_optimizer' takes an optimizer such as "
                        "Adam(1e-3), got the literal '0.1'"),
    ('WeightNorm()', "missing a required argument: 'wrapped_optimizer'"),
    ('Adam(Momentum(0.1))', 'only WeightNorm takes an optimizer argument'),
    ('Adam(1, 2, 3, 4, 5, 6)', 'Adam takes at most 5 positional arguments (learning_rate, beta1, '
                               'beta2, eps, weight_decay), got 6'),
    ('Adam(learning_rate=1e-3, beta=0.9)', "Adam got an unexpected keyword argument 'beta' (it "
                                           'takes learning_rate, beta1'),
    ('Adam(1e-3, learning_rate=1e-3)', "multiple values for argument 'learning_rate'"),
    ('Adam(learning_rate=lr)', "only literal arguments are allowed (numbers, strings, "
                               "True/False/None), not the name 'lr'"),
    ('Adam(-(-1))', "not an operator '--1'"),
    ('SGD(0.1)', "unknown optimizer 'SGD'; one of Adam"),
    ('OptimizerDef(1)', "unknown optimizer 'OptimizerDef'"),
    ('ReplicatedOptimizer(Adam(1))', "unknown optimizer 'ReplicatedOptimizer'"),
    ('torch.optim.Adam(1)', "unknown optimizer 'torch.optim.Adam'"),
    ('Adam', "expected a call such as \"Adam(learning_rate=1e-3)\", got 'Adam'"),
    ('Adam(1e-3).create', 'expected a call'),
    ('Adam(learning_rate=1e-3', 'does not parse'),
    ('Adam(1e-3); Momentum(0.1)', 'does not parse'),
    ('Adam(1e-3)\nimport os', 'does not parse'),
    ('', 'is empty'),
    ('   ', 'is empty'),
    ('MultiOptimizer()', 'MultiOptimizer needs at least one'),
    ('MultiOptimizer(Adam(1))', 'MultiOptimizer group 0 must be a (ModelParamTraversal'),
    ("MultiOptimizer((Adam(1), ModelParamTraversal('a')))",
     "group 0: expected ModelParamTraversal('REGEX') first, got a call 'Adam(1)'"),
    ("MultiOptimizer((ModelParamTraversal('('), Adam(1)))",
     "group 0: ModelParamTraversal('('): not a valid regular expression (missing ), "
     'unterminated subpattern at position 0)'),
    ("MultiOptimizer((ModelParamTraversal('a'), Adam(1)), (ModelParamTraversal('b'), Adam('x')))",
     "MultiOptimizer group 1: Adam argument 'learning_rate' takes a number or None, got the "
     "string 'x'"),
    ("MultiOptimizer((ModelParamTraversal(lambda path, _: True), Adam(1)))",
     'a function cannot be given on the command line'),
    ("MultiOptimizer((ModelParamTraversal('a', 'b'), Adam(1)))", 'ModelParamTraversal takes one '
                                                                 'argument'),
    ("MultiOptimizer(focus=1)", 'no keywords'),
    ("WeightNorm(MultiOptimizer((ModelParamTraversal('a'), Adam(1))))",
     'MultiOptimizer can only be the outermost optimizer'),
])
def test_refused_optimizer(text, culprit):
  _assert_refused(_expr_optimizer.parse_optimizer, text, culprit, '--optimizer')


# ----------------------------------------------------------------------------- --tx


def _labels(params):
  return {'dense': {'kernel': 'decay', 'bias': 'plain'}, 'scale': 'frozen'}


TX = [
    ('optax.adam(1e-3)', lambda: optax.adam(1e-3)),
    ('optax.adamw(learning_rate=-1e-3, b1=0.8, weight_decay=1e-4)',
     lambda: optax.adamw(learning_rate=-1e-3, b1=0.8, weight_decay=1e-4)),
    ('optax.sgd(0.1)', lambda: optax.sgd(0.1)),
    ('optax.sgd(0.1, momentum=0.9, nesterov=True)', lambda: optax.sgd(0.1, momentum=0.9,
                                                                     nesterov=True)),
    ('optax.lamb(1e-2, weight_decay=0.0)', lambda: optax.lamb(1e-2, weight_decay=0.0)),
    ('optax.lars(0.1, weight_decay=0.01, trust_coefficient=0.01, eps=1e-6, momentum=0.8)',
     lambda: optax.lars(0.1, weight_decay=0.01, trust_coefficient=0.01, eps=1e-6, momentum=0.8)),
    ('optax.rmsprop(0.01, decay=0.85, eps=1e-3, eps_in_sqrt=False, centered=True)',
     lambda: optax.rmsprop(0.01, decay=0.85, eps=1e-3, eps_in_sqrt=False, centered=True)),
    ('optax.adagrad(0.1, initial_accumulator_value=0.1, eps=0.01)',
     lambda: optax.adagrad(0.1, initial_accumulator_value=0.1, eps=0.01)),
    ('optax.adafactor(0.05, min_dim_size_to_factor=1, decay_rate=0.7)',
     lambda: optax.adafactor(0.05, min_dim_size_to_factor=1, decay_rate=0.7)),
    ('optax.adafactor(0.05, multiply_by_parameter_scale=True)',
     lambda: optax.adafactor(0.05, multiply_by_parameter_scale=True)),
    ('optax.adabelief(1e-2, b1=0.85, eps=1e-10)', lambda: optax.adabelief(1e-2, b1=0.85,
                                                                         eps=1e-10)),
    ('optax.adadelta(0.5, rho=0.85, eps=1e-5)', lambda: optax.adadelta(0.5, rho=0.85, eps=1e-5)),
    ('optax.noisy_sgd(0.1, key=3)', lambda: optax.noisy_sgd(0.1, key=3)),
    ('optax.chain(optax.scale_by_adam(b1=0.85, b2=0.99), optax.add_decayed_weights(0.01), '
     'optax.scale_by_learning_rate(0.01))',
     lambda: optax.chain(optax.scale_by_adam(b1=0.85, b2=0.99), optax.add_decayed_weights(0.01),
                         optax.scale_by_learning_rate(0.01))),
    ('optax.chain(optax.trace(decay=0.9, nesterov=True), optax.scale(-0.1))',
     lambda: optax.chain(optax.trace(decay=0.9, nesterov=True), optax.scale(-0.1))),
    ('optax.chain(optax.identity(), optax.set_to_zero())',
     lambda: optax.chain(optax.identity(), optax.set_to_zero())),
    ('optax.scale_by_adam(mu_dtype=jnp.bfloat16)',
     lambda: optax.scale_by_adam(mu_dtype=jnp.bfloat16)),
    ('optax.adam(optax.exponential_decay(1e-2, transition_steps=1, decay_rate=0.5))',
     lambda: optax.adam(optax.exponential_decay(1e-2, transition_steps=1, decay_rate=0.5))),
    ('optax.sgd(optax.piecewise_constant_schedule(0.1, {1: 0.5, 2: 0.1}))',
     lambda: optax.sgd(optax.piecewise_constant_schedule(0.1, {1: 0.5, 2: 0.1}))),
    ('optax.sgd(optax.join_schedules([optax.constant_schedule(0.1), '
     'optax.linear_schedule(0.2, 0.0, 4)], [1]))',
     lambda: optax.sgd(optax.join_schedules([optax.constant_schedule(0.1),
                                             optax.linear_schedule(0.2, 0.0, 4)], [1]))),
    ('optax.inject_hyperparams(optax.adam, hyperparam_dtype=jnp.float32)(learning_rate=1e-3)',
     lambda: optax.inject_hyperparams(optax.adam, hyperparam_dtype=jnp.float32)(
         learning_rate=1e-3)),
    ("optax.inject_hyperparams(optax.sgd, hyperparam_dtype='float32')(0.1, 0.9)",
     lambda: optax.inject_hyperparams(optax.sgd, hyperparam_dtype=jnp.float32)(0.1, 0.9)),
    ('optax.inject_hyperparams(optax.adamw, hyperparam_dtype=jax.numpy.float32)('
     'learning_rate=optax.constant_schedule(0.0), weight_decay=1e-4)',
     lambda: optax.inject_hyperparams(optax.adamw, hyperparam_dtype=jnp.float32)(
         learning_rate=optax.constant_schedule(0.0), weight_decay=1e-4)),
    ("optax.inject_hyperparams(optax.sgd, static_args=('nesterov',))(0.1, 0.9, nesterov=True)",
     lambda: optax.inject_hyperparams(optax.sgd, static_args=('nesterov',))(0.1, 0.9,
                                                                          nesterov=True)),
    ("optax.multi_transform({'decay': optax.adamw(1e-2, weight_decay=0.1), "
     "'plain': optax.sgd(0.1), 'frozen': optax.set_to_zero()}, "
     "{'dense': {'kernel': 'decay', 'bias': 'plain'}, 'scale': 'frozen'})",
     lambda: optax.multi_transform({'decay': optax.adamw(1e-2, weight_decay=0.1),
                                    'plain': optax.sgd(0.1), 'frozen': optax.set_to_zero()},
                                   _labels)),
    ("optax.adamw(1e-2, weight_decay=0.1, mask={'dense': {'kernel': True, 'bias': False}, "
     "'scale': False})",
     lambda: optax.adamw(1e-2, weight_decay=0.1, mask={'dense': {'kernel': True, 'bias': False},
                                                       'scale': False})),
    ("optax.chain(optax.masked(optax.add_decayed_weights(0.1), {'dense': True, 'scale': False}), "
     'optax.sgd(0.1))',
     lambda: optax.chain(optax.masked(optax.add_decayed_weights(0.1),
                                      {'dense': True, 'scale': False}), optax.sgd(0.1))),
    ("optax.multi_transform({'all': optax.sgd(0.1)}, 'all')",
     lambda: optax.multi_transform({'all': optax.sgd(0.1)}, lambda _: 'all')),
]


def _assert_equal(actual, expected):
  if jax.dtypes.issubdtype(expected.dtype, jax.dtypes.prng_key):  # noisy_sgd's key
    actual, expected = jax.random.key_data(actual), jax.random.key_data(expected)
  assert actual.dtype == expected.dtype
  np.testing.assert_array_equal(actual, expected)


@pytest.mark.parametrize('text, hand_written', TX, ids=[t[:60] for t, _ in TX])
def test_tx_equals_the_python_it_writes(text, hand_written):
  tx, expected = _expr_tx.parse_tx(text), hand_written()
  assert isinstance(tx, optax.GradientTransformation)
  state, expected_state = tx.init(PARAMS), expected.init(PARAMS)
  assert jax.tree_util.tree_structure(state) == jax.tree_util.tree_structure(expected_state)
  params = PARAMS
  for grads in GRADS:
    updates, state = tx.update(grads, state, params)
    expected_updates, expected_state = expected.update(grads, expected_state, params)
    jax.tree_util.tree_map(_assert_equal, (updates, state), (expected_updates, expected_state))
    params = optax.apply_updates(params, updates)


@pytest.mark.parametrize('text, canonical', [
    ('optax.adam( 1e-3 )', 'optax.adam(0.001)'),
    ("optax.inject_hyperparams(optax.sgd, hyperparam_dtype='float32')(learning_rate=.1)",
     'optax.inject_hyperparams(optax.sgd, hyperparam_dtype=jnp.float32)(learning_rate=0.1)'),
    ('optax.inject_hyperparams(optax.sgd, hyperparam_dtype=jax.numpy.float32)(0.1)',
     'optax.inject_hyperparams(optax.sgd, hyperparam_dtype=jnp.float32)(0.1)'),
    ('optax.chain(optax.scale(-1), optax.trace(decay=0.9))',
     'optax.chain(optax.scale(-1), optax.trace(decay=0.9))'),
    ('optax.multi_transform({"a": optax.sgd(0.1)}, {"dense": "a", "scale": "a"})',
     "optax.multi_transform({'a': optax.sgd(0.1)}, {'dense': 'a', 'scale': 'a'})"),
])
def test_canonical_tx(text, canonical):
  assert _expr_tx.canonical_tx(text) == canonical
  # The canonical text is itself accepted and builds the same structure.
  assert (jax.tree_util.tree_structure(_expr_tx.parse_tx(canonical).init(PARAMS))
          == jax.tree_util.tree_structure(_expr_tx.parse_tx(text).init(PARAMS)))


def test_optax_defaults_are_accepted_where_its_annotation_disagrees():
  """optax 0.2.5 declares adafactor(multiply_by_parameter_scale: float = True)."""
  def transform(scale: float = True, rate: float = None, n: int = 3, flag: bool = False):
    del scale, rate, n, flag
  params = inspect.signature(transform).parameters
  assert _expr_optax.parameter_accepts(params['scale']).boolean
  assert _expr_optax.parameter_accepts(params['rate']).none
  assert not _expr_optax.parameter_accepts(params['n']).boolean  # a default of its own kind: as is
  assert not _expr_optax.parameter_accepts(params['flag']).real


def test_tx_names_come_from_optax():
  names = _expr_optax.optax_names()
  for name in ('adam', 'adamw', 'sgd', 'lamb', 'lars', 'rmsprop', 'adagrad', 'adafactor',
               'adabelief', 'adadelta', 'noisy_sgd', 'chain', 'multi_transform', 'scale_by_adam',
               'add_decayed_weights', 'scale', 'scale_by_learning_rate', 'trace', 'set_to_zero',
               'identity', 'inject_hyperparams'):
    assert name in names['transformations'], name
  for name in ('constant_schedule', 'exponential_decay', 'linear_schedule',
               'piecewise_constant_schedule', 'warmup_cosine_decay_schedule'):
    assert name in names['schedules'], name
  for name in names['transformations'] + names['schedules']:
    assert not name.startswith('_') and callable(getattr(optax, name))
  for name in ('global_norm', 'apply_updates', 'softmax_cross_entropy', 'tree_map_params'):
    assert name not in names['transformations'] + names['schedules']


@pytest.mark.parametrize('name', _expr_optax.UNANNOTATED_TRANSFORMS)
def test_listed_unannotated_transforms_are_optax_transforms(name):
  """A listed name exists in the installed optax, --tx takes it, and it builds a transformation."""
  assert name in _expr_optax.optax_names()['transformations']
  assert isinstance(getattr(optax, name)(), optax.GradientTransformation)
  assert isinstance(_expr_tx.parse_tx(f'optax.{name}()'), optax.GradientTransformation)


def _unannotated_public_optax_functions():
  """``{name: function}``: optax's public functions (or partials) without a return annotation."""
  found = {}
  for name in dir(optax):
    if name.startswith('_'):
      continue
    with warnings.catch_warnings():
      warnings.simplefilter('ignore')   # reading a deprecated alias may warn
      fn = getattr(optax, name)
    if not (inspect.isfunction(fn) or isinstance(fn, functools.partial)):
      continue   # classes, typing aliases, jitted helpers
    if inspect.signature(fn).return_annotation is inspect.Signature.empty:
      found[name] = fn
  return found


def test_every_unannotated_optax_transform_is_listed():
  """Every unannotated public optax function that builds a GradientTransformation from its
  defaults is on the list, so a new one in optax is not silently refused by --tx."""
  builds_a_transform = []
  for name, fn in _unannotated_public_optax_functions().items():
    parameters = inspect.signature(fn).parameters.values()
    if any(p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
           for p in parameters):
      continue   # needs arguments (optax.monitor: functions; bias_correction: arrays)
    if isinstance(fn(), optax.GradientTransformation):
      builds_a_transform.append(name)
  assert sorted(builds_a_transform) == sorted(_expr_optax.UNANNOTATED_TRANSFORMS)


@pytest.mark.parametrize('text, culprit', [
    ('optax.adam(1e-3, beta1=0.9)', "optax.adam got an unexpected keyword argument 'beta1' (it "
                                    'takes learning_rate, b1, b2'),
    ('optax.adam()', "optax.adam: missing a required argument: 'learning_rate'"),
    ('optax.scale(1, 2)', 'optax.scale takes at most 1 positional arguments (step_size), got 2'),
    ("optax.adam('fast')", "optax.adam argument 'learning_rate' takes a number or an optax "
                           "schedule, got the string 'fast'"),
    ('optax.adam(None)', "'learning_rate' takes a number or an optax schedule, got None"),
    ('optax.adam([1e-3])', "'learning_rate' takes a number or an optax schedule, not a list"),
    ('optax.adam(1j)', 'complex numbers are not accepted'),
    ("optax.adam(b'1')", 'bytes are not accepted'),
    ('optax.adam(1e999)', 'takes a finite number, got inf'),
    ('optax.sgd(0.1, nesterov=1)', "'nesterov' takes True or False, got the number 1"),
    ('optax.adafactor(0.1, min_dim_size_to_factor=1.5)', "'min_dim_size_to_factor' takes an "
                                                         'integer, got the number 1.5'),
    pytest.param("optax.scale_by_lion(mode='fast')", "'mode' takes 'hard' or 'smooth' or 'refined'",
                 marks=pytest.mark.skipif(  # typing.Literal choices; optax >= 0.2.6
                     'mode' not in inspect.signature(optax.scale_by_lion).parameters,
                     reason='this optax has no scale_by_lion(mode=...)')),
    ("optax.inject_hyperparams(optax.adam, hyperparam_dtype='int8')(1e-3)",
     "the string 'int8' is not one of bfloat16, float16, float32, float64"),
    ('optax.inject_hyperparams(optax.adam)(beta1=0.9)',
     "optax.inject_hyperparams(optax.adam) got an unexpected keyword argument 'beta1'"),
    ('optax.inject_hyperparams(optax.adam(1e-3))(1e-3)', 'takes an optax transformation '
                                                         'function such as optax.adam (not '
                                                         "called), got a call 'optax.adam(0.001)'"),
    ('optax.inject_hyperparams(optax.adam)', 'must be called with the hyper-parameters'),
    ('optax.inject_hyperparams(optax.chain)(optax.sgd(1))', 'optax transformation function'),
    ('optax.adam(1e-3)(2)', "only optax.inject_hyperparams(...)(...) may be called twice"),
    ('optax.adam', 'optax.adam must be called'),
    ('optax.chain(optax.sgd)', 'optax.sgd must be called'),
    ('optax.adam(1e-3).init', "got the attribute 'optax.adam(0.001).init'"),
    ('optax.exponential_decay(1e-3, 10, 0.5)', 'expected an optax transformation, got the '
                                               'schedule'),
    ('optax.chain(optax.exponential_decay(1e-3, 10, 0.5))',
     "optax.chain argument *args takes an optax transformation, not the optax schedule"),
    ('optax.chain(optax.sgd(1), 0.1)', 'optax.chain argument *args takes an optax '
                                       'transformation, got the number 0.1'),
    ('optax.adam(optax.scale(1))', "'learning_rate' takes a number or an optax schedule, not "
                                   "the optax transformation 'optax.scale(1)'"),
    ('optax.adam(1e-3, b1=optax.constant_schedule(0.9))', "'b1' takes a number, not the optax "
                                                          'schedule'),
    ('optax.global_norm(1)', 'optax.global_norm is not an optax transformation or schedule'),
    ('optax._src.alias.adam(1)', "'optax._src.alias.adam' is not an optax transformation"),
    ('optax.adam.__globals__', 'expected an optax transformation'),
    ('jax.numpy.zeros(3)', "'jax.numpy.zeros' is not an optax transformation"),
    ('adam(1e-3)', "'adam' is not an optax transformation"),
    ('optax.masked(optax.sgd(1), lambda p: p)', "only literals and optax calls are allowed, not a "
                                                "lambda 'lambda p: p'"),
    ('optax.scale_by_schedule(lambda count: 1.0)', 'not a lambda'),
    ('optax.sgd(eval("1"))', "only literals and optax calls are allowed, not a call "
                             "\"eval('1')\""),
    ("optax.multi_transform({'a': optax.sgd(1)}, {'w': 'b'})",
     "optax.multi_transform: label 'b' has no transformation (the transforms are 'a')"),
    ("optax.multi_transform({'a': optax.sgd(1)}, {'w': 1.5})", 'a label must be a string'),
    ("optax.multi_transform({'a': 1.0}, 'a')", 'takes an optax transformation, got the number'),
    ("optax.multi_transform({'a': optax.sgd(1)}, lambda p: 'a')", 'not a lambda'),
    ("optax.sgd(optax.piecewise_constant_schedule(0.1, {'a': 0.5}))",
     "a key must be an integer, got the string 'a'"),
    ('optax.sgd(*[1])', 'no *args / **kwargs'),
    ("optax.sgd(**{'learning_rate': 1})", 'no *args / **kwargs'),
    ('optax.sgd(-(-1))', "not an operator '--1'"),
    ('optax.sgd(1 if True else 2)', 'not a conditional expression'),
    ('optax.adam(1e-3', 'does not parse'),
    ('', 'is empty'),
])
def test_refused_tx(text, culprit):
  _assert_refused(_expr_tx.parse_tx, text, culprit, '--tx')


def test_optax_errors_are_one_line():
  """optax's own argument checks, raised while building, come back as one line."""
  message = _assert_refused(_expr_tx.parse_tx, "optax.adam(1e-3, mu_dtype='float7')",
                            "optax.adam: TypeError: data type 'float7' not understood", '--tx')
  assert 'Traceback' not in message


# ----------------------------------------------------------------------------- hostile strings


HOSTILE = [
    '(' * 100_000,
    '(' * 50_000 + ')' * 50_000,
    '[' * 2000 + ']' * 2000,
    'Adam(' * 30 + ')' * 30,
    '-' * 100_000 + '1',
    '-' * 3000 + '1',
    'Adam(' + '-' * 990 + '1)',
    'a' + '.a' * 50_000,
    'Adam(1)' + '.a' * 990,
    '1' + '+1' * 50_000,
    'Adam(' + '+'.join(['1'] * 990) + ')',
    'not ' * 50_000 + '1',
    'Adam(learning_rate=' + '{"a": ' * 20 + '1' + '}' * 20 + ')',
    "__import__('os').system('touch pwned')",
    "Adam(__import__('os').system('touch pwned'))",
    "optax.adam(__import__('os').system('touch pwned'))",
    "optax.adam(1e-3).__class__.__init__.__globals__['os'].system('touch pwned')",
    "optax.chain.__globals__['__builtins__']['exec']('open(\"pwned\", \"w\")')",
    "Adam(1e-3).__class__.__base__.__subclasses__()",
    "Adam((lambda: __import__('os').system('touch pwned'))())",
    "Adam([__import__('os') for _ in 'a'])",
    "Adam(f\"{__import__('os').system('touch pwned')}\")",
    "Adam(*__import__('os').system('touch pwned'))",
    "Adam(**__import__('os').environ)",
    "Adam(learning_rate=(pwned := 1))",
    "optax.sgd(open('pwned', 'w'))",
    "optax.multi_transform({'a': optax.sgd(1)}, __import__('os').system('touch pwned'))",
    "MultiOptimizer((ModelParamTraversal(__import__('os').system('touch pwned')), Adam(1)))",
    "MultiOptimizer((ModelParamTraversal('(' * 5000), Adam(1)))",
    "MultiOptimizer((ModelParamTraversal('" + '(' * 3000 + ')' * 3000 + "'), Adam(1)))",
    'Adam(\udcff\udcfe)',
    'optax.adam(\udcff)',
    "Adam('\udcff')",
    'Adam(\ud800)',
    'Adam(1e-3)\x00',
    '\udcc3(1)',
]


@pytest.mark.parametrize('parse', [_expr_optimizer.parse_optimizer, _expr_tx.parse_tx],
                         ids=['optimizer', 'tx'])
def test_hostile_strings_never_evaluate(parse, tmp_path, monkeypatch):
  def never(*args, **kwargs):
    raise AssertionError('an expression reached eval/exec')

  monkeypatch.chdir(tmp_path)
  monkeypatch.setattr(builtins, 'eval', never)
  monkeypatch.setattr(builtins, 'exec', never)
  for text in HOSTILE:
    with pytest.raises(ExpressionError) as info:
      parse(text)
    message = str(info.value)
    assert '\n' not in message and message.isascii() and len(message) < 600, (text[:40], message)
    message.encode('utf-8')   # printable on any stream
  assert os.listdir(tmp_path) == []


def test_size_limits_are_checked_before_parsing():
  parse_optimizer, parse_tx = _expr_optimizer.parse_optimizer, _expr_tx.parse_tx
  assert 'is 100000 characters long; at most 4096' in _message(parse_optimizer, '(' * 100_000)
  assert 'nests brackets more than 24 deep' in _message(parse_optimizer, 'Adam(' * 30)
  assert 'has more than 1000 tokens' in _message(parse_tx, '-' * 3000 + '1')
  assert 'nests more than 64 levels deep' in _message(parse_tx, 'optax.sgd(' + '-' * 100 + '1)')
  # Real expressions are far from the limits: a MultiOptimizer of 20 groups.
  groups = ', '.join(f"(ModelParamTraversal('^/layer_{i}/'), Adam(1e-3, beta1=0.9, "
                     'weight_decay=1e-4))' for i in range(20))
  assert len(_expr_optimizer.parse_optimizer(f'MultiOptimizer({groups})').sub_optimizers) == 20


def _message(parse, text):
  with pytest.raises(ExpressionError) as info:
    parse(text)
  return str(info.value)


def test_undecodable_bytes_are_named():
  message = _message(_expr_optimizer.parse_optimizer, 'Adam(0.1\udcff)')
  assert message == ("--optimizer 'Adam(0.1\\udcff)': is not valid UTF-8 text (the undecodable "
                     'byte 0xff at position 8).')


def test_errors_are_value_errors_and_cli_usage_errors():
  assert issubclass(ExpressionError, ValueError)
  assert issubclass(ExpressionError, _cli.UsageError)
  assert _cli.parse_optimizer is _expr_optimizer.parse_optimizer


# ----------------------------------------------------------------------------- PathRegex


def test_path_regex_is_a_value():
  regex = _expr_optimizer.PathRegex('kernel$')
  assert regex('/dense/kernel') and regex('/dense/kernel', object())
  assert not regex('/dense/kernel_2') and not regex('/dense/bias')
  assert regex.pattern == 'kernel$'
  assert regex == _expr_optimizer.PathRegex('kernel$') != _expr_optimizer.PathRegex('bias$')
  assert hash(regex) == hash(_expr_optimizer.PathRegex('kernel$'))
  assert pickle.loads(pickle.dumps(regex)) == regex
  assert repr(regex) == "PathRegex('kernel$')"
  with pytest.raises(AttributeError):
    regex.pattern = 'x'
  with pytest.raises(re.error):
    _expr_optimizer.PathRegex('(')


def test_path_is_the_traversal_path():
  """The pattern is searched in the path ModelParamTraversal builds: '/' + keys joined by '/'."""
  opt_def = _expr_optimizer.parse_optimizer(
      "MultiOptimizer((ModelParamTraversal('^/dense/(kernel|bias)$'), GradientDescent(1.0)))")
  selected = list(opt_def.traversals[0].iterate(
      {'dense': {'kernel': 1, 'bias': 2, 'kernel_2': 3}, 'dense2': {'kernel': 4}}))
  assert sorted(selected) == [1, 2]


def test_path_regexes_only_for_regex_traversals():
  hand_written = optim.MultiOptimizer((_traversal('kernel'), optim.Adam(1e-3)))
  assert _expr_optimizer.path_regexes(hand_written) is None
  assert _expr_optimizer.path_regexes(optim.Adam(1e-3)) is None
  with pytest.raises(TypeError, match='RegexTraversal takes a PathRegex'), warnings.catch_warnings():
    warnings.simplefilter('ignore', DeprecationWarning)
    _expr_optimizer.RegexTraversal('kernel')


# ----------------------------------------------------------------------------- the CLI


@pytest.mark.parametrize('text, culprit', [
    ("Adam(learning_rate='fast')", "got the string 'fast'"),
    ('WeightNorm(0.1)', "'wrapped_optimizer' takes an optimizer"),
    ('(' * 100_000, 'is 100000 characters long'),
    ('Adam(\udcff)', 'not valid UTF-8 text (the undecodable byte 0xff'),
    ("MultiOptimizer((ModelParamTraversal('['), Adam(1)))", 'not a valid regular expression'),
])
@pytest.mark.parametrize('command', ['convert', 'diff'])
def test_cli_refuses_before_reading(capsys, tmp_path, text, culprit, command):
  missing = str(tmp_path / 'no-such-checkpoint')
  if command == 'convert':
    argv = ['convert', missing, '--optimizer', text, '--to', 'optax', '--out',
            str(tmp_path / 'out')]
  else:
    argv = ['diff', missing, missing, '--optimizer', text]
  assert _cli.main(argv) == 2
  out, err = capsys.readouterr()
  assert out == '' and err.count('\n') == 1 and err.isascii(), err
  assert err.startswith(f'flax-optim-compat {command}: error: --optimizer '), err
  assert culprit in err and 'no-such-checkpoint' not in err, err
  assert os.listdir(tmp_path) == []


@pytest.mark.parametrize('optimizer', [b'Adam(0.1\xff)', b'(' * 100_000])
def test_console_command_refuses_in_one_line(tmp_path, optimizer):
  """The real command line: argv bytes that are not UTF-8 (decoded with surrogateescape)."""
  env = dict(os.environ, PYTHONPATH=REPO, PYTHONIOENCODING='utf-8')
  result = subprocess.run(
      [sys.executable, '-m', 'flax_optim_compat', 'convert', str(tmp_path / 'nope'),
       '--optimizer', optimizer, '--to', 'optax', '--out', str(tmp_path / 'out')],
      capture_output=True, env=env, cwd=tmp_path, timeout=120, check=False)
  assert result.returncode == 2, result
  assert result.stdout == b''
  err = result.stderr.decode('ascii')
  assert err.count('\n') == 1 and 'Traceback' not in err, err
  assert err.startswith('flax-optim-compat convert: error: --optimizer '), err
  assert 'nope' not in err
  assert os.listdir(tmp_path) == []


def test_the_probe_reads_tx_text_by_the_parsers_rule():
  """The --tx text is read by one rule (``_expression_syntax``): the probe refuses what the
  parser refuses for size, and reads ``inject_hyperparams`` however its factory is passed."""
  from flax_optim_compat import _expression_syntax
  from flax_optim_compat._checkpoint import _probe
  too_long = 'optax.adam(' + '0.1 + ' * 800 + '0.1)'   # over 4096 characters
  with pytest.raises(ExpressionError, match='characters long; at most 4096'):
    _expr_tx.parse_tx(too_long)
  assert _expression_syntax.calls(too_long) is None
  assert _probe.learning_rate_of(too_long) == ('unknown', None)
  for text in ('optax.inject_hyperparams(optax.adam)(learning_rate=0.1, b2=0.99)',
               'optax.inject_hyperparams(inner_factory=optax.adam)(learning_rate=0.1, b2=0.99)'):
    _expr_tx.parse_tx(text)  # the parser builds it
    [(name, values)] = _expression_syntax.calls(text)
    # optax.adam's own defaults fill what the text leaves out; injected numbers are the state's.
    assert (name, values['b1'], values['b2'], values['*']) == (
        'adam', inspect.signature(optax.adam).parameters['b1'].default, 0.99,
        {'learning_rate', 'b2'})
    assert _probe.learning_rate_of(text) == ('injected', None)
