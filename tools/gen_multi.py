"""Golden MultiOptimizer / ``create(focus=...)`` trajectories from the REAL legacy flax.optim.

Run in the legacy oracle venv (see ../shared/legacy-oracle/setup.sh), from the repo root:

    ~/.cache/legacy-flax-oracle/bin/python tools/gen_multi.py

Writes tests/fixtures/trajectories/MultiOptimizer.msgpack in the format of
tools/gen_trajectories.py, so tests/test_trajectories.py replays every case with the shared
driver (tests/oracle_specs.py): traversal specs are built with ``flax.traverse_util`` on both
sides, per-group overrides become ``hyper_params=[hp.replace(...), ...]`` as in the legacy
docstring.

Legacy MultiOptimizer cannot take a WeightNorm group (it calls ``init_param_state``). Cases
marked ``'oracle': 'composed'`` get their expectation from the legacy library by composition
instead: each group's optimizer runs stand-alone (legacy) on the sub-tree its traversal selects,
with the same grads, overrides and (shared) step, and the state dicts are merged into the
MultiOptimizer layout (unmatched leaves: target unchanged, state ``None``). The composition is
checked here against legacy MultiOptimizer itself on the cases legacy can run.
"""
import copy
import os
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'tests'))
warnings.simplefilter('ignore')

import jax  # noqa: E402
import numpy as np  # noqa: E402
from flax import optim  # noqa: E402
from flax import serialization  # noqa: E402
from flax.core import freeze  # noqa: E402

import oracle_specs  # noqa: E402

warnings.simplefilter('ignore')  # flax.optim re-enables its DeprecationWarnings on import

OUT = os.path.join(HERE, '..', 'tests', 'fixtures', 'trajectories', 'MultiOptimizer.msgpack')
FAMILY = 'MultiOptimizer'
STEPS = 8


def _spec(name, **kwargs):
  return {'name': name, 'kwargs': kwargs}


def _path(value):
  return {'kind': 'path_contains', 'value': value}


def _item(key):
  return {'kind': 't_identity', 'key': key}


def _multi(*groups):
  return {'name': 'MultiOptimizer', 'groups': [[t, o] for t, o in groups]}


# Leaves named kernel/bias in two layers, two leaves no traversal selects (scale, embed/table)
# and an empty sub-dict; keys deliberately not in sorted order.
LAYERS = {
    'dense': {'kernel': (3, 4), 'bias': (4,)},
    'conv': {'kernel': (2, 2, 3, 2), 'bias': (2,)},
    'scale': (),
    'embed': {'table': (5, 3)},
    'empty': {},
}
# A linen `{'params': ...}` target: paths are '/params/Dense_0/kernel', ...
LINEN = {'params': {'Dense_0': {'kernel': (3, 4), 'bias': (4,)},
                    'Dense_1': {'kernel': (4, 2), 'bias': (2,)}}}
# For t_identity[...] (legacy TraverseItem.update cannot write into a FrozenDict: dict only).
ITEMS = {'a': (3,), 'b': (2, 2), 'c': {'d': (2,)}, 'e': {}}

ADAM = _spec('Adam', learning_rate=0.01, beta1=0.85, beta2=0.99, eps=1e-6)
MOMENTUM = _spec('Momentum', learning_rate=0.05, beta=0.8)

ALL = (('dict', True), ('dict', False), ('frozen', True), ('frozen', False))

