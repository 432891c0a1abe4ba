"""The probe against flax 0.5.3's own continuations: what it refuses really diverges, what it
accepts continues.

Inputs: the legacy checkpoints of ``tests/fixtures/probe`` and their continuations over 20
steps, both written by the real flax 0.5.3 (``tools/oracle/gen_probe.py``). Each accepted
conversion is loaded as the README shows (the converted TrainState, continued by its own optax
``tx``) and must stay within 1e-5 of flax 0.5.3 after every step; each refused one is converted
anyway (``accept_difference=True``) and must be more than 1e-5 off somewhere: the refusal was
needed. Refusals name their cause (a keyword of ``--tx`` is named before any number).
"""
import os

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import serialization

import flax_optim_compat as optim
from flax_optim_compat import convert
from flax_optim_compat._cli import _main as _cli
from flax_optim_compat._expr import _tx
from tests import _utils

pytestmark = pytest.mark.filterwarnings('ignore::flax_optim_compat.FlaxOptimDeprecationWarning')

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), 'fixtures', 'probe')
CONTINUES = 1e-5
MULTI = ("MultiOptimizer((ModelParamTraversal('kernel'), Adam()), "
         "(ModelParamTraversal('bias'), Momentum(learning_rate=0.05, beta=0.9)))")
DECAY = 'optax.exponential_decay(0.01, 1, 0.9)'


def _expected():
  with open(os.path.join(FIXTURES, 'expected.msgpack'), 'rb') as f:
    return serialization.msgpack_restore(f.read())


EXPECTED = _expected()


def _convert(case, optimizer, tx, **kwargs):
  texts = tx if isinstance(tx, list) else None if tx is None else [tx]
  txs = None if texts is None else [_tx.parse_tx(t) for t in texts]
  multi = isinstance(tx, list)
  return convert.convert_checkpoint(
      os.path.join(FIXTURES, f'{case}.msgpack'), _cli.parse_optimizer(optimizer),
      tx=txs if multi else (None if txs is None else txs[0]),
      tx_source=texts if multi else tx, **kwargs)


def _worst(case, conversion):
  """The largest max-rel difference to flax 0.5.3 over the continued steps (float64)."""
  state = conversion.train_state
  step = jax.jit(lambda s, g: s.apply_gradients(grads=g))
  worst = 0.0
  expected = EXPECTED[case]
  for i in range(len(expected['grads'])):
    grads = jax.tree_util.tree_map(jnp.asarray, expected['grads'][str(i)])
    state = step(state, grads)
    for a, e in zip(jax.tree_util.tree_leaves(state.params),
                    jax.tree_util.tree_leaves(expected['continued'][str(i)])):
      worst = max(worst, _utils.max_rel_diff(np.asarray(a, np.float64),
                                             np.asarray(e, np.float64)))
  return worst


ACCEPTED = [
    pytest.param('adam-decay', 'Adam(learning_rate=0.001, weight_decay=0.0001)', None,
                 id='adam-decay-default'),
    pytest.param('adam-decay', 'Adam(learning_rate=0.001, weight_decay=0.0001)',
                 'optax.adamw(learning_rate=0.001, weight_decay=0.0001)', id='adam-decay-adamw'),
    pytest.param('adam', 'Adam(learning_rate=0.002)', 'optax.adam(0.002)', id='adam'),
    pytest.param('adam-clip', 'Adam(learning_rate=0.01)', None, id='adam-default'),
    pytest.param('momentum-bf16', 'Momentum(learning_rate=0.01, beta=0.9)', None,
                 id='momentum-bf16-default'),
    pytest.param('adafactor-offset', 'Adafactor(learning_rate=0.05, step_offset=10)', None,
                 id='adafactor-step-offset-default'),
    pytest.param('adam-schedule', 'Adam()', f'optax.adam(learning_rate={DECAY})',
                 id='lr-less-schedule'),
    pytest.param('adam-schedule', 'Adam()',
                 f'optax.inject_hyperparams(optax.adam)(learning_rate={DECAY})',
                 id='lr-less-injected-schedule'),
    pytest.param('multi-schedule', MULTI, [f'optax.adam(learning_rate={DECAY})',
                                           'optax.sgd(learning_rate=0.05, momentum=0.9)'],
                 id='lr-less-group-schedule'),
]


