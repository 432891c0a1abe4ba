"""Past pmap: ``jax.jit`` with ``NamedSharding`` over a ``Mesh`` (data- and model-parallel).

The model of tests/pmap_specs.py is sharded Megatron-style over a ``('data', 'model')`` mesh of
the 8 simulated CPU devices: the batch along 'data', the hidden layer's kernel and bias along
'model' (its output axis), the output kernel along 'model' (its input axis), the output bias
replicated. The checks:

* the optimizer state takes the params' shardings and keeps them: the compiler, left free to
  choose the step's output shardings, returns every state leaf sharded like its input, and a
  same-shape state leaf sharded like its parameter, so nothing is resharded between steps;
* the step's HLO gathers nothing (no all-gather / all-to-all / collective-permute: only the
  all-reduces of the gradient and norm sums) and aliases every donated input buffer to an
  output, and the donated inputs are deleted (the update happens in place);
* the numbers equal the legacy oracle's single-device run of the same case (fixture
  tests/fixtures/pmap) at every step;
* with explicitly sharded mesh axes (``jax.set_mesh``), ``create`` under ``jit`` needs no
  sharding annotations at all: the state comes out sharded like the params.

Legacy flax.optim predates all of this, so there is no oracle for shardings; the shardings
expected are the params' own.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import flax_optim_compat as optim
from tests import _utils
from tests import catalogue
from tests import pmap_specs

pytestmark = [
    pytest.mark.filterwarnings('ignore::flax_optim_compat.FlaxOptimDeprecationWarning'),
    pytest.mark.filterwarnings(
        'ignore:`flax.traverse_util.Traversal` will be deprecated:DeprecationWarning'),
]

if jax.device_count() < 8:
  pytest.skip('needs 8 devices (conftest.py simulates 8 CPU devices)', allow_module_level=True)

MESH = Mesh(np.array(jax.devices()[:8]).reshape(4, 2), ('data', 'model'))
PARAM_SPECS = {'hidden': {'kernel': P(None, 'model'), 'bias': P('model')},
               'out': {'kernel': P('model', None), 'bias': P()}}
BATCH_SPEC = P('data', None)
# One of each kind of state: Adam-like moments, Adafactor's factored statistics and shape-(1,)
# placeholders, LAMB's whole-leaf norms, WeightNorm's (1, n) scales, MultiOptimizer's None.
MESH_CASES = ['Adam', 'Adafactor', 'LAMB', 'WeightNorm-Momentum', 'MultiOptimizer']
GATHERS = ('all-gather', 'all-to-all', 'collective-permute')


def _named(spec, mesh=MESH):
  return NamedSharding(mesh, spec)


def _spec_like(param_shape, param_spec, state_shape):
  """Partition spec of a state leaf derived from its parameter's.

  Same shape: the parameter's spec. Same rank: dims of equal size keep the parameter's axis
  (WeightNorm's (1, n) scale). Lower rank: the state's dims are matched in order to equal-size
  parameter dims (Adafactor's row/column statistics); anything unmatched is replicated.
  """
  param_axes = tuple(param_spec) + (None,) * (len(param_shape) - len(param_spec))
  if tuple(state_shape) == tuple(param_shape):
    return param_spec
  if len(state_shape) == len(param_shape):
    return P(*[a if s == d else None for a, s, d in zip(param_axes, state_shape, param_shape)])
  out, j = [], 0
  for s in state_shape:
    while j < len(param_shape) and param_shape[j] != s:
      j += 1
    out.append(param_axes[j] if j < len(param_shape) else None)
    j += 1
  return P(*out)


def optimizer_shardings(abstract_optimizer, param_specs):
  """Shardings for a whole Optimizer pytree: params as given, state derived, step replicated."""
  treedef = jax.tree_util.tree_structure(abstract_optimizer.target)
  params = treedef.flatten_up_to(abstract_optimizer.target)
  specs = treedef.flatten_up_to(param_specs)
  states = treedef.flatten_up_to(abstract_optimizer.state.param_states)
  state_shardings = [
      jax.tree_util.tree_map(lambda x, p=p, s=s: _named(_spec_like(p.shape, s, x.shape)), st)
      for p, s, st in zip(params, specs, states)]
  return abstract_optimizer.replace(
      target=jax.tree_util.tree_map(_named, param_specs),
      state=abstract_optimizer.state.replace(
          step=_named(P()), param_states=treedef.unflatten(state_shardings)))


def _train_step(opt, batch, overrides):
  grads = jax.grad(lambda p: pmap_specs.loss_fn(jax, p, batch))(opt.target)
  return opt.apply_gradient(grads, **overrides)


def _setup(name):
  case = pmap_specs.make_case(name)
  spec = case['optimizer']
  opt_def = catalogue.build_def(optim, spec)
  focus = {'focus': catalogue.build_traversal(spec['focus'])} if 'focus' in spec else {}
  create = lambda target: opt_def.create(target, **focus)
  target = jax.tree_util.tree_map(jnp.asarray, case['target'])
  shardings = optimizer_shardings(jax.eval_shape(create, target), PARAM_SPECS)
  # Created in place on the mesh: no host copy of the state.
  optimizer = jax.jit(create, out_shardings=shardings)(target)
  return case, optimizer, shardings


def _batch(case, i):
  return jax.device_put(case['batches'][str(i)], _named(BATCH_SPEC))


def _lr(case, i):
  lrs = case.get('learning_rates')
  return {} if lrs is None else {'learning_rate': lrs[str(i)]}


def _paths(tree):
  return [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(tree)[0]]


def _assert_state_sharded_like_params(optimizer):
  treedef = jax.tree_util.tree_structure(optimizer.target)
  paths = _paths(optimizer.target)
  for path, p, st in zip(paths, treedef.flatten_up_to(optimizer.target),
                         treedef.flatten_up_to(optimizer.state.param_states)):
    for x in jax.tree_util.tree_leaves(st):
      if x.shape == p.shape:
        assert x.sharding.is_equivalent_to(p.sharding, p.ndim), (
            f'state of {path} is sharded {x.sharding.spec}, its param {p.sharding.spec}')


@pytest.mark.parametrize('name', MESH_CASES)
def test_state_follows_param_shardings_without_resharding(name):
  case, optimizer, shardings = _setup(name)
  _assert_state_sharded_like_params(optimizer)
  # The hidden kernel really is split over 'model' (2 x (3, 2)), the batch over 'data'.
  kernel = optimizer.target['hidden']['kernel']
  assert {s.data.shape for s in kernel.addressable_shards} == {(3, 2)}

  # Output shardings left to the compiler.
  traced = _utils.TraceCounter(_train_step)
  step = jax.jit(traced, in_shardings=(shardings, _named(BATCH_SPEC), None), donate_argnums=0)
  compiled = step.lower(optimizer, _batch(case, 0), _lr(case, 0)).compile()
  paths = _paths(shardings)
  chosen = jax.tree_util.tree_leaves(compiled.output_shardings)
  for path, given, out, leaf in zip(paths, jax.tree_util.tree_leaves(shardings), chosen,
                                    jax.tree_util.tree_leaves(optimizer)):
    assert out.is_equivalent_to(given, leaf.ndim), (
        f'{name}{path}: step returns it sharded {out.spec}, it came in {given.spec}')
  hlo = compiled.as_text()
  for op in GATHERS:
    assert f'{op}(' not in hlo and f'{op}-start(' not in hlo, f'{name}: the step has an {op}'

  legacy = _utils.load_fixture('pmap', f'{name}.msgpack')['single']
  for i in range(pmap_specs.STEPS + pmap_specs.STEPS_AFTER):
    old_leaves = jax.tree_util.tree_leaves(optimizer)
    optimizer = step(optimizer, _batch(case, i), _lr(case, i))
    # Adafactor's unused slots hold a constant zeros((1,)) placeholder that every step rebuilds
    # (legacy layout): XLA emits it as a constant and leaves that 4-byte input alone.
    kept = [p for p, x in zip(paths, old_leaves) if not x.is_deleted() and x.shape != (1,)]
    assert not kept, f'{name} step {i}: donated inputs still alive: {kept}'
    for path, given, leaf in zip(paths, jax.tree_util.tree_leaves(shardings),
                                 jax.tree_util.tree_leaves(optimizer)):
      assert leaf.sharding.is_equivalent_to(given, leaf.ndim), f'{name}{path} step {i}'
    _utils.assert_trees_close(
        jax.tree_util.tree_map(np.asarray, optim.Optimizer.state_dict(optimizer)),
        legacy[str(i)])
  assert traced.count == 1  # same shardings in and out: traced (and compiled) once


def test_step_with_explicit_out_shardings_gathers_nothing_and_updates_in_place():
  case, optimizer, shardings = _setup('Adam')
  step = jax.jit(_train_step, in_shardings=(shardings, _named(BATCH_SPEC), None),
                 out_shardings=shardings, donate_argnums=0)
  hlo = step.lower(optimizer, _batch(case, 0), {}).compile().as_text()
  for op in GATHERS:
    assert f'{op}(' not in hlo and f'{op}-start(' not in hlo, f'the step has an {op}'
  n_leaves = len(jax.tree_util.tree_leaves(optimizer))
  alias = hlo[hlo.index('input_output_alias={'):].split('\n', 1)[0]
  for k in range(n_leaves):  # every optimizer leaf (parameter k) reuses its buffer
    assert '(0, {}, may-alias)' in alias and f': ({k}, {{}}, may-alias)' in alias, alias
  old = optimizer
  optimizer = step(optimizer, _batch(case, 0), {})
  assert all(x.is_deleted() for x in jax.tree_util.tree_leaves(old))
  _assert_state_sharded_like_params(optimizer)
  assert optimizer.state.param_states['hidden']['kernel'].grad_ema.sharding.spec == P(None, 'model')


def _explicit_loss(params, batch):
  jnp_dot = lambda a, b, **kw: jnp.dot(a, b, precision=jax.lax.Precision.HIGHEST, **kw)
  hidden = jnp.tanh(jnp_dot(batch['x'], params['hidden']['kernel']) + params['hidden']['bias'])
  # Contracting the 'model'-sharded axis: say where the result lives.
  pred = jnp_dot(hidden, params['out']['kernel'], out_sharding=P('data', None))
  return jnp.mean((pred + params['out']['bias'] - batch['y']) ** 2)


@pytest.mark.skipif(not hasattr(jax, 'set_mesh'), reason='explicit mesh axes need a newer jax')
@pytest.mark.parametrize('name', ['Adam', 'Adafactor'])
def test_explicit_mesh_axes_need_no_state_annotations(name):
  mesh = jax.make_mesh((4, 2), ('data', 'model'),
                       axis_types=(jax.sharding.AxisType.Explicit,) * 2,
                       devices=jax.devices()[:8])
  case = pmap_specs.make_case(name)
  opt_def = catalogue.build_def(optim, case['optimizer'])
  target = jax.device_put(case['target'], jax.tree_util.tree_map(
      lambda s: NamedSharding(mesh, s), PARAM_SPECS))
  with jax.set_mesh(mesh):
    optimizer = jax.jit(opt_def.create)(target)
    _assert_state_sharded_like_params(optimizer)
    before = [x.sharding for x in jax.tree_util.tree_leaves(optimizer)]

    @jax.jit
    def step(opt, batch, overrides):
      return opt.apply_gradient(jax.grad(_explicit_loss)(opt.target, batch), **overrides)

    batch = jax.device_put(case['batches']['0'], NamedSharding(mesh, BATCH_SPEC))
    optimizer = step(optimizer, batch, _lr(case, 0))
  after = [x.sharding for x in jax.tree_util.tree_leaves(optimizer)]
  assert [a.spec for a in after] == [b.spec for b in before]
  _assert_state_sharded_like_params(optimizer)
  legacy = _utils.load_fixture('pmap', f'{name}.msgpack')['single']['0']
  _utils.assert_trees_close(
      jax.tree_util.tree_map(np.asarray, optim.Optimizer.state_dict(optimizer)), legacy)
