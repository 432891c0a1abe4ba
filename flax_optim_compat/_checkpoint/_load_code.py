"""The plain flax + optax code that loads what ``convert`` wrote (the CLI prints it).

The code names the user's ``params`` (their model's, for the structure) and, for an orbax
output, each key carried beside the train state by its own name (``model_state``): orbax
restores into a template of the same structure, msgpack fills the TrainState's fields from
the file. The TrainState class declares exactly the carried keys (flax refuses a field the
file lacks, and a key the class lacks); orbax is given the absolute path (it refuses a
relative one).
"""
import keyword
import os
from typing import List, Optional, Tuple

from flax.training import train_state as flax_train_state

from . import _state_dict
from ._codec import CheckpointError

_CORE = ('step', 'params', 'opt_state')
_TAKEN = frozenset(dir(flax_train_state.TrainState))


def _node(state_dict) -> Tuple[Tuple[str, ...], List[str]]:
  """``(path of the {params, opt_state} node, the keys carried beside it)``."""
  found = _state_dict.find(state_dict, _state_dict.is_train_state)
  if len(found) != 1:
    raise CheckpointError(f'{len(found)} {{params, opt_state}} nodes: not a converted tree.')
  node = _state_dict.at(state_dict, found[0])
  return found[0], sorted(str(k) for k in node if k not in _CORE)


def not_python_names(state_dict) -> List[str]:
  """The carried keys a TrainState cannot declare as fields (not identifiers, or taken)."""
  return [k for k in _node(state_dict)[1]
          if not k.isidentifier() or keyword.iskeyword(k) or k in _TAKEN]


def python(state_dict, *, path: str, orbax: bool, tx: str, labels: Optional[str] = None,
           as_dict: bool = False) -> Optional[str]:
  """The Python that loads ``state_dict`` as written to ``path`` (None where carried keys are
  not Python names: :func:`not_python_names`).

  Args:
    state_dict: the converted tree (``Conversion.state_dict``).
    path: the output path (made absolute for orbax).
    orbax: an orbax directory (else msgpack).
    tx: the optax expression, as source.
    labels: a ``param_labels = ...`` line the expression needs (a MultiOptimizer's).
    as_dict: a ``{'step', 'params', 'opt_state', ...}`` dict template (``--to optax``)
      instead of a TrainState.
  """
  node_path, carried = _node(state_dict)
  if not_python_names(state_dict):
    return None
  imports = ['import optax']
  if labels:
    imports += ['import re', 'import flax']
  if tx.startswith('optim.'):
    imports.append('import flax_optim_compat as optim')
  imports.append('import orbax.checkpoint as ocp' if orbax else 'from flax import serialization')
  lines = []
  given = ''.join(f', {k}={k}' for k in carried) if orbax else ''
  if as_dict:
    fields = ''.join(f', {k!r}: {k if orbax else None}' for k in carried)
    create = f"{{'step': 0, 'params': params, 'opt_state': tx.init(params){fields}}}"
  elif carried:
    imports += ['from typing import Any', 'from flax.training import train_state']
    lines += ['class TrainState(train_state.TrainState):']
    lines += [f'  {k}: Any = None' for k in carried]
    lines.append('')
    create = f'TrainState.create(apply_fn=None, params=params, tx=tx{given})'
  else:
    imports.append('from flax.training import train_state')
    create = 'train_state.TrainState.create(apply_fn=None, params=params, tx=tx)'
  lines += ([labels] if labels else []) + [f'tx = {tx}', f'template = {create}']
  where = ''.join(f'[{k!r}]' for k in node_path)
  if orbax:
    target = repr(os.path.abspath(path))
    if not node_path:
      lines.append(f'state = ocp.StandardCheckpointer().restore({target}, template)')
    else:
      lines += ['checkpointer = ocp.StandardCheckpointer()',
                f'stored = checkpointer.restore({target})  # the file\'s own tree, as stored',
                f'stored{where} = template',
                f'state = checkpointer.restore({target}, stored){where}']
  else:
    lines.append(f'with open({path!r}, \'rb\') as f:')
    if not node_path:
      lines.append('  state = serialization.from_bytes(template, f.read())')
    else:
      lines += ['  raw = serialization.msgpack_restore(f.read())',
                f'state = serialization.from_state_dict(template, raw{where})']
  return '\n'.join(imports + [''] + lines) + '\n'
