"""A MultiOptimizer converts into the user's own ``optax.multi_transform``.

Its labels are named freely and in any order; each is mapped to the legacy group whose params
its state covers. Expected values: the legacy continuation of the committed MultiOptimizer
files written by flax 0.5.3 (tests/fixtures/convert/expected.msgpack, tools/gen_convert.py),
continued here by plain optax from the converted state; refusals are hand-checkable (which
label covers which params is written in the test).
"""
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import serialization

import flax_optim_compat as optim
from flax_optim_compat import convert
from flax_optim_compat._cli import _main as _cli
from tests import _utils
from tests.checkpoint.test_convert_multi import EXPECTED, STEPS, REL

pytestmark = pytest.mark.filterwarnings('ignore::flax_optim_compat.FlaxOptimDeprecationWarning')

_run = _utils.run_cli
NAME = 'MultiOptimizer'   # /kernel$: Adam(0.01, wd 0.01); /bias$: Momentum(0.05, nesterov); rest none
ADAMW = 'optax.adamw(learning_rate=0.01, b1=0.85, b2=0.99, eps=1e-6, weight_decay=0.01)'
MOMENTUM = ('optax.chain(optax.add_decayed_weights(0.01), '
            'optax.sgd(learning_rate=0.05, momentum=0.8, nesterov=True))')
# The fixture's params: conv/kernel, dense/bias, dense/kernel, scale.
LABELS = "{'conv': {'kernel': 'k'}, 'dense': {'bias': 'b', 'kernel': 'k'}, 'scale': 'z'}"


def _def(name=NAME):
  return _cli.parse_optimizer(EXPECTED[name]['cli'])


def _by_ndim(tree):
  """A label function: kernels (rank >= 2) 'slow', biases 'fast', the scalar 'frozen'."""
  return jax.tree_util.tree_map(lambda x: {0: 'frozen', 1: 'fast'}.get(np.ndim(x), 'slow'), tree)


def _continued(name, tx, opt_state, params):
  """The largest relative difference of STEPS plain optax updates from the converted state
  against flax 0.5.3's own continuation of the file."""
  worst = 0.0
  for i in range(STEPS):
    grads = jax.tree_util.tree_map(jnp.asarray, EXPECTED[name]['grads'][str(i)])
    updates, opt_state = tx.update(grads, opt_state, params)
    params = optax.apply_updates(params, updates)
    for a, b in zip(jax.tree_util.tree_leaves(params),
                    jax.tree_util.tree_leaves(EXPECTED[name]['continued'][i]['target'])):
      scale = max(float(np.max(np.abs(b))), 1e-30)
      worst = max(worst, float(np.max(np.abs(np.asarray(a) - b))) / scale)
  return worst


USER_TXS = [
    pytest.param(lambda: optax.multi_transform(
        {'k': eval(ADAMW), 'b': eval(MOMENTUM), 'z': optax.set_to_zero()}, eval(LABELS)),
                 id='groups-in-order'),
    pytest.param(lambda: optax.multi_transform(
        {'fast': eval(MOMENTUM), 'frozen': optax.set_to_zero(), 'slow': eval(ADAMW)}, _by_ndim),
                 id='other-order-free-names-label-function'),
]


@pytest.mark.parametrize('make_tx', USER_TXS)
def test_users_multi_transform_converts_and_continues_legacy(make_tx):
  tx = make_tx()
  result = convert.convert_checkpoint(_utils.legacy_checkpoint(NAME), _def(), tx=tx)
  assert result.probe.within, result.probe
  state = result.train_state
  assert state.tx is tx
  # The state is the user's transformation's own: same structure as its init.
  assert (jax.tree_util.tree_structure(state.opt_state)
          == jax.tree_util.tree_structure(tx.init(state.params)))
  assert _continued(NAME, tx, state.opt_state, state.params) <= REL
  assert any(n.startswith("your multi_transform's labels") and 'continues group 0 (Adam(' in n
             for n in result.notes), result.notes


def test_stateless_labels_need_no_mapping_and_continue():
  # ^/dense/: GradientDescent(0.1); conv and scale unmatched. Neither label keeps state.
  name = 'MultiOptimizer-GradientDescent'
  tx = optax.multi_transform(
      {'z': optax.set_to_zero(), 'd': optax.sgd(0.1)},
      lambda p: {k: jax.tree_util.tree_map(lambda _: 'd' if k == 'dense' else 'z', v)
                 for k, v in p.items()})
  result = convert.convert_checkpoint(_utils.legacy_checkpoint(name), _def(name), tx=tx)
  assert result.probe.bit_exact, result.probe
  assert _continued(name, tx, result.train_state.opt_state, result.train_state.params) <= REL
  assert any("'d', 'z' keep no state" in n for n in result.notes), result.notes