# (case name, spec, {step: overrides}, shapes, (container, jit) variants,
#  oracle: 'legacy' | 'composed')
CASES = [
    ('kernel_adam_bias_momentum', _multi((_path('kernel'), ADAM), (_path('bias'), MOMENTUM)),
     {2: {'learning_rate': 0.02},
      4: {'hyper_params': {'0': {'learning_rate': 0.03}, '1': {'beta': 0.5}}},
      5: {'hyper_params': {'1': {'learning_rate': 0.2}}},
      8: {'hyper_params': {'0': {'eps': 1e-3}}, 'learning_rate': 0.04}},
     LAYERS, ALL, 'legacy'),
    ('three_groups_custom',
     _multi((_path('dense'), _spec('custom:SignMomentum', learning_rate=0.01, beta=0.8)),
            (_path('conv'), _spec('GradientDescent', learning_rate=0.1)),
            (_path('embed'), _spec('Adam', learning_rate=0.002, weight_decay=0.01))),
     {3: {'hyper_params': {'0': {'learning_rate': 0.05}, '2': {'weight_decay': 0.1}}},
      6: {'learning_rate': 0.01}},
     LAYERS, (('dict', True), ('frozen', False)), 'legacy'),
    ('more_builtins',
     _multi((_path('kernel'), _spec('Adafactor', learning_rate=0.05, beta1=0.9,
                                    min_dim_size_to_factor=2)),
            (_path('bias'), _spec('RMSProp', learning_rate=0.01, beta2=0.85, centered=True)),
            (_path('table'), _spec('LAMB', learning_rate=0.01, weight_decay=0.01)),
            (_path('scale'), _spec('Adagrad', learning_rate=0.1))),
     {1: {'hyper_params': {'0': {'learning_rate': 0.1}, '3': {'learning_rate': 0.3}}},
      5: {'learning_rate': 0.02}},
     LAYERS, (('frozen', True),), 'legacy'),
    ('linen_params',
     _multi((_path('/params/Dense_0/'),
             _spec('Momentum', learning_rate=0.05, beta=0.9, weight_decay=0.01, nesterov=True)),
            (_path('Dense_1/kernel'), ADAM)),
     {2: {'hyper_params': {'1': {'learning_rate': 0.05}}}},
     LINEN, (('dict', True), ('frozen', False)), 'legacy'),
    ('focus_kernel', dict(MOMENTUM, focus=_path('kernel')), {3: {'learning_rate': 0.1}},
     LAYERS, (('dict', False), ('frozen', True)), 'legacy'),
    ('identity_items',
     _multi((_item('a'), _spec('GradientDescent', learning_rate=0.1)), (_item('b'), MOMENTUM)),
     {2: {'hyper_params': {'0': {'learning_rate': 0.5}}}, 4: {'learning_rate': 0.01}},
     ITEMS, (('dict', True), ('dict', False)), 'legacy'),
    ('focus_identity', dict(ADAM, focus=_item('b')), {1: {'learning_rate': 0.05}},
     ITEMS, (('dict', True),), 'legacy'),
    ('weight_norm_group',
     _multi((_path('kernel'), {'name': 'WeightNorm', 'kwargs': {'wn_decay': 0.01},
                               'wrapped': MOMENTUM}),
            (_path('bias'), ADAM)),
     {2: {'learning_rate': 0.02}, 5: {'hyper_params': {'1': {'learning_rate': 0.05}}}},
     LAYERS, (('frozen', True),), 'composed'),
]


# ----------------------------------------------------------------------------- composition


def _flat(tree, prefix=()):
  """{key tuple: leaf} of a nested dict (empty sub-dicts dropped)."""
  out = {}
  for key, value in tree.items():
    if isinstance(value, dict):
      out.update(_flat(value, prefix + (key,)))
    else:
      out[prefix + (key,)] = value
  return out


def _nest(flat):
  out = {}
  for keys, value in flat.items():
    node = out
    for key in keys[:-1]:
      node = node.setdefault(key, {})
    node[keys[-1]] = value
  return out


def _selected(traversal_spec, target):
  """Key tuples of the leaves a path_contains traversal selects (legacy path spelling)."""
  assert traversal_spec['kind'] == 'path_contains', traversal_spec
  return [keys for keys in _flat(target) if traversal_spec['value'] in '/' + '/'.join(keys)]


