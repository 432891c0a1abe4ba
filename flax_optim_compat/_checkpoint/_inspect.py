"""What ``convert.inspect`` reports about a checkpoint's state dict: tree, step, optimizer."""
import dataclasses
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import optax

from . import _codec
from .. import _layouts
from . import _replicas
from . import _state_dict
from .. import _state_check
from .. import _tree


def _leaf_summary(leaf) -> Tuple[Optional[Tuple[int, ...]], Optional[str], int]:
  if isinstance(leaf, _codec.LeafMeta):
    return leaf.shape, leaf.dtype.name, leaf.nbytes
  if _state_check.is_array(leaf, with_values=True):
    return tuple(np.shape(leaf)), np.dtype(leaf.dtype).name, int(leaf.nbytes)
  if leaf is None:
    return None, 'None', 0
  if isinstance(leaf, dict):
    return None, '{}', 0
  return None, f'{type(leaf).__name__} {_short(leaf)}', 0


def _short(value) -> str:
  text = repr(value)
  return text if len(text) <= 60 else text[:57] + '...'


def _count(leaf) -> int:
  shape, _, _ = _leaf_summary(leaf)
  return int(np.prod(shape, dtype=np.int64)) if shape is not None else 0


@dataclasses.dataclass
class CheckpointInfo:
  """What :func:`inspect` found in a checkpoint.

  Attributes:
    source: the file read (for a directory: its latest ``checkpoint_<N>``), or 'the bytes' /
      'the state dict'.
    optimizer_path: where the optimizer sits ('/' when the file is a bare optimizer).
    container: ``'bare optimizer'`` or ``'train state'``.
    step: the optimizer's step (None if the file has none).
    optimizer: the optimizer that wrote it, from the per-parameter state fields (None if
      unknown); optimizers with the same fields are named together ('Adam, AdaBelief or LAMB').
    groups: ``[(optimizer, [param path, ...]), ...]`` (one group unless MultiOptimizer/focus).
    param_count: number of parameters (elements of the target).
    param_bytes: bytes of the target.
    total_bytes: bytes of every array in the file.
    leaves: ``[(path, shape, dtype, nbytes), ...]`` of every leaf; for ``None``, empty dicts
      and Python scalars, shape is None and dtype says what it is ('None', '{}', 'int 3').
    notes: remarks on old layouts.
    replicas: for a file saved with a leading device axis on every optimizer leaf
      (``jax_utils.replicate(optimizer)`` written without unreplicating), the number of
      replicas; ``param_count``/``param_bytes`` then count one replica. None otherwise.
    optax_state: for what ``convert`` wrote (container ``'converted train state'``, at
      ``optimizer_path``): its ``opt_state`` as optax's state types, named by their fields
      (``'(ScaleByAdamState(count, mu, nu), EmptyState(), EmptyState())'``); else None.
    carried: the keys ``convert`` carried beside that train state (``model_state``, ...).
  """
  source: str
  optimizer_path: Optional[str]
  container: Optional[str]
  step: Optional[int]
  optimizer: Optional[str]
  groups: List[Tuple[str, List[str]]]
  param_count: int
  param_bytes: int
  total_bytes: int
  leaves: List[Tuple[str, Optional[Tuple[int, ...]], Optional[str], int]]
  notes: List[str]
  replicas: Optional[int] = None
  optax_state: Optional[str] = None
  carried: List[str] = dataclasses.field(default_factory=list)

  def summary(self) -> str:
    """One line: optimizer, step, where it sits, params and bytes."""
    if self.optax_state is not None:
      where = '' if self.optimizer_path == '/' else f' at {self.optimizer_path}'
      carried = (f'carried beside it: {", ".join(self.carried)}; ' if self.carried else
                 'nothing carried beside it; ')
      step = f'at step {self.step}' if self.step is not None else 'without a step'
      return (f'a converted TrainState{where} {step}, opt_state {self.optax_state}; {carried}'
              f'{self.param_count:,} params ({_human(self.param_bytes)}), '
              f'{len(self.leaves)} leaves, {_human(self.total_bytes)} of arrays')
    where = ('a bare optimizer' if self.optimizer_path == '/' else
             f'a train state (optimizer at {self.optimizer_path})' if self.optimizer_path
             else 'no optimizer')
    if self.replicas:
      where += f' replicated {self.replicas}x (a leading device axis on every leaf)'
    return (f'{self.optimizer or "unknown optimizer"} at step {self.step}, {where}; '
            f'{self.param_count:,} params ({_human(self.param_bytes)}), '
            f'{len(self.leaves)} leaves, {_human(self.total_bytes)} of arrays')

  def as_dict(self) -> Dict[str, Any]:
    """A JSON-ready dict (lists for shapes)."""
    out = dataclasses.asdict(self)
    out['groups'] = [{'optimizer': g, 'params': p} for g, p in self.groups]
    out['leaves'] = [{'path': p, 'shape': list(s) if s is not None else None, 'dtype': d,
                      'bytes': b} for p, s, d, b in self.leaves]
    return out

  def tree(self, depth: Optional[int] = None) -> str:
    """The tree as indented text, subtrees below ``depth`` summed into one line.

    ``depth=0`` gives one line for the whole tree; None the whole tree.

    Raises:
      ValueError: ``depth`` is negative.
    """
    if depth is not None and depth < 0:
      raise ValueError(f'depth must be None or a non-negative int, not {depth!r}.')
    if depth == 0:
      return f'/ ... {len(self.leaves)} leaves, {_human(sum(x[3] for x in self.leaves))}'
    lines = []
    seen = set()
    for path, shape, dtype, nbytes in self.leaves:
      parts = path.strip('/').split('/') if path != '/' else []
      for i in range(len(parts) - 1):
        prefix = tuple(parts[:i + 1])
        if depth is not None and i + 1 >= depth:
          break
        if prefix not in seen:
          seen.add(prefix)
          lines.append('  ' * i + parts[i] + '/')
      if depth is not None and len(parts) > depth:
        prefix = tuple(parts[:depth])
        if prefix not in seen:
          seen.add(prefix)
          sub = [x for x in self.leaves
                 if tuple(x[0].strip('/').split('/')[:depth]) == prefix]
          lines.append('  ' * (depth - 1) + f'{parts[depth - 1]}/ ... {len(sub)} leaves, '
                       f'{_human(sum(x[3] for x in sub))}')
        continue
      what = f'{dtype}{list(shape)}  {_human(nbytes)}' if shape is not None else dtype
      lines.append('  ' * (len(parts) - 1) + f'{parts[-1] if parts else "/"}  {what}'.rstrip())
    return '\n'.join(lines)


