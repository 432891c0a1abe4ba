"""An optimizer flax 0.5.3 never had, added the way ARCHITECTURE.md's "where a change goes" says.

The optimizer below (Lion, Chen et al. 2023) is the four blocks of an optimizer file; the test
registers it as ``__init__.py`` registers the built-ins (the ``optim`` name, its checkpoint
layout), builds it from a catalogue spec, runs the catalogue's generic and plain-optax checks on
it, and takes its expected values from plain optax (``optax.lion``): no oracle fixture exists
for it. If a new optimizer ever needs another file, this test is where that shows.
"""
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import serialization
from flax import struct

import flax_optim_compat as optim
from flax_optim_compat import _hyper
from flax_optim_compat import _layouts
from flax_optim_compat._adapter import OptaxBackedDef
from flax_optim_compat._plain_optax import Hyper, PlainCall, PlainForm
from tests import _utils
from tests import catalogue
from tests import test_generic as generic_checks
from tests import test_optax_state as optax_state_checks

pytestmark = pytest.mark.filterwarnings('ignore::flax_optim_compat.FlaxOptimDeprecationWarning')


# ----------------------------------------------------------------------------- the optimizer file

@struct.dataclass
class _LionHyperParams:
  learning_rate: jax.Array | float | None
  beta1: jax.Array | float
  beta2: jax.Array | float
  weight_decay: jax.Array | float


@struct.dataclass
class _LionParamState:
  # Its checkpoint key: a field set of its own (Momentum's {'momentum'} would make a file of
  # either read as 'Momentum, LARS or Lion').
  grad_ema: jax.Array


def lion_transform(hyper_params: _LionHyperParams) -> optax.GradientTransformation:
  """``scale_by_lion -> add_decayed_weights -> -lr`` (= ``optax.lion``)."""
  hp = hyper_params
  parts = [optax.scale_by_lion(b1=hp.beta1, b2=hp.beta2)]
  parts += _hyper.decayed_weights(hp.weight_decay)
  parts.append(_hyper.scale_by_required_learning_rate(hp.learning_rate))
  return optax.chain(*parts)


class Lion(OptaxBackedDef):
  """Lion: the sign of an interpolation of the momentum and the gradient."""
  build_transform = staticmethod(lion_transform)
  param_state_cls = _LionParamState
  optax_state_fields = {'grad_ema': 'mu'}
  plain_optax_forms = (PlainForm((PlainCall('lion', (
      ('learning_rate', Hyper('learning_rate')), ('b1', Hyper('beta1')),
      ('b2', Hyper('beta2')), ('weight_decay', Hyper('weight_decay')))),)),)

  def __init__(self, learning_rate=None, beta1=0.9, beta2=0.99, weight_decay=0.0):
    super().__init__(_LionHyperParams(learning_rate, beta1, beta2, weight_decay))


# ----------------------------------------------------------------------------- registered, catalogued

_SPEC = catalogue.spec('Lion', learning_rate=0.01, beta1=0.9, beta2=0.99, weight_decay=0.01)
_SPEC_NO_DECAY = catalogue.spec('Lion', learning_rate=0.01, beta1=0.9, beta2=0.99)
ENTRY = catalogue.Entry(
    'Lion', in_flax_0_5_3=False,
    generic=(catalogue.Generic('Lion', catalogue.spec('Lion', learning_rate=0.01), steps=200),),
    optax_state={'Lion': _SPEC_NO_DECAY},
    guide=(catalogue.GuideRow('optim.Lion(0.01)', 'optax.lion(0.01)'),),
)


@pytest.fixture
def registered(monkeypatch):
  """``Lion`` as ``__init__.py`` registers a built-in (its name, its layout), undone after."""
  monkeypatch.setattr(optim, 'Lion', Lion, raising=False)
  monkeypatch.setattr(_layouts, '_NAMES', list(_layouts._NAMES))
  monkeypatch.setattr(_layouts, '_REGISTERED',
                      {fields: list(names) for fields, names in _layouts._REGISTERED.items()})
  _layouts.register_classes([Lion])
  monkeypatch.setitem(catalogue.OPTAX_STATE, 'Lion', _SPEC_NO_DECAY)
  return Lion


