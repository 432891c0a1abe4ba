"""The probe: before it writes, a conversion runs legacy and its target side by side.

The legacy side is the optimizer as ``--optimizer`` states it, the target side the
transformation the output's state belongs to; a few updates on synthetic gradients, params
compared after each. Expected outcomes are hand-checkable: a ``--tx`` that contradicts
``--optimizer`` (another hyper-parameter value, a decay in another place), or another algorithm
whose state has the same fields, is refused: exit 2, one line naming the params leaf and (where
the two expressions tell) the cause, nothing written. Every default conversion of the catalogue
passes and says its class.

Inputs: the committed legacy checkpoints (written by flax 0.5.3), and a few files written here
by this package's legacy API (the same msgpack layout) where no committed file has the case.
"""
import os
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import serialization

import flax_optim_compat as optim
from flax_optim_compat import convert
from flax_optim_compat._checkpoint import _probe
from tests import _utils
from tests.checkpoint.test_convert_tx import EXPECTED

pytestmark = pytest.mark.filterwarnings('ignore::flax_optim_compat.FlaxOptimDeprecationWarning')

_run = _utils.run_cli
ADAM_NO_DECAY = 'Adam(learning_rate=0.01, beta1=0.85, beta2=0.99, eps=1e-06)'


def _refused(capsys, tmp_path, name, optimizer, txs, *extra):
  """stderr of a conversion that must be refused: exit 2, one line, nothing written."""
  argv = ['convert', _utils.legacy_checkpoint(name) if isinstance(name, str) and not
          os.path.isabs(name) else name, '--optimizer', optimizer or EXPECTED[name]['cli'],
          '--to', 'train-state', '--out', str(tmp_path / 'out'), *extra]
  for tx in txs:
    argv += ['--tx', tx]
  code, out, err = _run(capsys, *argv)
  assert code == 2, (out, err)
  assert err.count('\n') == 1 and err.startswith('flax-optim-compat convert: error: '), err
  assert not (tmp_path / 'out').exists()
  return err


# (file, --optimizer (None: the one that wrote it), --tx, the cause the message names)
CONTRADICTIONS = [
    pytest.param('Momentum', None,
                 'optax.chain(optax.add_decayed_weights(weight_decay=0.01), '
                 'optax.sgd(learning_rate=0.05, momentum=0.8, nesterov=False))',
                 'nesterov=False in --tx, True for Momentum(', id='nesterov'),
    pytest.param('GradientDescent', None,
                 'optax.chain(optax.sgd(learning_rate=0.1), optax.add_decayed_weights(0.01))',
                 'continues in optax.sgd(learning_rate=0.1)', id='decay-after-sgd'),
    pytest.param('Adam', None,
                 'optax.adamw(learning_rate=0.01, b1=0.85, b2=0.999, eps=1e-06, '
                 'weight_decay=0.01)', 'b2=0.999 in --tx, 0.99 for Adam(', id='adam-b2'),
    pytest.param('LARS', 'LARS(learning_rate=0.1, beta=0.8, trust_coefficient=0.01, eps=1e-06, '
                 'nesterov=True)',
                 'optax.lars(learning_rate=0.1, momentum=0.8, trust_coefficient=0.001, '
                 'eps=1e-06, nesterov=True)',
                 'trust_coefficient=0.001 in --tx, 0.01 for LARS(', id='lars-trust'),
    pytest.param('RMSProp', None, 'optax.rmsprop(learning_rate=0.01, decay=0.85)',
                 "eps_in_sqrt=True (optax's default) in --tx, False for RMSProp(", id='rmsprop-eps-in-sqrt'),
    pytest.param('AdaBelief', 'AdaBelief(learning_rate=0.01, beta1=0.85, beta2=0.99, eps=1e-10)',
                 'optax.adabelief(learning_rate=0.01, b1=0.85, b2=0.99, eps=1e-10)',
                 "eps_root=1e-16 (optax's default) in --tx, 1e-10 for AdaBelief(", id='adabelief-eps-root'),
    # optax.adafactor fixes the param-scale floor at 1e-3: legacy epsilon2 shows on small params.
    pytest.param('Adafactor-defaults', 'Adafactor(learning_rate=0.05, epsilon2=0.01)',
                 'optax.adafactor(learning_rate=0.05)', None, id='adafactor-epsilon2'),
    pytest.param('Adam', None,
                 'optax.chain(optax.add_decayed_weights(0.01), optax.adam(learning_rate=0.01, '
                 'b1=0.85, b2=0.99, eps=1e-06))', 'continues in optax.adamw(', id='decay-coupled'),
    pytest.param('Adam', None, 'optax.adam(learning_rate=0.01, b1=0.85, b2=0.99, eps=1e-06)',
                 'optax.adam takes no weight_decay=0.01', id='decay-forgotten'),
    # Another algorithm whose state has Adam's fields.
    pytest.param('Adam', ADAM_NO_DECAY, 'optax.adamax(learning_rate=0.01, b1=0.85, b2=0.99, '
                 'eps=1e-06)', 'optax.adamax is another algorithm whose state has the fields of '
                 'optax.adam', id='adamax'),
    pytest.param('Adam', ADAM_NO_DECAY, 'optax.adabelief(learning_rate=0.01, b1=0.85, b2=0.99, '
                 'eps=1e-06)', 'optax.adabelief is another algorithm', id='adabelief'),
    pytest.param('Adam', ADAM_NO_DECAY, 'optax.nadam(learning_rate=0.01, b1=0.85, b2=0.99, '
                 'eps=1e-06)', 'optax.nadam is another algorithm', id='nadam'),
    pytest.param('Adam', ADAM_NO_DECAY, 'optax.lamb(learning_rate=0.01, b1=0.85, b2=0.99, '
                 'eps=1e-06)', 'optax.lamb is another algorithm', id='lamb'),
]