def _human(nbytes: int) -> str:
  for unit in ('B', 'KB', 'MB', 'GB'):
    if nbytes < 1000 or unit == 'GB':
      return f'{nbytes:.0f} {unit}' if unit == 'B' else f'{nbytes:.1f} {unit}'
    nbytes /= 1000
  return ''


def _scalar(leaf) -> Optional[int]:
  """The step a leaf holds: an integer (the first of an array), else None."""
  if _state_check.is_array(leaf, with_values=True) and np.size(leaf) >= 1:
    if _tree.dtype_kind(leaf.dtype) in 'iu':
      return int(np.ravel(np.asarray(leaf))[0])
    return None
  if isinstance(leaf, int) and not isinstance(leaf, bool):
    return leaf
  return None


def _step_note(leaf) -> Optional[str]:
  """What is wrong with a step leaf that :func:`_scalar` cannot read, or None."""
  if leaf is None or _scalar(leaf) is not None:
    return None
  shape, what, _ = _leaf_summary(leaf)
  if shape is not None:  # an array of another kind
    what = f'{what}{list(shape)}'
    if not isinstance(leaf, _codec.LeafMeta) and np.size(leaf):
      what += f' holding {_short(np.ravel(np.asarray(leaf))[0].item())}'
  return f'the step is {what}, not an integer'