# (labels tree, transforms, the refusal's words)
REFUSED = [
    pytest.param("{'conv': {'kernel': 'k'}, 'dense': {'bias': 'k', 'kernel': 'k'}, 'scale': 'z'}",
                 f"{{'k': {ADAMW}, 'z': optax.set_to_zero()}}",
                 "label 'k' of the multi_transform covers params of two legacy groups: "
                 '/conv/kernel (group 0 (Adam(', id='one-label-two-groups'),
    pytest.param("{'conv': {'kernel': 'k2'}, 'dense': {'bias': 'b', 'kernel': 'k'}, 'scale': 'z'}",
                 f"{{'k': {ADAMW}, 'k2': {ADAMW}, 'b': {MOMENTUM}, 'z': optax.set_to_zero()}}",
                 "the multi_transform splits legacy group 0 (Adam(", id='two-labels-one-group'),
    pytest.param("{'conv': {'kernel': 'k'}, 'dense': {'bias': 'b', 'kernel': 'k'}, 'scale': 'a'}",
                 f"{{'k': {ADAMW}, 'b': {MOMENTUM}, 'a': optax.adam(0.1)}}",
                 "label 'a' of the multi_transform keeps state for /scale, which no legacy "
                 'group selects', id='state-for-unmatched'),
    pytest.param(LABELS, f"{{'k': {MOMENTUM}, 'b': {ADAMW}, 'z': optax.set_to_zero()}}",
                 "label 'b' of the multi_transform covers the params of MultiOptimizer group 1 "
                 '(Momentum(', id='groups-swapped-other-algorithm'),
]


@pytest.mark.parametrize('labels,transforms,words', REFUSED)
def test_ambiguous_or_misfit_labels_are_refused_in_one_line(capsys, tmp_path, labels,
                                                              transforms, words):
  text = f'optax.multi_transform({transforms}, {labels})'
  with pytest.raises(convert.CheckpointError) as info:
    convert.convert_checkpoint(_utils.legacy_checkpoint(NAME), _def(), tx=_cli.parse_tx(text))
  assert words in str(info.value) and '\n' not in str(info.value), info.value
  out = tmp_path / 'out.msgpack'
  code, stdout, err = _run(capsys, 'convert', _utils.legacy_checkpoint(NAME), '--optimizer',
                           EXPECTED[NAME]['cli'], '--to', 'train-state', '--out', str(out),
                           '--tx', text)
  assert code == 2 and err.count('\n') == 1 and words in err, (stdout, err)
  assert not out.exists()


def test_a_label_continuing_the_wrong_groups_hyper_params_is_caught_by_the_probe():
  # Two Adam groups (kernels at 0.01, biases at 0.05): the states fit either way round, so
  # only the probe can tell a multi_transform whose labels carry each other's rates.
  params = {'dense': {'kernel': jnp.linspace(-1.0, 1.0, 12).reshape(3, 4),
                      'bias': jnp.linspace(0.5, 1.0, 4)}}
  with warnings.catch_warnings():  # flax deprecates its traversals
    warnings.simplefilter('ignore', DeprecationWarning)
    opt_def = optim.MultiOptimizer(
        (optim.ModelParamTraversal(lambda path, _: path.endswith('kernel')), optim.Adam(0.01)),
        (optim.ModelParamTraversal(lambda path, _: path.endswith('bias')), optim.Adam(0.05)))
  legacy = opt_def.create(params).apply_gradient(jax.tree_util.tree_map(jnp.ones_like, params))
  data = serialization.to_bytes(legacy)
  labels = {'dense': {'kernel': 'kernels', 'bias': 'biases'}}
  right = optax.multi_transform({'biases': optax.adam(0.05), 'kernels': optax.adam(0.01)}, labels)
  wrong = optax.multi_transform({'biases': optax.adam(0.01), 'kernels': optax.adam(0.05)}, labels)
  assert convert.convert_checkpoint(data, opt_def, tx=right).probe.bit_exact
  with pytest.raises(convert.ProbeError, match=r'params leaf /dense/\w+ differs by'):
    convert.convert_checkpoint(data, opt_def, tx=wrong)


def test_cli_convert_diff_and_back_with_one_multi_transform(capsys, tmp_path):
  text = (f"optax.multi_transform({{'slow': {ADAMW}, 'fast': {MOMENTUM}, "
          f"'frozen': optax.set_to_zero()}}, "
          "{'conv': {'kernel': 'slow'}, 'dense': {'bias': 'fast', 'kernel': 'slow'}, "
          "'scale': 'frozen'})")
  source, opt = _utils.legacy_checkpoint(NAME), EXPECTED[NAME]['cli']
  out = tmp_path / 'out.msgpack'
  code, stdout, err = _run(capsys, 'convert', source, '--optimizer', opt, '--to', 'train-state',
                           '--out', str(out), '--tx', text)
  assert code == 0 and err == '', err
  assert stdout.splitlines()[0].endswith(': load it with tx=' + _cli.canonical_tx(text))
  assert '  labels: one per group' not in stdout   # the user's own labels, in their tx
  assert '  probe: bit-exact over 4 updates' in stdout
  code, stdout, err = _run(capsys, 'diff', source, str(out), '--optimizer', opt, '--tx', text)
  assert code == 0 and stdout.startswith('same'), (stdout, err)
  back = tmp_path / 'back.msgpack'
  code, stdout, err = _run(capsys, 'convert', str(out), '--optimizer', opt, '--to', 'legacy',
                           '--out', str(back), '--tx', text)
  assert code == 0, err
  code, stdout, err = _run(capsys, 'diff', source, str(back))
  assert code == 0 and stdout.startswith('same (rtol 0)'), (stdout, err)