def test_the_entry_has_what_an_optimizer_without_an_oracle_needs(registered):
  del registered
  catalogue.check_entry(ENTRY)
  assert _layouts.optimizer_names()[-1] == 'Lion'
  assert _layouts.name_leaf_state({'grad_ema': np.zeros(2)}) == 'Lion'


@pytest.mark.parametrize('jit', [True, False], ids=['jit', 'eager'])
@pytest.mark.parametrize('dtype', generic_checks.DTYPES, ids=['float32', 'bfloat16'])
def test_the_generic_checks(registered, dtype, jit):
  del registered
  generic, = ENTRY.generic
  generic_checks.test_converges_on_quadratic_and_keeps_dtypes(generic, dtype, jit)


def test_the_generic_retrace_check(registered):
  del registered
  generic, = ENTRY.generic
  generic_checks.test_override_value_change_does_not_retrace(generic)


def test_the_optax_state_checks(registered):
  del registered
  optax_state_checks.test_plain_optax_continues_exactly_like_the_legacy_api('Lion')
  optax_state_checks.test_converted_state_has_the_structure_and_shapes_of_tx_init('Lion')


def test_expected_values_from_plain_optax(registered):
  """Five steps of the legacy API against ``optax.lion`` from the same start, and the plain
  optax expression the package prints for it. Same terms in the same order; one float32 ulp
  apart at most (measured: 3e-8 relative; the two programs round ``p - lr * u`` each its own
  way), so the bound is float32 rounding, far below one step (``lr`` = 1e-2)."""
  opt_def = catalogue.build_def(optim, _SPEC)
  assert opt_def.plain_optax().expression == (
      'optax.lion(learning_rate=0.01, b1=0.9, b2=0.99, weight_decay=0.01)')
  params = {'dense': {'kernel': jnp.linspace(-1, 1, 12).reshape(4, 3), 'bias': jnp.ones(3)},
            'scale': jnp.asarray(0.5)}
  tx = optax.lion(learning_rate=0.01, b1=0.9, b2=0.99, weight_decay=0.01)
  opt_state, target = tx.init(params), params
  optimizer = opt_def.create(params)

  @jax.jit
  def optax_step(grads, opt_state, target):
    updates, opt_state = tx.update(grads, opt_state, target)
    return optax.apply_updates(target, updates), opt_state

  for i in range(5):
    grads = jax.tree_util.tree_map(
        lambda p, i=i: jnp.cos(jnp.arange(p.size, dtype=jnp.float32) * 0.7 + i).reshape(p.shape),
        params)
    target, opt_state = optax_step(grads, opt_state, target)
    optimizer = optimizer.apply_gradient(grads)
    _utils.assert_trees_close(optimizer.target, target, rtol=1e-6)
  _utils.assert_trees_close(optimizer.state.param_states['dense']['kernel'].grad_ema,
                            opt_state[0].mu['dense']['kernel'], rtol=1e-6)


def test_its_checkpoint_names_it_and_restores(registered):
  optimizer = catalogue.build_def(optim, _SPEC).create({'w': jnp.ones(3)})
  optimizer = optimizer.apply_gradient({'w': jnp.full(3, 0.5)})
  state_dict = serialization.msgpack_restore(serialization.to_bytes(optimizer))
  assert _layouts.name_param_states(state_dict['target'], state_dict['state']['param_states']) \
      == 'Lion'
  restored = serialization.from_bytes(registered(0.01).create({'w': jnp.zeros(3)}),
                                      serialization.to_bytes(optimizer))
  _utils.assert_trees_close(restored.target, optimizer.target, rtol=0)
  with pytest.raises(ValueError, match='looks like it was written by Lion'):
    serialization.from_bytes(optim.Momentum(0.1).create({'w': jnp.zeros(3)}),
                             serialization.to_bytes(optimizer))