def _compose(case):
  """The MultiOptimizer trajectory from stand-alone legacy runs of each group."""
  spec = case['optimizer']
  expected = {}
  for g, (traversal_spec, group_spec) in enumerate(spec['groups']):
    keys = _selected(traversal_spec, case['target'])
    sub = lambda tree, keys=keys: _nest({k: _flat(tree)[k] for k in keys})
    overrides = {}
    for step, step_overrides in case['overrides'].items():
      plain = {k: v for k, v in step_overrides.items() if k != 'hyper_params'}
      plain.update(step_overrides.get('hyper_params', {}).get(str(g), {}))
      overrides[step] = plain
    sub_case = dict(case, optimizer=group_spec, target=sub(case['target']),
                    grads={s: sub(grads) for s, grads in case['grads'].items()},
                    overrides=overrides)
    run = oracle_specs.run_trajectory(optim, sub_case, jax=jax,
                                      to_state_dict=serialization.to_state_dict, freeze=freeze)
    for step, state_dict in run.items():
      merged = expected.setdefault(step, {'target': {}, 'param_states': {}, 'step': None})
      merged['target'].update(_flat(state_dict['target']))
      # Per-leaf states are dicts themselves: flatten the param_states only down to a leaf.
      for leaf_keys in keys:
        node = state_dict['state']['param_states']
        for key in leaf_keys:
          node = node[key]
        merged['param_states'][leaf_keys] = node
      merged['step'] = state_dict['state']['step']
  out = {}
  initial = _flat(case['target'])
  for step, merged in expected.items():
    target = {k: merged['target'].get(k, initial[k]) for k in initial}
    states = {k: merged['param_states'].get(k) for k in initial}
    target_tree, states_tree = _nest(target), _nest(states)
    _add_empty(target_tree, case['target'])
    _add_empty(states_tree, case['target'])
    out[step] = {'target': target_tree,
                 'state': {'step': merged['step'], 'param_states': states_tree}}
  return out


def _add_empty(tree, like):
  for key, value in like.items():
    if isinstance(value, dict):
      if not value:
        tree[key] = {}
      else:
        _add_empty(tree.setdefault(key, {}), value)


def _max_diff(a, b):
  if isinstance(b, dict):
    assert set(a) == set(b), (sorted(a), sorted(b))
    return max([_max_diff(a[k], b[k]) for k in b] or [0.0])
  if b is None:
    assert a is None
    return 0.0
  return float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)), initial=0.0))


# ----------------------------------------------------------------------------- main


def main():
  cases = {}
  for n, (name, spec, overrides, shapes, variants, oracle) in enumerate(CASES):
    made = {}
    for container, jit in variants:
      made.update(oracle_specs.make_cases([(name, spec, overrides)], steps=STEPS,
                                          seed=sum(map(ord, FAMILY)) + n, shapes=shapes,
                                          containers=(container,), jits=(jit,)))
    for case_name, case in made.items():
      case = copy.deepcopy(case)
      case['oracle'] = oracle
      if oracle == 'legacy':
        case['expected'] = oracle_specs.run_trajectory(
            optim, case, jax=jax, to_state_dict=serialization.to_state_dict, freeze=freeze)
        if spec['name'] == 'MultiOptimizer' and all(
            t['kind'] == 'path_contains' for t, _ in spec['groups']):
          # The composition used for 'composed' cases reproduces legacy MultiOptimizer.
          diff = _max_diff(_compose(case), case['expected'])
          print(f'  {case_name}: composition vs legacy MultiOptimizer max abs diff {diff:.3g}')
          assert diff <= 1e-5, diff
      else:
        case['expected'] = _compose(case)
      cases[case_name] = case
  os.makedirs(os.path.dirname(OUT), exist_ok=True)
  with open(OUT, 'wb') as f:
    f.write(serialization.msgpack_serialize({'family': FAMILY, 'cases': cases}))
  print(f'{OUT}: {len(cases)} cases, {os.path.getsize(OUT)} bytes')


if __name__ == '__main__':
  main()
