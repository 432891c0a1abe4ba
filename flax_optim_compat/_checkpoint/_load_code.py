"""The plain flax + optax code that loads what ``convert`` wrote (the CLI prints it).

An output format (``_formats``) names how its output is read back (a :class:`Reader`: msgpack,
orbax) and into what (a :class:`Template`: a TrainState, a dict); :func:`python` puts the two
together. The code names the user's ``params`` (their model's, for the structure) and, where
the reader restores into a template of the same structure (orbax), each key carried beside
the train state by its own name (``model_state``); msgpack fills the TrainState's fields from
the file. The TrainState class declares exactly the carried keys (flax refuses a field the file
lacks, and a key the class lacks); orbax is given the absolute path (it refuses a relative
one). The imports are those of the names the code uses, so it runs as printed.
"""
import ast
import builtins
import dataclasses
import keyword
import os
from typing import Callable, List, Mapping, Optional, Sequence, Tuple

from flax.training import train_state as flax_train_state

from . import _state_dict
from ._codec import CheckpointError

_CORE = ('step', 'params', 'opt_state')
_TAKEN = frozenset(dir(flax_train_state.TrainState))

# The import of each name the printed code may use, in the order they are printed. The tx's own
# names come from ``--tx`` (parsed against an allowlist: optax, jnp / jax.numpy dtypes) or the
# default expression (optax, or this package's ``optim`` where no plain optax is exact).
IMPORTS = {
    'optax': 'import optax',
    'jax': 'import jax',
    'jnp': 'import jax.numpy as jnp',
    'np': 'import numpy as np',
    'numpy': 'import numpy',
    're': 'import re',
    'flax': 'import flax',
    'optim': 'import flax_optim_compat as optim',
    'ocp': 'import orbax.checkpoint as ocp',
    'serialization': 'from flax import serialization',
    'Any': 'from typing import Any',
    'train_state': 'from flax.training import train_state',
}


@dataclasses.dataclass(frozen=True)
class Reader:
  """How the printed code reads an output back.

  Attributes:
    restore: ``restore(path, node_path)`` -> the lines that set ``state`` from ``template``
      (``node_path``: where the train state sits in the file's tree, ``()`` at the top).
    carried_from_template: the reader restores into a template of the file's structure, so the
      template holds each carried key's value, given by its own name (orbax); else the file
      fills them (msgpack).
    imports: ``{name: import line}`` of the names its lines use beyond :data:`IMPORTS`.
  """
  restore: Callable[[str, Tuple[str, ...]], List[str]]
  carried_from_template: bool = False
  imports: Mapping[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Template:
  """What the printed code restores into.

  Attributes:
    create: ``create(carried, given)`` -> ``(lines before, the template expression)``;
      ``carried`` the keys beside the train state, ``given`` whether their values are given
      (:attr:`Reader.carried_from_template`).
  """
  create: Callable[[Sequence[str], bool], Tuple[List[str], str]]


def _msgpack_restore(path: str, node_path: Tuple[str, ...]) -> List[str]:
  lines = [f'with open({path!r}, \'rb\') as f:']
  if not node_path:
    return lines + ['  state = serialization.from_bytes(template, f.read())']
  return lines + ['  raw = serialization.msgpack_restore(f.read())',
                  f'state = serialization.from_state_dict(template, raw{_where(node_path)})']


def _orbax_restore(path: str, node_path: Tuple[str, ...]) -> List[str]:
  target = repr(os.path.abspath(path))
  if not node_path:
    return [f'state = ocp.StandardCheckpointer().restore({target}, template)']
  where = _where(node_path)
  return ['checkpointer = ocp.StandardCheckpointer()',
          f'stored = checkpointer.restore({target})  # the file\'s own tree, as stored',
          f'stored{where} = template',
          f'state = checkpointer.restore({target}, stored){where}']


MSGPACK = Reader(_msgpack_restore)
ORBAX = Reader(_orbax_restore, carried_from_template=True)


def _train_state(carried: Sequence[str], given: bool) -> Tuple[List[str], str]:
  values = ''.join(f', {k}={k}' for k in carried) if given else ''
  if not carried:
    return [], 'train_state.TrainState.create(apply_fn=None, params=params, tx=tx)'
  lines = ['class TrainState(train_state.TrainState):'] + [f'  {k}: Any = None' for k in carried]
  return lines + [''], f'TrainState.create(apply_fn=None, params=params, tx=tx{values})'


def _dict(carried: Sequence[str], given: bool) -> Tuple[List[str], str]:
  fields = ''.join(f', {k!r}: {k if given else None}' for k in carried)
  return [], f"{{'step': 0, 'params': params, 'opt_state': tx.init(params){fields}}}"


TRAIN_STATE = Template(_train_state)
DICT = Template(_dict)   # ``{'step', 'params', 'opt_state', ...}``: flax ignores what it lacks


def _where(node_path: Tuple[str, ...]) -> str:
  return ''.join(f'[{k!r}]' for k in node_path)


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


def free_names(code: str) -> List[str]:
  """The names ``code`` reads and never binds (nor are builtins), in order of first use."""
  tree = ast.parse(code)
  bound = set(dir(builtins))
  for node in ast.walk(tree):
    if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
      bound.add(node.id)
    elif isinstance(node, ast.arg):
      bound.add(node.arg)
    elif isinstance(node, (ast.ClassDef, ast.FunctionDef)):
      bound.add(node.name)
  used = [n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]
  return list(dict.fromkeys(n for n in used if n not in bound))


def python(state_dict, *, path: str, tx: str, reader: Reader, template: Template,
           labels: Optional[str] = None) -> Optional[str]:
  """The Python that loads ``state_dict`` as written to ``path``, its imports included; None
  where carried keys are not Python names (:func:`not_python_names`), ``tx`` is not Python
  source, or the code would use a
  name no import in :data:`IMPORTS` (or the reader's own) gives (it would not run as printed).

  Args:
    state_dict: the converted tree (``Conversion.state_dict``).
    path: the output path.
    tx: the optax expression, as source.
    reader: how the output is read back (:data:`MSGPACK`, :data:`ORBAX`, a format's own).
    template: what it is read into (:data:`TRAIN_STATE`, :data:`DICT`, a format's own).
    labels: a ``param_labels = ...`` line the expression needs (a MultiOptimizer's).
  """
  node_path, carried = _node(state_dict)
  if not_python_names(state_dict):
    return None
  lines, create = template.create(carried, reader.carried_from_template)
  lines += ([labels] if labels else []) + [f'tx = {tx}', f'template = {create}']
  lines += reader.restore(os.fspath(path), node_path)
  body = '\n'.join(lines) + '\n'
  # What the user gives: the model's params, and the carried values a template takes by name.
  given = {'params', *(carried if reader.carried_from_template else ())}
  try:
    used = free_names(body)
  except SyntaxError:   # a tx that is not Python source (a schedule written as <function ...>)
    return None
  needed = [name for name in used if name not in given]
  known = {**IMPORTS, **reader.imports}
  if any(name not in known for name in needed):
    return None
  imports = [line for name, line in known.items() if name in needed]
  return '\n'.join(imports) + '\n\n' + body
