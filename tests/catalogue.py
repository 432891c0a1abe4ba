"""The catalogue of optimizer cases: every test, fixture generator and the guide table draw from it.

One :class:`Entry` per optimizer (the ten built-ins, ``WeightNorm``, ``MultiOptimizer`` and a
user-written per-leaf optimizer) holds all of that optimizer's cases:

* ``generic``: the generic tests (tests/test_generic.py): convergence on a quadratic, dtypes kept
  in float32 and bfloat16, under jit and without, no retracing on a new override value;
* ``trajectories``: golden trajectory families (one fixture file each, tests/fixtures/
  trajectories), replayed by tests/test_trajectories.py;
* ``checkpoints``: checkpoint cases (tests/fixtures/checkpoints, tests/test_checkpoints.py);
* ``pmap``: data-parallel cases (tests/fixtures/pmap, tests/test_pmap.py, tests/test_mesh.py);
* ``optax_state``: defs whose state is continued in plain optax (tests/test_optax_state.py);
* ``guide``: rows of docs/optimizers.md's table (tools/guide_table.py);

and, derived from those: the eager-path tests (tests/test_compiled_step.py, the generic cases), the
convert goldens (``CONVERT``: checkpoint cases of one built-in alone; tools/oracle/gen_convert.py)
and what ``convert.inspect`` must say about each checkpoint file (tests/checkpoint/test_convert.py).

Adding an optimizer: ARCHITECTURE.md's "where a change goes" lists every file (its module, three
``__init__`` edits, one entry here, the fixtures regenerated with ``python -m tools.oracle`` in
the legacy oracle venv, tools/oracle/README.md, or, for one flax 0.5.3 never had, an entry with
``in_flax_0_5_3=False`` and no fixtures: see :func:`check_entry`); tests/test_catalogue.py
checks every place its name must appear and that no other list of optimizers exists;
tests/test_new_optimizer.py adds one that way.

Optimizers are written as JSON-like specs (stored in the fixtures as they are) and built with
:func:`build_def` against either library: this module must import in the oracle venv (Python
3.11, numpy 1.24, jax 0.4.13, flax 0.5.3) and in today's; it imports neither ``flax.optim`` nor
``flax_optim_compat``.
"""
import dataclasses
import re
from typing import Optional

import numpy as np

# ----------------------------------------------------------------------------- specs


def spec(name, **kwargs):
  """``{'name': 'Adam', 'kwargs': {...}}``: ``getattr(optim, name)(**kwargs)``."""
  return {'name': name, 'kwargs': kwargs}


def weight_norm(wrapped, **kwargs):
  """``optim.WeightNorm(<wrapped>, **kwargs)``."""
  return {'name': 'WeightNorm', 'kwargs': kwargs, 'wrapped': wrapped}


def multi(*groups):
  """``optim.MultiOptimizer(*[(traversal, def), ...])`` from ``(traversal spec, spec)`` pairs."""
  return {'name': 'MultiOptimizer', 'groups': [[t, o] for t, o in groups]}


def focused(optimizer_spec, traversal):
  """``optimizer_spec`` whose optimizer is created with ``create(target, focus=traversal)``."""
  return dict(optimizer_spec, focus=traversal)


def path_contains(value):
  """``ModelParamTraversal(lambda path, _: value in path)``."""
  return {'kind': 'path_contains', 'value': value}


def path_regex(value):
  """``ModelParamTraversal(lambda path, _: re.search(value, path) is not None)``."""
  return {'kind': 'path_regex', 'value': value}


def ndim(low=0, high=None):
  """``ModelParamTraversal`` of the params with ``low <= ndim`` (and ``ndim <= high``)."""
  return {'kind': 'ndim', 'low': low, 'high': high}


def item(key):
  """``t_identity[key]`` (``key`` may be a list of keys: ``t_identity['a']['b']``)."""
  return {'kind': 't_identity', 'key': key}


def _custom_sign_momentum(optim):
  """A user-written legacy-style OptimizerDef (per-leaf protocol), defined against ``optim``."""
  from flax import struct  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top

  @struct.dataclass
  class _SignMomentumHyperParams:
    learning_rate: float
    beta: float

  @struct.dataclass
  class _SignMomentumParamState:
    velocity: np.ndarray

  class SignMomentum(optim.OptimizerDef):

    def __init__(self, learning_rate=None, beta=0.9):
      super().__init__(_SignMomentumHyperParams(learning_rate, beta))

    def init_param_state(self, param):
      return _SignMomentumParamState(jnp.zeros_like(param))

    def apply_param_gradient(self, step, hyper_params, param, state, grad):
      velocity = hyper_params.beta * state.velocity + jnp.sign(grad) * (1.0 + 0.1 * step)
      return param - hyper_params.learning_rate * velocity, _SignMomentumParamState(velocity)

  return SignMomentum


# spec name -> function of the ``optim`` module returning the OptimizerDef class.
CUSTOM_OPTIMIZERS = {'custom:SignMomentum': _custom_sign_momentum}


def build_def(optim, optimizer_spec):
  """The OptimizerDef of ``optim`` (``flax.optim`` or ``flax_optim_compat``) that a spec names.

  Specs: ``spec(name, **kwargs)``, ``weight_norm(wrapped, **kwargs)``, ``multi(*groups)``,
  ``{'name': 'custom:SignMomentum', 'kwargs': ...}``; a spec's ``'focus'`` (see
  :func:`focused`) is for ``create``, not for the def.
  """
  name, kwargs = optimizer_spec['name'], dict(optimizer_spec.get('kwargs', {}))
  if name == 'MultiOptimizer':
    return optim.MultiOptimizer(*[(build_traversal(t), build_def(optim, o))
                                  for t, o in optimizer_spec['groups']])
  if name in CUSTOM_OPTIMIZERS:
    return CUSTOM_OPTIMIZERS[name](optim)(**kwargs)
  if 'wrapped' in optimizer_spec:
    return getattr(optim, name)(build_def(optim, optimizer_spec['wrapped']), **kwargs)
  return getattr(optim, name)(**kwargs)