def _unknown_fields_note(target, param_states) -> str:
  for path, _ in _state_dict.leaves(target):
    node = param_states
    for key in path:
      node = node.get(key) if isinstance(node, dict) else None
    if _layouts.name_leaf_state(node) is None:
      what = (f'fields {sorted(node, key=str)}' if isinstance(node, dict)
              else 'no state' if node is None else f'a {type(node).__name__}')
      return (f'the per-parameter state of {_tree.join_keys(path)} ({what}) matches no known '
              'optimizer (a custom OptimizerDef?)')
  return 'the per-parameter states do not mirror the target'



def _optax_state_types():
  """``{frozenset(fields): (name, fields)}`` of optax's public state NamedTuples (first name
  in alphabetical order where several have the same fields, ``EmptyState`` for none)."""
  table = {frozenset(): ('EmptyState', ())}
  for name in sorted(dir(optax)):
    cls = getattr(optax, name)
    if (not name.startswith('_') and name.endswith('State') and isinstance(cls, type)
        and issubclass(cls, tuple) and hasattr(cls, '_fields')):
      table.setdefault(frozenset(cls._fields), (name, tuple(cls._fields)))
  return table


_NESTED_STATES = ('inner_state', 'inner_opt_state', 'fast_state')


def optax_state_text(node, table=None) -> str:
  """An optax state read from a file (dicts, ``{}``/None for empty states), written as the
  optax types its fields name: ``(ScaleByAdamState(count, mu, nu), EmptyState())``."""
  table = _optax_state_types() if table is None else table
  if _state_check.is_empty(node):
    return 'EmptyState()'
  if not isinstance(node, dict):
    return 'an array'
  keys = [str(k) for k in node]
  if all(k.isdigit() for k in keys):  # a tuple: optax.chain's states
    ordered = sorted(node, key=lambda k: int(k))
    inner = ', '.join(optax_state_text(node[k], table) for k in ordered)
    return f'({inner}{"," if len(ordered) == 1 else ""})'
  found = table.get(frozenset(keys))
  if found is None:
    return '{' + ', '.join(sorted(keys)) + '}'
  name, fields = found
  parts = []
  for field in fields:
    if field in _NESTED_STATES:
      parts.append(f'{field}={optax_state_text(node[field], table)}')
    elif field == 'inner_states' and isinstance(node[field], dict):
      labels = ', '.join(f'{k!r}: {optax_state_text(v, table)}'
                         for k, v in node[field].items())
      parts.append(f'{field}={{{labels}}}')
    else:
      parts.append(field)
  return f'{name}({", ".join(parts)})'


def _converted_info(tree, path, source, leaves) -> 'CheckpointInfo':
  """The :class:`CheckpointInfo` of what ``convert`` wrote: its train state node at ``path``."""
  node = _state_dict.at(tree, path)
  notes = []
  params = [leaf for _, leaf in _state_dict.leaves(node['params'])]
  step = node.get('step')
  if _step_note(step):
    notes.append(_step_note(step))
  counts = {_scalar(leaf) for p, leaf in _state_dict.leaves(node['opt_state']) if p[-1:] == ('count',)}
  counts.discard(None)
  if counts and _scalar(step) is not None and counts != {_scalar(step)}:
    notes.append(f'the optax count ({", ".join(map(str, sorted(counts)))}) differs from the '
                 f'step ({_scalar(step)}): the legacy optimizer\'s own step was kept in the count')
  if path:
    around = sorted(str(k) for k in _state_dict.at(tree, path[:-1]) if str(k) != path[-1])
    notes.append(f'the file\'s own tree around it: {", ".join(around) or "nothing"} (the '
                 'layout kept: --keep-layout, or an optimizer that sat deeper)')
  if len(_state_dict.find(tree, _state_dict.is_train_state)) > 1:
    notes.append('several {params, opt_state} nodes: described the first')
  return CheckpointInfo(
      source=source, optimizer_path=_tree.join_keys(path) or '/',
      container='converted train state', step=_scalar(step), optimizer=None, groups=[],
      param_count=sum(_count(leaf) for leaf in params),
      param_bytes=sum(_leaf_summary(leaf)[2] for leaf in params),
      total_bytes=sum(x[3] for x in leaves), leaves=leaves, notes=notes,
      optax_state=optax_state_text(node['opt_state']),
      carried=sorted(str(k) for k in node if k not in ('step', 'params', 'opt_state')))


