"""Golden trajectories from the REAL legacy flax.optim (flax 0.5.3), for the differential tests.

Run in the legacy oracle venv (see ../shared/legacy-oracle/setup.sh), from the repo root:

    ~/.cache/legacy-flax-oracle/bin/python tools/gen_trajectories.py [FAMILY ...]

Writes tests/fixtures/trajectories/<FAMILY>.msgpack, one file per family below. Each holds the
cases (optimizer spec, target, grads, per-step overrides, jit or eager) and what the legacy
library produced: the state dict of the optimizer after creation and after every step. The
driver is tests/oracle_specs.py, the same code the tests run against flax_optim_compat.
"""
import os
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'tests'))
warnings.simplefilter('ignore')

import jax  # noqa: E402
from flax import optim  # noqa: E402
from flax import serialization  # noqa: E402
from flax.core import freeze  # noqa: E402

import oracle_specs  # noqa: E402

warnings.simplefilter("ignore")  # flax.optim re-enables its DeprecationWarnings on import

OUT_DIR = os.path.join(HERE, '..', 'tests', 'fixtures', 'trajectories')


def _spec(name, **kwargs):
  return {'name': name, 'kwargs': kwargs}


# family -> [(case name, optimizer spec, {step: overrides})]. Non-default hyper-params
# throughout; overrides on some steps exercise traced values under jit.
FAMILIES = {
    'GradientDescent': [
        ('gd', _spec('GradientDescent', learning_rate=0.05), {3: {'learning_rate': 0.2}}),
        ('gd_lr_per_step', _spec('GradientDescent'),
         {i: {'learning_rate': 0.01 * (i + 1)} for i in range(12)}),
    ],
    'Momentum': [
        ('momentum', _spec('Momentum', learning_rate=0.05, beta=0.8), {2: {'learning_rate': 0.1}}),
        ('momentum_wd_nesterov',
         _spec('Momentum', learning_rate=0.05, beta=0.8, weight_decay=0.01, nesterov=True),
         {4: {'beta': 0.5}, 5: {'learning_rate': 0.02}}),
        ('momentum_wd', _spec('Momentum', learning_rate=0.1, beta=0.95, weight_decay=0.001), {}),
    ],
    'Adam': [
        ('adam', _spec('Adam', learning_rate=0.01, beta1=0.85, beta2=0.99, eps=1e-6),
         {1: {'learning_rate': 0.03}, 6: {'beta1': 0.5, 'eps': 1e-3}}),
        ('adam_wd', _spec('Adam', learning_rate=0.01, beta1=0.85, beta2=0.99, eps=1e-6,
                          weight_decay=0.01), {3: {'weight_decay': 0.1}}),
        ('adam_defaults', _spec('Adam', learning_rate=0.002), {}),
    ],
    'AdaBelief': [
        ('adabelief', _spec('AdaBelief', learning_rate=0.01, beta1=0.85, beta2=0.99, eps=1e-10),
         {2: {'learning_rate': 0.03}, 7: {'beta2': 0.9}}),
        ('adabelief_wd', _spec('AdaBelief', learning_rate=0.01, beta1=0.85, beta2=0.99, eps=1e-10,
                               weight_decay=0.01), {4: {'weight_decay': 0.05, 'eps': 1e-6}}),
        ('adabelief_defaults', _spec('AdaBelief', learning_rate=0.003), {5: {'beta1': 0.5}}),
    ],
    'Adadelta': [
        ('adadelta_wd', _spec('Adadelta', learning_rate=0.5, rho=0.85, eps=1e-5, weight_decay=0.01),
         {3: {'rho': 0.7}, 5: {'learning_rate': 1.0}}),
        ('adadelta', _spec('Adadelta', learning_rate=1.0, rho=0.95, eps=1e-4),
         {6: {'eps': 1e-3}, 8: {'weight_decay': 0.02}}),
        ('adadelta_defaults', _spec('Adadelta', learning_rate=1.0), {}),
    ],
    'Adagrad': [
        ('adagrad_default_eps', _spec('Adagrad', learning_rate=0.1), {2: {'learning_rate': 0.05}}),
        ('adagrad_eps', _spec('Adagrad', learning_rate=0.1, eps=0.01), {5: {'eps': 0.1}}),
        ('adagrad_lr_per_step', _spec('Adagrad', eps=1e-6),
         {i: {'learning_rate': 0.3 / (i + 1)} for i in range(12)}),
    ],
    'LAMB': [
        ('lamb', _spec('LAMB', learning_rate=0.01, beta1=0.85, beta2=0.99, eps=1e-5),
         {3: {'learning_rate': 0.03}, 6: {'beta1': 0.5}}),
        ('lamb_wd', _spec('LAMB', learning_rate=0.01, beta1=0.85, beta2=0.99, weight_decay=0.01,
                          eps=1e-5), {5: {'eps': 1e-3}, 7: {'beta2': 0.9}}),
        ('lamb_defaults', _spec('LAMB', learning_rate=0.005), {}),
    ],
    # 'bias' and 'scale' start at zero (see FAMILY_TARGETS): legacy's zero-norm trust ratios.
    'LAMB_zero_leaf': [
        ('lamb_zero', _spec('LAMB', learning_rate=0.01, beta1=0.85, beta2=0.99, eps=1e-5),
         {4: {'learning_rate': 0.02}}),
        ('lamb_zero_wd', _spec('LAMB', learning_rate=0.01, weight_decay=0.01), {}),
    ],
    'LARS': [
        ('lars_nesterov', _spec('LARS', learning_rate=0.1, beta=0.8, trust_coefficient=0.01,
                                eps=1e-6, nesterov=True),
         {2: {'learning_rate': 0.3}, 5: {'beta': 0.5}}),
        ('lars_wd', _spec('LARS', learning_rate=0.1, beta=0.8, weight_decay=0.01,
                          trust_coefficient=0.01, eps=1e-6),
         {4: {'trust_coefficient': 0.02}, 7: {'eps': 1e-3}}),
        ('lars_wd_nesterov', _spec('LARS', learning_rate=0.5, beta=0.9, weight_decay=0.001,
                                   nesterov=True), {3: {'learning_rate': 1.0}}),
    ],
    'LARS_zero_leaf': [
        ('lars_zero_wd', _spec('LARS', learning_rate=0.1, beta=0.8, weight_decay=0.01,
                               trust_coefficient=0.01, eps=1e-6), {}),
    ],
    'RMSProp': [
        ('rmsprop', _spec('RMSProp', learning_rate=0.01, beta2=0.85),
         {2: {'learning_rate': 0.02}, 6: {'beta2': 0.95}}),
        ('rmsprop_eps', _spec('RMSProp', learning_rate=0.01, beta2=0.85, eps=1e-3),
         {4: {'eps': 1e-2}}),
        ('rmsprop_centered', _spec('RMSProp', learning_rate=0.01, beta2=0.85, eps=1e-3,
                                   centered=True),
         {3: {'learning_rate': 0.005}, 8: {'beta2': 0.7}}),
    ],
    # <<< issue-3a families (AdaBelief, Adadelta, Adagrad, LAMB, LARS, RMSProp) >>>
    'Adafactor': [
        ('adafactor_defaults', _spec('Adafactor', learning_rate=0.05), {2: {'learning_rate': 0.1}}),
        ('adafactor_momentum_wd',
         _spec('Adafactor', learning_rate=0.05, beta1=0.9, decay_rate=0.7, clipping_threshold=1.5,
               weight_decay_rate=1e-3, epsilon2=2e-3),
         {3: {'decay_rate': 0.9, 'beta1': 0.5}, 5: {'weight_decay_rate': 0.01,
                                                    'clipping_threshold': 0.5}}),
        ('adafactor_unfactored_plain',
         _spec('Adafactor', learning_rate=0.05, factored=False, multiply_by_parameter_scale=False,
               clipping_threshold=None), {4: {'learning_rate': 0.01, 'epsilon1': 1e-3}}),
        # min_dim_size_to_factor=2 factors every 2-D+ leaf of DEFAULT_SHAPES; overrides of the
        # three constructor-only fields are ignored by legacy.
        ('adafactor_factored_small_dims',
         _spec('Adafactor', learning_rate=0.1, beta1=0.8, min_dim_size_to_factor=2,
               weight_decay_rate=1e-4),
         {2: {'factored': 0.0, 'min_dim_size_to_factor': 100.0,
              'multiply_by_parameter_scale': 0.0, 'step_offset': 1.0, 'epsilon2': 0.1},
          6: {'beta1': 0.95}}),
    ],
    # Both sides of the default threshold 128 (see FAMILY_TARGETS; one step, jit only, to keep
    # the fixture near 0.6 MB): (129, 128) factored over axes (1, 0), (127, 128) not factored.
    'Adafactor_threshold': [
        ('adafactor_threshold', _spec('Adafactor', learning_rate=0.05), {}),
    ],
    # No scalar leaves (legacy WeightNorm raises IndexError on them); see FAMILY_TARGETS.
    'WeightNorm': [
        ('wn_momentum', {'name': 'WeightNorm', 'kwargs': {'wn_decay': 0.01},
                         'wrapped': _spec('Momentum', learning_rate=0.05, beta=0.8)},
         {2: {'learning_rate': 0.1, 'wn_decay': 0.05}, 4: {'beta': 0.5, 'wn_eps': 1e-4}}),
        ('wn_adam', {'name': 'WeightNorm', 'kwargs': {'wn_decay': 0.001, 'wn_eps': 1e-6},
                     'wrapped': _spec('Adam', learning_rate=0.01, beta1=0.85, beta2=0.99,
                                      eps=1e-6, weight_decay=0.01)},
         {3: {'learning_rate': 0.03, 'wn_decay': 0.1}, 6: {'eps': 1e-3}}),
        # Also the inner Adafactor's beta1=None -> 0.9 override for one step (its (1,) `m`
        # placeholders take the leaves' shapes); no scalar leaves here, whose shape legacy
        # would change to (1,).
        ('wn_adafactor', {'name': 'WeightNorm', 'kwargs': {'wn_decay': 0.02},
                          'wrapped': _spec('Adafactor', learning_rate=0.05,
                                           min_dim_size_to_factor=2)},
         {3: {'beta1': 0.9, 'decay_rate': 0.6, 'wn_eps': 1e-3}}),
    ],
    # <<< issue-3b families (Adafactor, WeightNorm) >>>
    'custom': [
        ('sign_momentum', _spec('custom:SignMomentum', learning_rate=0.01, beta=0.8),
         {2: {'learning_rate': 0.05}}),
    ],
}