def build_traversal(traversal_spec):
  """The ``flax.traverse_util`` traversal of a traversal spec (same code in both venvs)."""
  import warnings  # pylint: disable=g-import-not-at-top
  from flax import traverse_util  # pylint: disable=g-import-not-at-top
  kind = traversal_spec['kind']
  with warnings.catch_warnings():
    # flax (0.5.3 and today) deprecates constructing any Traversal; expected here.
    warnings.filterwarnings('ignore', message='`flax.traverse_util.Traversal` will be deprecated',
                            category=DeprecationWarning)
    if kind == 'path_contains':
      value = traversal_spec['value']
      return traverse_util.ModelParamTraversal(lambda path, _: value in path)
    if kind == 'path_regex':
      regex = traversal_spec['value']
      return traverse_util.ModelParamTraversal(lambda path, _: re.search(regex, path) is not None)
    if kind == 'ndim':
      low, high = traversal_spec['low'], traversal_spec['high']
      return traverse_util.ModelParamTraversal(
          lambda _, value: low <= value.ndim and (high is None or value.ndim <= high))
    if kind == 't_identity':
      keys = traversal_spec['key']
      traversal = traverse_util.t_identity
      for key in keys if isinstance(keys, list) else [keys]:
        traversal = traversal[key]
      return traversal
  raise ValueError(f'unknown traversal spec {traversal_spec!r}')


# ----------------------------------------------------------------------------- case types


@dataclasses.dataclass(frozen=True)
class Generic:
  """An optimizer under the generic tests (a def whose learning rate solves the quadratic)."""
  name: str
  spec: dict
  steps: int = 150
  # A hyper-param that can be overridden with traced values, and three values to try.
  override: str = 'learning_rate'
  override_values: tuple = (0.05, 0.04, 0.03)
  # False for optimizers that reject 0-d params (WeightNorm): the quadratic drops its scalar.
  scalar_params: bool = True
  # The value every param starts at (LAMB: a zero param gets trust ratio 0 and never moves).
  start: float = 0.0

  def make(self, optim):
    return build_def(optim, self.spec)

  def __repr__(self):
    return self.name


@dataclasses.dataclass(frozen=True)
class Trajectory:
  """One optimizer run of a trajectory family: ``overrides`` maps a step to its overrides.

  ``overrides`` of a step are ``apply_gradient`` keywords, or ``'hyper_params': {group index
  (str): {field: value}}`` for a MultiOptimizer's per-group ``hyper_params=[hp.replace(...)]``.
  """
  name: str
  spec: dict
  overrides: dict = dataclasses.field(default_factory=dict)
  shapes: Optional[dict] = None      # default: the family's
  variants: Optional[tuple] = None   # ((container, jit), ...); default: the family's product
  # Recorded in the fixture when set: 'legacy' (legacy ran the case itself) or 'composed'
  # (legacy ran each group on its own sub-tree; tools/oracle/_composed.py).
  oracle: Optional[str] = None


# Scalar, 1-D, 2-D, 3-D and 4-D leaves, nested, keys deliberately not in sorted order.
DEFAULT_SHAPES = {
    'dense': {'kernel': (3, 4), 'bias': (4,)},
    'conv': {'kernel': (2, 2, 3, 2)},
    'scale': (),
    'embed': {'table': (5, 3, 2)},
}


@dataclasses.dataclass(frozen=True)
class Family:
  """A golden trajectory file: its runs x containers x jit, seeded from the family name."""
  runs: tuple
  shapes: dict = dataclasses.field(default_factory=lambda: DEFAULT_SHAPES)
  zero: tuple = ()               # leaf names whose initial value is all zeros
  containers: tuple = ('dict', 'frozen')
  jits: tuple = (True, False)
  steps: int = 12


@dataclasses.dataclass(frozen=True)
class Checkpoint:
  """A checkpoint case: 'plain' (a bare optimizer), 'train_state' (inside a user's train state
  with a model state and a DynamicScale) or 'replicated' (``optimizer.replicate()``)."""
  spec: dict
  kind: str = 'plain'
  shapes: Optional[dict] = None   # default: checkpoint_specs.SHAPES
  container: str = 'dict'
  # Also continued eagerly after the restore (eager steps are slow: a representative few).
  eager: bool = False
  # The legacy file saved after that eager continuation (legacy then stores an int64 step).
  eager_file: Optional[str] = None
  # Also a convert golden (tools/oracle/gen_convert.py) when the spec is one built-in alone or a
  # MultiOptimizer of built-ins, in a dict target: legacy continues the legacy file, and restores and continues our conversion.
  convert: bool = True


@dataclasses.dataclass(frozen=True)
class GuideRow:
  """A row of docs/optimizers.md's table: a legacy def next to its closest optax expression.

  ``legacy``, ``optax`` and ``overrides`` are Python expressions evaluated by
  tools/guide_table.py, so the table shows what was run.
  """
  legacy: str
  optax: str
  why: str = ''                    # what differs, when it does
  tree: str = 'default'            # 'default', 'zero_leaf' (+ a zero-initialised f32[7]), 'no_scalar'
  overrides: Optional[str] = None  # step -> apply_gradient(**overrides)


@dataclasses.dataclass(frozen=True)
class Entry:
  """Every case of one optimizer (see the module docstring)."""
  name: str                      # its name in flax.optim / flax_optim_compat
  builtin: bool = True           # an ``optim.X(learning_rate, ...)`` constructor of the package
  # False for an optimizer flax 0.5.3 never had: the oracle cannot run it, so it has no
  # trajectories, checkpoints or pmap cases (their fixtures are the oracle's); its expected
  # values come from plain optax (``optax_state``, ``guide``) or hand math in its tests.
  in_flax_0_5_3: bool = True
  generic: tuple = ()
  trajectories: dict = dataclasses.field(default_factory=dict)    # family name -> Family
  checkpoints: dict = dataclasses.field(default_factory=dict)     # case name -> Checkpoint
  pmap: dict = dataclasses.field(default_factory=dict)  # case name -> (spec, per-step lrs or None)
  optax_state: dict = dataclasses.field(default_factory=dict)     # case name -> spec
  guide: tuple = ()


def check_entry(entry: Entry) -> None:
  """AssertionError naming what ``entry`` lacks: every optimizer has generic cases and a guide
  row; one flax 0.5.3 had has oracle cases of every kind (trajectories, checkpoints, pmap); one
  it never had has none of those and, if built in, its plain optax continuation
  (``optax_state``)."""
  assert entry.generic and entry.guide, f'{entry.name}: no generic case or no guide row'
  oracle = {'trajectories': entry.trajectories, 'checkpoints': entry.checkpoints,
            'pmap': entry.pmap}
  if entry.in_flax_0_5_3:
    missing = [kind for kind, cases in oracle.items() if not cases]
    assert not missing, f'{entry.name}: no {missing} case (fixtures from the oracle)'
  else:
    made_up = [kind for kind, cases in oracle.items() if cases]
    assert not made_up, (f'{entry.name}: flax 0.5.3 never had it, so the oracle cannot make '
                         f'its {made_up} fixtures: take expected values from plain optax')
  if entry.builtin:
    assert entry.optax_state, f'{entry.name}: no optax_state case'