@pytest.mark.parametrize('name, optimizer, tx, cause', CONTRADICTIONS)
def test_a_tx_that_does_not_continue_the_optimizer_is_refused(capsys, tmp_path, name,
                                                               optimizer, tx, cause):
  err = _refused(capsys, tmp_path, name, optimizer, [tx])
  assert 'the target does not continue' in err and '--accept-difference' in err, err
  # A keyword --tx sets otherwise is named before any number; else the probe names the leaf.
  assert 'read from the tx before any update' in err or (
      'params leaf /' in err and 'beyond the 1e-6 class' in err), err
  if cause:
    assert cause in err, err


def test_multi_optimizer_groups_in_the_other_order_are_refused(capsys, tmp_path):
  """Two Adam groups with other rates, their --tx given in the other order."""
  params = {'dense': {'kernel': jnp.ones((3, 2)), 'bias': jnp.full((2,), 0.5)}}
  with warnings.catch_warnings():  # flax deprecates its traversals
    warnings.simplefilter('ignore', DeprecationWarning)
    kernels = optim.ModelParamTraversal(lambda path, _: 'kernel' in path)
    biases = optim.ModelParamTraversal(lambda path, _: 'bias' in path)
  legacy = optim.MultiOptimizer((kernels, optim.Adam(0.01)),
                                (biases, optim.Adam(0.1))).create(params)
  legacy = legacy.apply_gradient(jax.tree_util.tree_map(jnp.ones_like, params))
  path = tmp_path / 'multi.msgpack'
  path.write_bytes(serialization.to_bytes(legacy))
  optimizer = ("MultiOptimizer((ModelParamTraversal('kernel'), Adam(0.01)), "
               "(ModelParamTraversal('bias'), Adam(0.1)))")
  txs = ['optax.adam(learning_rate=0.1)', 'optax.adam(learning_rate=0.01)']
  out = tmp_path / 'out'
  os.makedirs(out)
  err = _refused(capsys, out, str(path), optimizer, txs)
  assert 'params leaf /dense/' in err, err
  code, stdout, err = _run(capsys, 'convert', str(path), '--optimizer', optimizer, '--to',
                           'train-state', '--out', str(out / 'ok'), '--tx', txs[1], '--tx', txs[0])
  assert code == 0 and 'probe: bit-exact over 4 updates' in stdout, err


def test_accept_difference_converts_and_says_what_was_accepted(capsys, tmp_path):
  tx = 'optax.adamw(learning_rate=0.01, b1=0.85, b2=0.999, eps=1e-06, weight_decay=0.01)'
  code, out, err = _run(capsys, 'convert', _utils.legacy_checkpoint('Adam'), '--optimizer',
                        EXPECTED['Adam']['cli'], '--to', 'train-state', '--out',
                        str(tmp_path / 'out'), '--tx', tx, '--accept-difference')
  assert code == 0, err
  assert (tmp_path / 'out').exists()
  accepted = [l for l in out.splitlines() if l.startswith('  accepted (--accept-difference): ')]
  assert len(accepted) == 1 and 'b2=0.999 in --tx, 0.99 for Adam(' in accepted[0], out
  result = convert.convert_checkpoint(_utils.legacy_checkpoint('Adam'),
                                      optim.Adam(0.01, 0.85, 0.99, 1e-6, 0.01),
                                      tx=optax.adamw(0.01, b1=0.85, b2=0.999, eps=1e-6,
                                                     weight_decay=0.01),
                                      accept_difference=True)
  assert result.accepted.startswith('the target does not continue Adam(')
  assert not result.probe.within


