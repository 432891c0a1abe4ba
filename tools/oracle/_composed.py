"""A MultiOptimizer trajectory composed from legacy runs of each group on its own sub-tree.

Legacy MultiOptimizer cannot take a WeightNorm group (it calls ``init_param_state``), so such
cases get their expectation by composition: each group's optimizer runs stand-alone on the
sub-tree its ``path_contains`` traversal selects, with the same grads, overrides (global ones
plus the group's ``hyper_params`` ones) and shared step, and the state dicts are merged into the
MultiOptimizer layout (unmatched leaves: target unchanged, state ``None``).
"""
import numpy as np


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


def _add_empty(tree, like):
  for key, value in like.items():
    if isinstance(value, dict):
      if not value:
        tree[key] = {}
      else:
        _add_empty(tree.setdefault(key, {}), value)


def run_composed(case, run_trajectory):
  """The state dicts of ``case`` (a MultiOptimizer case) per step, by composition.

  Args:
    case: a trajectory case whose optimizer spec is a MultiOptimizer of path_contains groups.
    run_trajectory: ``case -> {step: state dict}`` in the legacy library.
  """
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
    for step, state_dict in run_trajectory(sub_case).items():
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


def max_abs_diff(a, b):
  """max |a - b| over two state dicts with the same keys and ``None``s."""
  if isinstance(b, dict):
    assert set(a) == set(b), (sorted(a), sorted(b))
    return max([max_abs_diff(a[k], b[k]) for k in b] or [0.0])
  if b is None:
    assert a is None
    return 0.0
  return float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)), initial=0.0))