# ----------------------------------------------------------------------------- the catalogue

_ADAM = spec('Adam', learning_rate=0.01, beta1=0.85, beta2=0.99, eps=1e-6, weight_decay=0.01)
_MOMENTUM = spec('Momentum', learning_rate=0.05, beta=0.8, weight_decay=0.01, nesterov=True)
_CUSTOM = spec('custom:SignMomentum', learning_rate=0.01, beta=0.8)
_NO_SCALAR = {'dense': {'kernel': (3, 4), 'bias': (4,)}, 'conv': {'kernel': (2, 2, 3, 2)}}
_TRAIN_STATE_SHAPES = {'dense': {'kernel': (3, 4), 'bias': (4,)}}
# A module without params: flax 0.5.3 writes it as an empty dict (`'Dropout_0': {}`).
_DROPOUT_SHAPES = {'dense': {'kernel': (3, 4), 'bias': (4,)}, 'Dropout_0': {}}

# MultiOptimizer trajectories: leaves named kernel/bias in two layers, two leaves no traversal
# selects (scale, embed/table) and an empty sub-dict; keys deliberately not in sorted order.
_LAYERS = {
    'dense': {'kernel': (3, 4), 'bias': (4,)},
    'conv': {'kernel': (2, 2, 3, 2), 'bias': (2,)},
    'scale': (),
    'embed': {'table': (5, 3)},
    'empty': {},
}
# A linen `{'params': ...}` target: paths are '/params/Dense_0/kernel', ...
_LINEN = {'params': {'Dense_0': {'kernel': (3, 4), 'bias': (4,)},
                     'Dense_1': {'kernel': (4, 2), 'bias': (2,)}}}
# For t_identity[...] (legacy TraverseItem.update cannot write into a FrozenDict: dict only).
_ITEMS = {'a': (3,), 'b': (2, 2), 'c': {'d': (2,)}, 'e': {}}
_ALL = (('dict', True), ('dict', False), ('frozen', True), ('frozen', False))
_MULTI_ADAM = spec('Adam', learning_rate=0.01, beta1=0.85, beta2=0.99, eps=1e-6)
_MULTI_MOMENTUM = spec('Momentum', learning_rate=0.05, beta=0.8)