@pytest.mark.parametrize('name', sorted(EXPECTED))
def test_every_default_conversion_passes_the_probe_and_says_its_class(name):
  opt_def = _utils_def(name)
  result = convert.convert_checkpoint(_utils.legacy_checkpoint(name), opt_def)
  assert result.probe.within and result.accepted is None
  try:
    exact = opt_def.plain_optax().exact
  except (NotImplementedError, ValueError):
    exact = 'bit-exact'
  if exact != '1e-6':  # the expression's own class; the def's own transform is legacy's math
    assert result.probe.summary() == 'bit-exact over 4 updates', result.probe
  else:
    assert '(the 1e-6 class' in result.probe.summary() or \
        result.probe.bit_exact


def _utils_def(name):
  from flax_optim_compat._cli import _main as _cli  # pylint: disable=g-import-not-at-top
  return _cli.parse_optimizer(EXPECTED[name]['cli'])


def test_adadelta_injected_weight_decay_keeps_the_def_value():
  tx = optax.chain(optax.scale_by_adadelta(rho=0.85, eps=1e-5),
                   optax.inject_hyperparams(optax.add_decayed_weights)(weight_decay=0.01),
                   optax.scale_by_learning_rate(0.5))
  result = convert.convert_checkpoint(_utils.legacy_checkpoint('Adadelta'),
                                      _utils_def('Adadelta'), tx=tx)
  injected = result.train_state.opt_state[1].hyperparams['weight_decay']
  assert float(injected) == float(np.float32(0.01))
  assert not any('keep the file' in note for note in result.notes), result.notes
  assert result.probe.within


def test_bfloat16_params_under_adam_are_named_by_every_route():
  params = {'w': jnp.ones((2, 3), jnp.bfloat16), 'b': jnp.ones(3)}
  legacy = optim.Adam(0.1).create(params).apply_gradient(
      jax.tree_util.tree_map(jnp.ones_like, params))
  data = serialization.to_bytes(legacy)
  for tx in (None, optax.adam(learning_rate=0.1)):
    notes = convert.convert_checkpoint(data, optim.Adam(0.1), tx=tx).notes
    assert any(n.startswith('/w is bfloat16: flax 0.5.3 never moved it') for n in notes), notes


def test_big_leaves_are_cut_down_and_an_all_zero_leaf_stays_zero():
  params = {'big': np.linspace(-1, 1, 300 * 5, dtype=np.float32).reshape(300, 5),
            'zero': np.zeros((400,), np.float32)}
  legacy = optim.LAMB(0.01).create(jax.tree_util.tree_map(jnp.asarray, params))
  result = convert.convert_checkpoint(serialization.to_bytes(legacy), optim.LAMB(0.01))
  assert result.probe.stand_ins == ('/big', '/zero')
  assert _probe._stand_in_shape((300, 5)) == (160, 5)
  assert _probe._stand_in_shape((4096, 4096)) == (160, 160)
  assert _probe._stand_in_shape((64, 512, 512)) == (4, 160, 160)
  # LAMB's zero-norm rule shows on the cut-down zero leaf: optax.lamb moves it.
  assert any(n.startswith('/zero is all zeros: optax.lamb moves') for n in result.notes)


def test_a_wrong_family_is_told_first(capsys, tmp_path):
  err = _refused(capsys, tmp_path, 'Adam', 'WeightNorm(Adam(0.01))', [])
  assert 'looks like it was written by Adam, AdaBelief or LAMB' in err, err
  assert 'into WeightNorm(' in err


def test_a_multi_transform_whose_label_spans_two_groups_is_refused_clearly(capsys, tmp_path):
  # Label 'a' covers every param: the kernels of group 0 and the biases of group 1.
  err = _refused(capsys, tmp_path, 'MultiOptimizer', None,
                 ["optax.multi_transform({'a': optax.adam(0.01), 'b': optax.sgd(0.05)}, 'a')"])
  assert "label 'a' of the multi_transform covers params of two legacy groups" in err, err
  with pytest.raises(convert.CheckpointError, match='covers params of two legacy groups'):
    convert.convert_checkpoint(_utils.legacy_checkpoint('MultiOptimizer'),
                               _utils_def('MultiOptimizer'),
                               tx=optax.multi_transform({'a': optax.adam(0.01)}, 'a'))


