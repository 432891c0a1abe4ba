"""``opt_def.plain_optax()``: a valid plain optax expression for every built-in, rendered from data."""
import ast
import inspect
import warnings

import jax.numpy as jnp
import numpy as np
import optax
import pytest

import flax_optim_compat as optim
from flax_optim_compat._expr import _tx as _expr_tx
from flax_optim_compat._adapter import PlainOptax

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