def checkpoint_info(tree: dict, source: str) -> 'CheckpointInfo':
  """The :class:`CheckpointInfo` of a state dict read from ``source`` (a file name)."""
  leaves = []
  for path, leaf in _state_dict.leaves(tree):
    shape, dtype, nbytes = _leaf_summary(leaf)
    leaves.append((_tree.join_keys(path), shape, dtype, nbytes))
  found = _state_dict.find_optimizers(tree)
  converted = _state_dict.find(tree, _state_dict.is_train_state) if isinstance(tree, dict) else []
  if converted and not found:
    return _converted_info(tree, converted[0], source, leaves)
  notes = []
  optimizer_path = container = step = name = replicas = None
  groups: List[Tuple[str, List[str]]] = []
  param_count = param_bytes = 0
  if len(found) > 1:
    notes.append(f'{len(found)} optimizers, at {", ".join(_tree.join_keys(p) for p in found)}; '
                 'described: the first')
  if found:
    path = found[0]
    node = _state_dict.at(tree, path)
    optimizer_path = _tree.join_keys(path)
    container = 'bare optimizer' if not path else 'train state'
    target, state = node['target'], node['state']
    target_leaves = [leaf for _, leaf in _state_dict.leaves(target)]
    param_count = sum(_count(leaf) for leaf in target_leaves)
    param_bytes = sum(_leaf_summary(leaf)[2] for leaf in target_leaves)
    replicas = _replicas.count(node)
    if replicas:
      param_count //= replicas
      param_bytes //= replicas
      notes.append(f'replicated: every leaf has a leading device axis of {replicas} (saved '
                   'without unreplicating); convert takes replica 0 after checking that the '
                   'replicas agree (--replica N to choose one)')
    if _layouts.is_per_group_multi_state(state):
      notes.append('MultiOptimizer layout of flax < 0.3.3 (one state per sub-optimizer, each '
                   'with its own step); flax >= 0.3.3 and this package cannot restore it')
      for key in sorted(state, key=lambda k: (len(str(k)), str(k))):
        group = state[key]
        group_name = _layouts.name_param_states(target, group.get('param_states'))
        groups.append((f'group {key}: {group_name or "unknown"}', []))
        step = step if step is not None else _scalar(group.get('step'))
        if _step_note(group.get('step')):
          notes.append(f'group {key}: {_step_note(group.get("step"))}')
      name = 'MultiOptimizer from flax < 0.3.3'
    else:
      step = _scalar(state.get('step'))
      if _step_note(state.get('step')):
        notes.append(_step_note(state.get('step')))
      name = _layouts.name_param_states(target, state.get('param_states'))
      grouped = _layouts.group_param_states(target, state.get('param_states'))
      groups = [(g, [_tree.join_keys(p) for p in paths]) for g, paths in (grouped or [])]
      if grouped is None:
        notes.append(_unknown_fields_note(target, state.get('param_states')))
      for g, _ in groups:
        if 'flax <' in g:
          notes.append(f'{g}: an old layout this package reports but does not restore')
  return CheckpointInfo(
      source=source, optimizer_path=optimizer_path, container=container, step=step,
      optimizer=name, groups=groups, param_count=param_count, param_bytes=param_bytes,
      total_bytes=sum(x[3] for x in leaves), leaves=leaves, notes=notes, replicas=replicas)