CATALOGUE = (
    Entry(
        'GradientDescent',
        generic=(Generic('GradientDescent', spec('GradientDescent', learning_rate=0.1)),),
        trajectories={'GradientDescent': Family((
            Trajectory('gd', spec('GradientDescent', learning_rate=0.05),
                       {3: {'learning_rate': 0.2}}),
            Trajectory('gd_lr_per_step', spec('GradientDescent'),
                       {i: {'learning_rate': 0.01 * (i + 1)} for i in range(12)}),
        ))},
        checkpoints={'GradientDescent': Checkpoint(spec('GradientDescent', learning_rate=0.1),
                                                   eager=True)},
        pmap={'GradientDescent': (spec('GradientDescent', learning_rate=0.1), None)},
        optax_state={'GradientDescent': spec('GradientDescent', learning_rate=0.1)},
        guide=(GuideRow('optim.GradientDescent(0.05)', 'optax.sgd(0.05)'),),
    ),
    Entry(
        'Momentum',
        generic=(
            Generic('Momentum', spec('Momentum', learning_rate=0.05, beta=0.8)),
            Generic('Momentum-nesterov-wd', spec('Momentum', learning_rate=0.05, beta=0.8,
                                                 weight_decay=1e-4, nesterov=True),
                    override='beta', override_values=(0.8, 0.7, 0.6)),
        ),
        trajectories={'Momentum': Family((
            Trajectory('momentum', spec('Momentum', learning_rate=0.05, beta=0.8),
                       {2: {'learning_rate': 0.1}}),
            Trajectory('momentum_wd_nesterov',
                       spec('Momentum', learning_rate=0.05, beta=0.8, weight_decay=0.01,
                            nesterov=True),
                       {4: {'beta': 0.5}, 5: {'learning_rate': 0.02}}),
            Trajectory('momentum_wd', spec('Momentum', learning_rate=0.1, beta=0.95,
                                           weight_decay=0.001)),
        ))},
        checkpoints={'Momentum': Checkpoint(_MOMENTUM, eager=True),
                     'Replicated-Momentum': Checkpoint(_MOMENTUM, kind='replicated')},
        pmap={'Momentum': (spec('Momentum', learning_rate=0.05, beta=0.8, weight_decay=0.01,
                                nesterov=True), [0.05, 0.1, 0.02, 0.04, 0.03])},
        optax_state={'Momentum': spec('Momentum', learning_rate=0.1, beta=0.8, weight_decay=0.01,
                                      nesterov=True)},
        guide=(
            GuideRow('optim.Momentum(0.05, beta=0.8)', 'optax.sgd(0.05, momentum=0.8)'),
            GuideRow('optim.Momentum(0.05, beta=0.8, weight_decay=0.01, nesterov=True)',
                     'optax.chain(optax.add_decayed_weights(0.01), optax.trace(0.8, '
                     'nesterov=True), optax.scale(-0.05))'),
        ),
    ),
    Entry(
        'Adam',
        generic=(
            Generic('Adam', spec('Adam', learning_rate=0.1)),
            Generic('Adam-wd', spec('Adam', learning_rate=0.1, weight_decay=1e-4),
                    override='eps', override_values=(1e-3, 1e-2, 1e-1)),
        ),
        trajectories={'Adam': Family((
            Trajectory('adam', spec('Adam', learning_rate=0.01, beta1=0.85, beta2=0.99, eps=1e-6),
                       {1: {'learning_rate': 0.03}, 6: {'beta1': 0.5, 'eps': 1e-3}}),
            Trajectory('adam_wd', spec('Adam', learning_rate=0.01, beta1=0.85, beta2=0.99,
                                       eps=1e-6, weight_decay=0.01),
                       {3: {'weight_decay': 0.1}}),
            Trajectory('adam_defaults', spec('Adam', learning_rate=0.002)),
        ))},
        checkpoints={
            'Adam': Checkpoint(_ADAM, eager=True, eager_file='Adam-after-eager-steps'),
            'Adam-focus': Checkpoint(focused(_ADAM, path_regex('/kernel$'))),
            'Adam-frozen': Checkpoint(_ADAM, container='frozen'),
            'TrainState-Adam': Checkpoint(_ADAM, kind='train_state', shapes=_TRAIN_STATE_SHAPES),
            'TrainState-Adam-Dropout': Checkpoint(_ADAM, kind='train_state',
                                                  shapes=_DROPOUT_SHAPES),
            # Replicated-Momentum is the replicated convert golden.
            'Replicated-Adam': Checkpoint(_ADAM, kind='replicated', convert=False),
        },
        pmap={'Adam': (_ADAM, None),
              'Adam-focus': (focused(spec('Adam', learning_rate=0.01), path_contains('kernel')),
                             None)},
        optax_state={'Adam': spec('Adam', learning_rate=0.05, weight_decay=0.01)},
        guide=(
            GuideRow('optim.Adam(0.01, beta1=0.85, beta2=0.99, eps=1e-6)',
                     'optax.adam(0.01, b1=0.85, b2=0.99, eps=1e-6)'),
            GuideRow('optim.Adam(0.01, beta1=0.85, beta2=0.99, eps=1e-6, weight_decay=0.01)',
                     'optax.adamw(0.01, b1=0.85, b2=0.99, eps=1e-6, weight_decay=0.01)'),
            GuideRow('optim.Adam(0.01)',  # the per-step override of a learning-rate schedule
                     'optax.adam(lambda count: 0.01 * 0.95 ** count)',
                     overrides="lambda step: {'learning_rate': 0.01 * 0.95 ** step}"),
        ),
    ),
    Entry(
        'AdaBelief',
        generic=(Generic('AdaBelief-wd', spec('AdaBelief', learning_rate=0.1, weight_decay=1e-4),
                         override='eps', override_values=(1e-3, 1e-2, 1e-1)),),
        trajectories={'AdaBelief': Family((
            Trajectory('adabelief', spec('AdaBelief', learning_rate=0.01, beta1=0.85, beta2=0.99,
                                         eps=1e-10),
                       {2: {'learning_rate': 0.03}, 7: {'beta2': 0.9}}),
            Trajectory('adabelief_wd', spec('AdaBelief', learning_rate=0.01, beta1=0.85,
                                            beta2=0.99, eps=1e-10, weight_decay=0.01),
                       {4: {'weight_decay': 0.05, 'eps': 1e-6}}),
            Trajectory('adabelief_defaults', spec('AdaBelief', learning_rate=0.003),
                       {5: {'beta1': 0.5}}),
        ))},
        checkpoints={'AdaBelief': Checkpoint(spec('AdaBelief', learning_rate=0.01, beta1=0.85,
                                                  beta2=0.99, eps=1e-10, weight_decay=0.01))},
        pmap={'AdaBelief': (spec('AdaBelief', learning_rate=0.01, beta1=0.85, beta2=0.99,
                                 eps=1e-10, weight_decay=0.01), None)},
        optax_state={'AdaBelief': spec('AdaBelief', learning_rate=0.05)},
        guide=(
            GuideRow('optim.AdaBelief(0.01, beta1=0.85, beta2=0.99, eps=1e-10, weight_decay=0.01)',
                     'optax.chain(optax.scale_by_belief(0.85, 0.99, eps=1e-10, eps_root=1e-10), '
                     'optax.add_decayed_weights(0.01), optax.scale(-0.01))'),
            GuideRow('optim.AdaBelief(0.01, beta1=0.85, beta2=0.99)',
                     'optax.adabelief(0.01, b1=0.85, b2=0.99)',
                     why='`optax.adabelief` defaults `eps=1e-16, eps_root=1e-16` where legacy '
                         'adds its one `eps` (1e-16) both inside the state and outside the sqrt: '
                         'same here'),
        ),
    ),
    Entry(
        'Adadelta',
        generic=(Generic('Adadelta-wd', spec('Adadelta', learning_rate=1.0, eps=1e-2,
                                             weight_decay=1e-4),
                         override='rho', override_values=(0.9, 0.8, 0.7)),),
        trajectories={'Adadelta': Family((
            Trajectory('adadelta_wd', spec('Adadelta', learning_rate=0.5, rho=0.85, eps=1e-5,
                                           weight_decay=0.01),
                       {3: {'rho': 0.7}, 5: {'learning_rate': 1.0}}),
            Trajectory('adadelta', spec('Adadelta', learning_rate=1.0, rho=0.95, eps=1e-4),
                       {6: {'eps': 1e-3}, 8: {'weight_decay': 0.02}}),
            Trajectory('adadelta_defaults', spec('Adadelta', learning_rate=1.0)),
        ))},
        checkpoints={'Adadelta': Checkpoint(spec('Adadelta', learning_rate=0.5, rho=0.85,
                                                 eps=1e-5, weight_decay=0.01))},
        pmap={'Adadelta': (spec('Adadelta', learning_rate=0.5, rho=0.85, eps=1e-5,
                                weight_decay=0.01), None)},
        optax_state={'Adadelta': spec('Adadelta', learning_rate=0.5, weight_decay=0.01)},
        guide=(
            GuideRow('optim.Adadelta(0.5, rho=0.85, eps=1e-5, weight_decay=0.01)',
                     'optax.chain(optax.scale_by_adadelta(0.85, 1e-5), '
                     'optax.add_decayed_weights(0.01), optax.scale(-0.5))'),
            GuideRow('optim.Adadelta(0.5, rho=0.85, eps=1e-5, weight_decay=0.01)',
                     'optax.adadelta(0.5, rho=0.85, eps=1e-5, weight_decay=0.01)',
                     why='`optax.adadelta` adds the decay *before* the adaptive scaling '
                         '(coupled); legacy subtracts `lr * wd * p` after it'),
        ),
    ),
    Entry(
        'Adafactor',
        generic=(
            Generic('Adafactor', spec('Adafactor', learning_rate=0.5)),
            Generic('Adafactor-momentum-factored-wd',
                    spec('Adafactor', learning_rate=0.1, beta1=0.9, min_dim_size_to_factor=2,
                         multiply_by_parameter_scale=False, weight_decay_rate=1e-4),
                    override='beta1', override_values=(0.9, 0.8, 0.7)),
        ),
        trajectories={
            # FrozenDict handling is the adapter's, tested by the other families.
            'Adafactor': Family((
                Trajectory('adafactor_defaults', spec('Adafactor', learning_rate=0.05),
                           {2: {'learning_rate': 0.1}}),
                Trajectory('adafactor_momentum_wd',
                           spec('Adafactor', learning_rate=0.05, beta1=0.9, decay_rate=0.7,
                                clipping_threshold=1.5, weight_decay_rate=1e-3, epsilon2=2e-3),
                           {3: {'decay_rate': 0.9, 'beta1': 0.5},
                            5: {'weight_decay_rate': 0.01, 'clipping_threshold': 0.5}}),
                Trajectory('adafactor_unfactored_plain',
                           spec('Adafactor', learning_rate=0.05, factored=False,
                                multiply_by_parameter_scale=False, clipping_threshold=None),
                           {4: {'learning_rate': 0.01, 'epsilon1': 1e-3}}),
                # min_dim_size_to_factor=2 factors every 2-D+ leaf of DEFAULT_SHAPES; legacy
                # ignores overrides of the three constructor-only fields.
                Trajectory('adafactor_factored_small_dims',
                           spec('Adafactor', learning_rate=0.1, beta1=0.8,
                                min_dim_size_to_factor=2, weight_decay_rate=1e-4),
                           {2: {'factored': 0.0, 'min_dim_size_to_factor': 100.0,
                                'multiply_by_parameter_scale': 0.0, 'step_offset': 1.0,
                                'epsilon2': 0.1},
                            6: {'beta1': 0.95}}),
            ), containers=('dict',)),
            # Both sides of the default threshold 128: (129, 128) factored over axes (1, 0),
            # (127, 128) not factored; one step, jit only, to keep the file near 0.6 MB.
            'Adafactor_threshold': Family(
                (Trajectory('adafactor_threshold', spec('Adafactor', learning_rate=0.05)),),
                shapes={'factored': (129, 128), 'unfactored': (127, 128)}, steps=1,
                containers=('dict',), jits=(True,)),
        },
        checkpoints={
            'Adafactor': Checkpoint(spec('Adafactor', learning_rate=0.05, beta1=0.9,
                                         decay_rate=0.7, min_dim_size_to_factor=2,
                                         weight_decay_rate=1e-3)),
            'Adafactor-defaults': Checkpoint(spec('Adafactor', learning_rate=0.05)),
        },
        pmap={'Adafactor': (spec('Adafactor', learning_rate=0.05, beta1=0.9,
                                 min_dim_size_to_factor=2, weight_decay_rate=1e-3),
                            [0.05, 0.1, 0.05, 0.02, 0.05])},
        optax_state={
            'Adafactor': spec('Adafactor', learning_rate=0.05, beta1=0.9,
                              min_dim_size_to_factor=2),
            'Adafactor-beta1-None': spec('Adafactor', learning_rate=0.05,
                                         min_dim_size_to_factor=2),
        },
        guide=(
            GuideRow('optim.Adafactor(0.05)', 'optax.adafactor(0.05)'),
            GuideRow('optim.Adafactor(0.05, beta1=0.9, decay_rate=0.7, clipping_threshold=1.5, '
                     'weight_decay_rate=1e-3, epsilon2=2e-3)',
                     'optax.chain(optax.scale_by_factored_rms(decay_rate=0.7, step_offset=0, '
                     'min_dim_size_to_factor=128, epsilon=1e-30), optax.clip_by_block_rms(1.5), '
                     'optax.scale(0.05), optax.scale_by_param_block_rms(2e-3), '
                     'optax.ema(0.9, debias=False, accumulator_dtype=jnp.float32), '
                     'optax.add_decayed_weights(1e-3), optax.scale(-1))'),
            GuideRow('optim.Adafactor(0.05, factored=False, multiply_by_parameter_scale=False, '
                     'clipping_threshold=None)',
                     'optax.adafactor(0.05, factored=False, multiply_by_parameter_scale=False, '
                     'clipping_threshold=None)'),
        ),
    ),
    Entry(
        'Adagrad',
        generic=(Generic('Adagrad', spec('Adagrad', learning_rate=0.5),
                         override='eps', override_values=(1e-2, 1e-1, 1.0)),),
        trajectories={'Adagrad': Family((
            Trajectory('adagrad_default_eps', spec('Adagrad', learning_rate=0.1),
                       {2: {'learning_rate': 0.05}}),
            Trajectory('adagrad_eps', spec('Adagrad', learning_rate=0.1, eps=0.01),
                       {5: {'eps': 0.1}}),
            Trajectory('adagrad_lr_per_step', spec('Adagrad', eps=1e-6),
                       {i: {'learning_rate': 0.3 / (i + 1)} for i in range(12)}),
        ))},
        checkpoints={'Adagrad': Checkpoint(spec('Adagrad', learning_rate=0.1, eps=0.01))},
        pmap={'Adagrad': (spec('Adagrad', learning_rate=0.1, eps=0.01), None)},
        optax_state={'Adagrad': spec('Adagrad', learning_rate=0.1)},
        guide=(
            GuideRow('optim.Adagrad(0.1)',
                     'optax.adagrad(0.1, initial_accumulator_value=0.0, eps=1e-8)',
                     why='legacy `g / (sqrt(G) + eps)`, optax `g * rsqrt(G + eps)`: eps inside '
                         'the sqrt; no optax option reproduces it (differs wherever G is near '
                         'eps)'),
            GuideRow('optim.Adagrad(0.1, eps=0.01)',
                     'optax.adagrad(0.1, initial_accumulator_value=0.0, eps=0.01)',
                     why='as above'),
        ),
    ),
    Entry(
        'LAMB',
        generic=(
            Generic('LAMB', spec('LAMB', learning_rate=0.05), start=1.0),
            Generic('LAMB-wd', spec('LAMB', learning_rate=0.05, weight_decay=1e-4), start=1.0,
                    override='eps', override_values=(1e-3, 1e-2, 1e-1)),
        ),
        trajectories={
            'LAMB': Family((
                Trajectory('lamb', spec('LAMB', learning_rate=0.01, beta1=0.85, beta2=0.99,
                                        eps=1e-5),
                           {3: {'learning_rate': 0.03}, 6: {'beta1': 0.5}}),
                Trajectory('lamb_wd', spec('LAMB', learning_rate=0.01, beta1=0.85, beta2=0.99,
                                           weight_decay=0.01, eps=1e-5),
                           {5: {'eps': 1e-3}, 7: {'beta2': 0.9}}),
                Trajectory('lamb_defaults', spec('LAMB', learning_rate=0.005)),
            )),
            # 'bias' and 'scale' start at zero: legacy's zero-norm trust ratios.
            'LAMB_zero_leaf': Family((
                Trajectory('lamb_zero', spec('LAMB', learning_rate=0.01, beta1=0.85, beta2=0.99,
                                             eps=1e-5),
                           {4: {'learning_rate': 0.02}}),
                Trajectory('lamb_zero_wd', spec('LAMB', learning_rate=0.01, weight_decay=0.01)),
            ), zero=('bias', 'scale')),
        },
        checkpoints={'LAMB': Checkpoint(spec('LAMB', learning_rate=0.01, beta1=0.85, beta2=0.99,
                                             weight_decay=0.01, eps=1e-5))},
        pmap={'LAMB': (spec('LAMB', learning_rate=0.01, beta1=0.85, beta2=0.99,
                            weight_decay=0.01, eps=1e-5), None)},
        optax_state={'LAMB': spec('LAMB', learning_rate=0.05, weight_decay=0.01)},
        guide=(
            GuideRow('optim.LAMB(0.01, beta1=0.85, beta2=0.99, weight_decay=0.01, eps=1e-5)',
                     'optax.lamb(0.01, b1=0.85, b2=0.99, eps=1e-5, weight_decay=0.01)'),
            GuideRow('optim.LAMB(0.01, beta1=0.85, beta2=0.99, weight_decay=0.01, eps=1e-5)',
                     'optax.lamb(0.01, b1=0.85, b2=0.99, eps=1e-5, weight_decay=0.01)',
                     tree='zero_leaf',
                     why='trust ratio of a zero param: legacy 0 (a zero-initialised param never '
                         'moves, so max rel is infinite), optax 1'),
        ),
    ),
    Entry(
        'LARS',
        generic=(
            # The quadratic starts at zero params, where LARS's trust ratio is 1.
            Generic('LARS', spec('LARS', learning_rate=0.1, trust_coefficient=0.5)),
            Generic('LARS-wd-nesterov', spec('LARS', learning_rate=0.1, trust_coefficient=0.5,
                                             weight_decay=1e-4, nesterov=True),
                    override='beta', override_values=(0.9, 0.8, 0.7)),
        ),
        trajectories={
            'LARS': Family((
                Trajectory('lars_nesterov', spec('LARS', learning_rate=0.1, beta=0.8,
                                                 trust_coefficient=0.01, eps=1e-6, nesterov=True),
                           {2: {'learning_rate': 0.3}, 5: {'beta': 0.5}}),
                Trajectory('lars_wd', spec('LARS', learning_rate=0.1, beta=0.8, weight_decay=0.01,
                                           trust_coefficient=0.01, eps=1e-6),
                           {4: {'trust_coefficient': 0.02}, 7: {'eps': 1e-3}}),
                Trajectory('lars_wd_nesterov', spec('LARS', learning_rate=0.5, beta=0.9,
                                                    weight_decay=0.001, nesterov=True),
                           {3: {'learning_rate': 1.0}}),
            )),
            'LARS_zero_leaf': Family((
                Trajectory('lars_zero_wd', spec('LARS', learning_rate=0.1, beta=0.8,
                                                weight_decay=0.01, trust_coefficient=0.01,
                                                eps=1e-6)),
            ), zero=('bias', 'scale')),
        },
        checkpoints={'LARS': Checkpoint(spec('LARS', learning_rate=0.1, beta=0.8,
                                             weight_decay=0.01, trust_coefficient=0.01, eps=1e-6,
                                             nesterov=True))},
        pmap={'LARS': (spec('LARS', learning_rate=0.1, beta=0.8, weight_decay=0.01,
                            trust_coefficient=0.01, eps=1e-6, nesterov=True), None)},
        optax_state={'LARS': spec('LARS', learning_rate=0.1, weight_decay=0.01)},
        guide=(
            GuideRow('optim.LARS(0.1, beta=0.8, trust_coefficient=0.01, eps=1e-6, nesterov=True)',
                     'optax.lars(0.1, weight_decay=0.0, trust_coefficient=0.01, eps=1e-6, '
                     'momentum=0.8, nesterov=True)'),
            GuideRow('optim.LARS(0.1, beta=0.8, weight_decay=0.01, trust_coefficient=0.01, '
                     'eps=1e-6)',
                     'optax.lars(0.1, weight_decay=0.01, trust_coefficient=0.01, eps=1e-6, '
                     'momentum=0.8)',
                     why='trust-ratio denominator: legacy `norm(g) + wd * norm(p) + eps`, optax '
                         '`norm(g + wd * p) + eps`'),
        ),
    ),
    Entry(
        'RMSProp',
        generic=(
            Generic('RMSProp', spec('RMSProp', learning_rate=0.03),
                    override='beta2', override_values=(0.9, 0.8, 0.7)),
            Generic('RMSProp-centered', spec('RMSProp', learning_rate=0.03, beta2=0.8, eps=1e-3,
                                             centered=True),
                    override='eps', override_values=(1e-3, 1e-2, 1e-1)),
        ),
        trajectories={'RMSProp': Family((
            Trajectory('rmsprop', spec('RMSProp', learning_rate=0.01, beta2=0.85),
                       {2: {'learning_rate': 0.02}, 6: {'beta2': 0.95}}),
            Trajectory('rmsprop_eps', spec('RMSProp', learning_rate=0.01, beta2=0.85, eps=1e-3),
                       {4: {'eps': 1e-2}}),
            Trajectory('rmsprop_centered', spec('RMSProp', learning_rate=0.01, beta2=0.85,
                                                eps=1e-3, centered=True),
                       {3: {'learning_rate': 0.005}, 8: {'beta2': 0.7}}),
        ))},
        checkpoints={
            'RMSProp': Checkpoint(spec('RMSProp', learning_rate=0.01, beta2=0.85), eager=True),
            'RMSProp-centered': Checkpoint(spec('RMSProp', learning_rate=0.01, beta2=0.85,
                                                eps=1e-3, centered=True)),
        },
        pmap={'RMSProp': (spec('RMSProp', learning_rate=0.01, beta2=0.85, eps=1e-3,
                               centered=True), None)},
        optax_state={'RMSProp-centered': spec('RMSProp', learning_rate=0.01, centered=True)},
        guide=(
            GuideRow('optim.RMSProp(0.01, beta2=0.85)',
                     'optax.rmsprop(0.01, decay=0.85, eps=1e-8, eps_in_sqrt=False)'),
            GuideRow('optim.RMSProp(0.01, beta2=0.85, eps=1e-3)',
                     'optax.rmsprop(0.01, decay=0.85, eps=1e-3)',
                     why="optax's default `eps_in_sqrt=True` puts eps inside the sqrt; legacy "
                         'outside'),
            GuideRow('optim.RMSProp(0.01, beta2=0.85, eps=1e-3, centered=True)',
                     'optax.rmsprop(0.01, decay=0.85, eps=1e-3, centered=True, '
                     'eps_in_sqrt=False)'),
        ),
    ),
    Entry(
        'WeightNorm',
        builtin=False,
        generic=(
            Generic('WeightNorm-Momentum',
                    weight_norm(spec('Momentum', learning_rate=0.05, beta=0.8)),
                    scalar_params=False),
            Generic('WeightNorm-Adam', weight_norm(spec('Adam', learning_rate=0.1), wn_decay=1e-4),
                    override='eps', override_values=(1e-3, 1e-2, 1e-1), scalar_params=False),
        ),
        # No scalar leaves (legacy WeightNorm raises IndexError on them).
        trajectories={'WeightNorm': Family((
            Trajectory('wn_momentum',
                       weight_norm(spec('Momentum', learning_rate=0.05, beta=0.8), wn_decay=0.01),
                       {2: {'learning_rate': 0.1, 'wn_decay': 0.05},
                        4: {'beta': 0.5, 'wn_eps': 1e-4}}),
            Trajectory('wn_adam',
                       weight_norm(spec('Adam', learning_rate=0.01, beta1=0.85, beta2=0.99,
                                        eps=1e-6, weight_decay=0.01),
                                   wn_decay=0.001, wn_eps=1e-6),
                       {3: {'learning_rate': 0.03, 'wn_decay': 0.1}, 6: {'eps': 1e-3}}),
            # Also the inner Adafactor's beta1=None -> 0.9 override for one step (its (1,) `m`
            # placeholders take the leaves' shapes); no scalar leaves here, whose shape legacy
            # would change to (1,).
            Trajectory('wn_adafactor',
                       weight_norm(spec('Adafactor', learning_rate=0.05,
                                        min_dim_size_to_factor=2), wn_decay=0.02),
                       {3: {'beta1': 0.9, 'decay_rate': 0.6, 'wn_eps': 1e-3}}),
        ), shapes={'dense': {'kernel': (3, 4), 'bias': (4,)}, 'conv': {'kernel': (2, 2, 3, 2)},
                   'row': (1, 3), 'embed': {'table': (5, 3, 2)}})},
        checkpoints={
            'WeightNorm-Momentum': Checkpoint(
                weight_norm(spec('Momentum', learning_rate=0.05, beta=0.8), wn_decay=1e-3),
                shapes=_NO_SCALAR),
            'WeightNorm-Adam': Checkpoint(weight_norm(_ADAM), shapes=_NO_SCALAR),
        },
        pmap={'WeightNorm-Momentum': (
            weight_norm(spec('Momentum', learning_rate=0.1, beta=0.8), wn_decay=1e-3),
            [0.1, 0.05, 0.1, 0.1, 0.02])},
        guide=(
            GuideRow('optim.WeightNorm(optim.Momentum(0.05, beta=0.8))',
                     'optax.sgd(0.05, momentum=0.8)',
                     tree='no_scalar',
                     why='no optax counterpart: this is the plain inner optimizer, i.e. what '
                         'dropping WeightNorm changes (legacy WeightNorm rejects 0-d params, so '
                         'no `scalar` leaf)'),
        ),
    ),
    Entry(
        'MultiOptimizer',
        builtin=False,
        generic=(Generic('MultiOptimizer-Adam-Momentum',
                         multi((ndim(low=2), spec('Adam', learning_rate=0.1)),
                               (ndim(high=1), spec('Momentum', learning_rate=0.05, beta=0.8)))),),
        # Per-group overrides are the legacy idiom `hyper_params=[hp.replace(...), ...]`.
        # Legacy MultiOptimizer cannot take a WeightNorm group (it calls `init_param_state`):
        # that case is 'composed' from stand-alone legacy runs of each group.
        trajectories={'MultiOptimizer': Family((
            Trajectory('kernel_adam_bias_momentum',
                       multi((path_contains('kernel'), _MULTI_ADAM),
                             (path_contains('bias'), _MULTI_MOMENTUM)),
                       {2: {'learning_rate': 0.02},
                        4: {'hyper_params': {'0': {'learning_rate': 0.03}, '1': {'beta': 0.5}}},
                        5: {'hyper_params': {'1': {'learning_rate': 0.2}}},
                        8: {'hyper_params': {'0': {'eps': 1e-3}}, 'learning_rate': 0.04}},
                       _LAYERS, _ALL, 'legacy'),
            Trajectory('three_groups_custom',
                       multi((path_contains('dense'), spec('custom:SignMomentum',
                                                           learning_rate=0.01, beta=0.8)),
                             (path_contains('conv'), spec('GradientDescent', learning_rate=0.1)),
                             (path_contains('embed'), spec('Adam', learning_rate=0.002,
                                                           weight_decay=0.01))),
                       {3: {'hyper_params': {'0': {'learning_rate': 0.05},
                                             '2': {'weight_decay': 0.1}}},
                        6: {'learning_rate': 0.01}},
                       _LAYERS, (('dict', True), ('frozen', False)), 'legacy'),
            Trajectory('more_builtins',
                       multi((path_contains('kernel'), spec('Adafactor', learning_rate=0.05,
                                                            beta1=0.9, min_dim_size_to_factor=2)),
                             (path_contains('bias'), spec('RMSProp', learning_rate=0.01,
                                                          beta2=0.85, centered=True)),
                             (path_contains('table'), spec('LAMB', learning_rate=0.01,
                                                           weight_decay=0.01)),
                             (path_contains('scale'), spec('Adagrad', learning_rate=0.1))),
                       {1: {'hyper_params': {'0': {'learning_rate': 0.1},
                                             '3': {'learning_rate': 0.3}}},
                        5: {'learning_rate': 0.02}},
                       _LAYERS, (('frozen', True),), 'legacy'),
            Trajectory('linen_params',
                       multi((path_contains('/params/Dense_0/'),
                              spec('Momentum', learning_rate=0.05, beta=0.9, weight_decay=0.01,
                                   nesterov=True)),
                             (path_contains('Dense_1/kernel'), _MULTI_ADAM)),
                       {2: {'hyper_params': {'1': {'learning_rate': 0.05}}}},
                       _LINEN, (('dict', True), ('frozen', False)), 'legacy'),
            Trajectory('focus_kernel', focused(_MULTI_MOMENTUM, path_contains('kernel')),
                       {3: {'learning_rate': 0.1}},
                       _LAYERS, (('dict', False), ('frozen', True)), 'legacy'),
            Trajectory('identity_items',
                       multi((item('a'), spec('GradientDescent', learning_rate=0.1)),
                             (item('b'), _MULTI_MOMENTUM)),
                       {2: {'hyper_params': {'0': {'learning_rate': 0.5}}},
                        4: {'learning_rate': 0.01}},
                       _ITEMS, (('dict', True), ('dict', False)), 'legacy'),
            Trajectory('focus_identity', focused(_MULTI_ADAM, item('b')),
                       {1: {'learning_rate': 0.05}}, _ITEMS, (('dict', True),), 'legacy'),
            Trajectory('weight_norm_group',
                       multi((path_contains('kernel'), weight_norm(_MULTI_MOMENTUM,
                                                                   wn_decay=0.01)),
                             (path_contains('bias'), _MULTI_ADAM)),
                       {2: {'learning_rate': 0.02},
                        5: {'hyper_params': {'1': {'learning_rate': 0.05}}}},
                       _LAYERS, (('frozen', True),), 'composed'),
        ), steps=8)},
        checkpoints={
            # Kernels with Adam, biases with Momentum, the scalar leaf unoptimized (state None).
            'MultiOptimizer': Checkpoint(multi((path_regex('/kernel$'), _ADAM),
                                               (path_regex('/bias$'), _MOMENTUM)), eager=True),
            # GradientDescent's `()` states next to `None` states.
            'MultiOptimizer-GradientDescent': Checkpoint(
                multi((path_regex('^/dense/'), spec('GradientDescent', learning_rate=0.1)))),
            'TrainState-MultiOptimizer': Checkpoint(multi((path_regex('/kernel$'), _MOMENTUM)),
                                                    kind='train_state',
                                                    shapes=_TRAIN_STATE_SHAPES),
        },
        # /out/bias is matched by no group: it never moves, its state is None.
        pmap={'MultiOptimizer': (
            multi((path_contains('kernel'), spec('Momentum', learning_rate=0.1, beta=0.8)),
                  (path_contains('/hidden/bias'), spec('Adam', learning_rate=0.01))),
            [0.1, 0.05, 0.1, 0.2, 0.1])},
        guide=(
            GuideRow("optim.MultiOptimizer("
                     "(optim.ModelParamTraversal(lambda path, _: path.endswith('/kernel')), "
                     "optim.Adam(0.01)), "
                     "(optim.ModelParamTraversal(lambda path, _: path.endswith('/bias')), "
                     "optim.Momentum(0.05, beta=0.8)))",
                     "optax.multi_transform({'kernel': optax.adam(0.01), "
                     "'bias': optax.sgd(0.05, momentum=0.8), 'none': optax.set_to_zero()}, "
                     "label_by_path)"),
            GuideRow("optim.MultiOptimizer("
                     "(optim.ModelParamTraversal(lambda path, _: path.endswith('/kernel')), "
                     "optim.Momentum(0.05, beta=0.8)), "
                     "(optim.ModelParamTraversal(lambda path, _: path.endswith('/bias')), "
                     "optim.Momentum(0.005, beta=0.8)))",
                     "optax.chain(optax.trace(decay=0.8), optax.masked(optax.scale(-0.05), "
                     "mask_for('kernel')), optax.masked(optax.scale(-0.005), mask_for('bias')))",
                     why="the masked chain of flax's optax update guide: a param matched by no "
                         "mask (`scalar`, `t3`, `big`) still gets the shared `trace` as its "
                         "update, i.e. moves *up* the gradient; legacy leaves it untouched. Use "
                         "`multi_transform` (row above)"),
        ),
    ),
    Entry(
        'custom:SignMomentum',
        builtin=False,
        trajectories={'custom': Family((
            Trajectory('sign_momentum', _CUSTOM, {2: {'learning_rate': 0.05}}),
        ))},
        checkpoints={'custom-SignMomentum': Checkpoint(_CUSTOM, eager=True)},
        pmap={'custom-SignMomentum': (_CUSTOM, None)},
    ),
)