def test_nan_on_either_side_is_never_equal():
  """Legacy Adafactor is NaN below its step_offset: the probe cannot check, whatever --tx, and
  refuses unless the difference is accepted."""
  params = {'w': jnp.ones((3, 4)), 'b': jnp.ones((4,))}
  opt_def = optim.Adafactor(0.05, step_offset=10)
  legacy = opt_def.create(params).apply_gradient(jax.tree_util.tree_map(jnp.ones_like, params))
  assert np.isnan(np.asarray(legacy.target['b'])).all()
  data = serialization.to_bytes(legacy)
  for tx in (None, optax.adafactor(learning_rate=0.1, decay_offset=10)):
    with pytest.raises(convert.ProbeError, match='cannot check: legacy gives NaN or inf at /'):
      convert.convert_checkpoint(data, opt_def, tx=tx)
    # Only the user's acceptance writes it, and the accepted line says what was not checked.
    accepted = convert.convert_checkpoint(data, opt_def, tx=tx, accept_difference=True)
    assert 'cannot check: legacy gives NaN or inf' in accepted.accepted, accepted.accepted
    assert 'bit-exact' not in accepted.probe.summary()


def test_a_state_dtype_the_optimizer_would_cast_is_named():
  params = {'w': jnp.ones((3, 4)), 'b': jnp.ones((4,))}
  written = optim.Adafactor(0.01, beta1=0.9, min_dim_size_to_factor=2,
                            dtype_momentum=jnp.bfloat16).create(params)
  with pytest.raises(convert.CheckpointError,
                     match=r'state leaf /state/param_states/b/m is bfloat16 in the file; '
                           r'Adafactor\(.*\) keeps it float32 \(give --optimizer '
                           r'dtype_momentum=jnp.bfloat16\)'):
    convert.convert_checkpoint(serialization.to_bytes(written),
                               optim.Adafactor(0.01, beta1=0.9, min_dim_size_to_factor=2))


def test_half_precision_is_a_note_never_a_wider_class():
  """All-bf16 Momentum: the class on float32 copies; a doubled rate is refused (by name)."""
  params = {'w': jnp.linspace(-1, 1, 12, dtype=jnp.bfloat16).reshape(3, 4)}
  legacy = optim.Momentum(0.01, beta=0.9).create(params).apply_gradient(
      {'w': jnp.full((3, 4), 0.5, jnp.bfloat16)})
  data = serialization.to_bytes(legacy)
  result = convert.convert_checkpoint(data, optim.Momentum(0.01, beta=0.9))
  assert result.probe.within and 'on float32 copies of the bfloat16 values' in \
      result.probe.summary(), result.probe.summary()
  with pytest.raises(convert.ProbeError, match='learning_rate=0.02 in --tx, 0.01 for Momentum'):
    convert.convert_checkpoint(data, optim.Momentum(0.01, beta=0.9),
                               tx=optax.sgd(learning_rate=0.02, momentum=0.9),
                               tx_source='optax.sgd(learning_rate=0.02, momentum=0.9)')
  # Without the text to read, the update (twice legacy's) is measured on float32 copies.
  with pytest.raises(convert.ProbeError, match='params leaf /w differs by 1 of the legacy update'):
    convert.convert_checkpoint(data, optim.Momentum(0.01, beta=0.9),
                               tx=optax.sgd(learning_rate=0.02, momentum=0.9))


def test_the_keywords_read_from_tx_include_optax_defaults_not_spellings():
  adam = optim.Adam(0.002).plain_optax().expression
  assert _probe.differences(adam, 'optax.adamw(0.002)', 'Adam(0.002)') == [
      "weight_decay=0.0001 (optax's default) in --tx, 0 for Adam(0.002)"]
  # mu_dtype=None is the params' dtype: not a contradiction the text can tell.
  assert not _probe.differences(adam, 'optax.adam(0.002, mu_dtype=jnp.float32)', 'Adam(0.002)')
  factor = optim.Adafactor(0.01, beta1=0.9, dtype_momentum=jnp.bfloat16).plain_optax().expression
  assert not _probe.differences(factor, factor.replace("'bfloat16'", 'jnp.bfloat16'), 'A')
  assert _probe.differences(factor, factor.replace("dtype_momentum='bfloat16', ", ''), 'A') == [
      "dtype_momentum=float32 (optax's default) in --tx, 'bfloat16' for A"]