@pytest.mark.parametrize('case, optimizer, tx', ACCEPTED)
def test_an_accepted_conversion_continues_flax_0_5_3(case, optimizer, tx):
  conversion = _convert(case, optimizer, tx)
  assert conversion.probe.within and conversion.accepted is None, conversion.probe
  summary = conversion.probe.summary()
  assert summary.startswith(('bit-exact over 4 updates', 'within 1e-6 of each update')), summary
  assert _worst(case, conversion) <= CONTINUES


REFUSED = [
    # A weight decay below the old params-relative class: named from --tx before any number.
    pytest.param('adam-decay', 'Adam(learning_rate=0.001, weight_decay=0.0001)',
                 'optax.adam(learning_rate=0.001)', 'optax.adam takes no weight_decay=0.0001',
                 id='decay-dropped'),
    pytest.param('adam', 'Adam(learning_rate=0.002)', 'optax.adamw(learning_rate=0.002)',
                 "weight_decay=0.0001 (optax's default) in --tx, 0 for Adam(", id='decay-leaked'),
    pytest.param('momentum-bf16', 'Momentum(learning_rate=0.01, beta=0.9)',
                 'optax.sgd(learning_rate=0.02, momentum=0.9)',
                 'learning_rate=0.02 in --tx, 0.01 for Momentum(', id='bf16-doubled-rate'),
    # Clipping above the old synthetic gradients (magnitudes up to 1): the large pass shows it.
    pytest.param('adam-clip', 'Adam(learning_rate=0.01)',
                 'optax.chain(optax.clip_by_global_norm(5.0), optax.adam(learning_rate=0.01))',
                 'gradients of global norm', id='clip-by-global-norm'),
    pytest.param('adam-clip', 'Adam(learning_rate=0.01)',
                 'optax.chain(optax.clip(2.5), optax.adam(learning_rate=0.01))',
                 'gradients of global norm', id='clip'),
    pytest.param('adafactor-offset', 'Adafactor(learning_rate=0.05, step_offset=10)',
                 'optax.adafactor(learning_rate=0.05)', "decay_offset=0 (optax's default) in "
                 '--tx, 10 for Adafactor(', id='adafactor-decay-offset-forgotten'),
    pytest.param('adafactor-offset', 'Adafactor(learning_rate=0.05, step_offset=10)',
                 'optax.adafactor(learning_rate=0.1, decay_offset=10)',
                 'learning_rate=0.1 in --tx, 0.05 for Adafactor(', id='adafactor-doubled-rate'),
]


@pytest.mark.parametrize('case, optimizer, tx, cause', REFUSED)
def test_a_refused_conversion_really_diverges_from_flax_0_5_3(case, optimizer, tx, cause):
  with pytest.raises(convert.ProbeError) as refused:
    _convert(case, optimizer, tx)
  assert cause in str(refused.value) and 'nothing was written' in str(refused.value)
  accepted = _convert(case, optimizer, tx, accept_difference=True)
  assert accepted.accepted is not None and cause in accepted.accepted
  assert _worst(case, accepted) > CONTINUES


def test_a_default_conversion_says_the_file_cannot_tell_a_per_step_rate():
  notes = _convert('adam', 'Adam(learning_rate=0.002)', None).notes
  said = [n for n in notes if 'set the learning rate per step' in n]
  assert len(said) == 1 and 'inject_hyperparams' in said[0], notes
  for quiet in (_convert('adam', 'Adam(learning_rate=0.002)', 'optax.adam(0.002)'),
                _convert('adam-schedule', 'Adam()', f'optax.adam(learning_rate={DECAY})')):
    assert not any('set the learning rate per step' in n for n in quiet.notes), quiet.notes


def test_a_constant_rate_for_a_run_that_set_it_per_step_is_refused():
  with pytest.raises(convert.CheckpointError, match='trains at a constant rate'):
    _convert('adam-schedule', 'Adam()', 'optax.adam(learning_rate=0.01)')


def test_a_def_whose_rate_is_a_schedule_continues_and_its_load_with_is_not_made_up():
  path = os.path.join(FIXTURES, 'adam-schedule.msgpack')
  conversion = convert.convert_checkpoint(
      path, optim.Adam(learning_rate=optax.exponential_decay(0.01, 1, 0.9)))
  assert conversion.probe.within and conversion.load_with is None
  assert any('cannot be written as Python' in n for n in conversion.notes), conversion.notes
  assert not any('set the learning rate per step' in n for n in conversion.notes)
  assert _worst('adam-schedule', conversion) <= CONTINUES