# family -> extra make_cases arguments for its targets (``shapes=``, ``zero=``); default: none.
FAMILY_TARGETS = {
    'LAMB_zero_leaf': {'zero': ('bias', 'scale')},
    'LARS_zero_leaf': {'zero': ('bias', 'scale')},
    'Adafactor': {'containers': ('dict',)},  # FrozenDict handling is the adapter's, tested elsewhere
    'Adafactor_threshold': {'shapes': {'factored': (129, 128), 'unfactored': (127, 128)},
                            'steps': 1, 'containers': ('dict',), 'jits': (True,)},
    'WeightNorm': {'shapes': {'dense': {'kernel': (3, 4), 'bias': (4,)},
                              'conv': {'kernel': (2, 2, 3, 2)}, 'row': (1, 3),
                              'embed': {'table': (5, 3, 2)}}},
}


def generate(family):
  cases = oracle_specs.make_cases(FAMILIES[family], seed=sum(map(ord, family)),
                                 **FAMILY_TARGETS.get(family, {}))
  for name, case in cases.items():
    case['expected'] = oracle_specs.run_trajectory(
        optim, case, jax=jax, to_state_dict=serialization.to_state_dict, freeze=freeze)
  os.makedirs(OUT_DIR, exist_ok=True)
  path = os.path.join(OUT_DIR, f'{family}.msgpack')
  with open(path, 'wb') as f:
    f.write(serialization.msgpack_serialize({'family': family, 'cases': cases}))
  print(f'{path}: {len(cases)} cases, {os.path.getsize(path)} bytes')


if __name__ == '__main__':
  for fam in sys.argv[1:] or sorted(FAMILIES):
    generate(fam)