def _merged(field):
  out = {}
  for entry in CATALOGUE:
    for key, value in getattr(entry, field).items():
      assert key not in out, f'{field}: {key!r} in two catalogue entries'
      out[key] = value
  return out


BUILTINS = tuple(entry.name for entry in CATALOGUE if entry.builtin)
# The legacy classes with a checkpoint layout of their own: the package registers these, and
# they are the names `--optimizer` accepts.
LAYOUT_CLASSES = BUILTINS + ('WeightNorm',)
# Built-ins whose checkpoints hold the same per-parameter fields (a file cannot tell them
# apart), in the order messages name them: 'Momentum or LARS', 'Adam, AdaBelief or LAMB'.
SAME_LAYOUT = (('Momentum', 'LARS'), ('Adam', 'AdaBelief', 'LAMB'))
GENERIC = tuple(case for entry in CATALOGUE for case in entry.generic)
TRAJECTORY_FAMILIES = _merged('trajectories')
CHECKPOINTS = _merged('checkpoints')
PMAP = _merged('pmap')
OPTAX_STATE = _merged('optax_state')
GUIDE_ROWS = tuple(row for entry in CATALOGUE for row in entry.guide)
# The checkpoint cases that are also convert goldens (see `Checkpoint.convert`).
def _convertible(spec) -> bool:
  """One built-in alone, or a MultiOptimizer of built-ins, without focus."""
  if 'focus' in spec:
    return False
  if spec['name'] == 'MultiOptimizer':
    return all(_convertible(group) for _, group in spec['groups'])
  return spec['name'] in BUILTINS


CONVERT = {name: case for name, case in CHECKPOINTS.items()
           if case.convert and _convertible(case.spec) and case.container == 'dict'}
