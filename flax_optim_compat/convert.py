"""Inspect, diff and convert legacy ``flax.optim`` checkpoints: to optax, a TrainState, orbax, and back.

Every function takes a *source*: a path (a msgpack file, or a directory holding flax
``checkpoint_<N>`` files: the latest is read), raw msgpack ``bytes``, or an already-loaded state
dict. The optimizer is found wherever it sits: a bare ``{'target', 'state'}`` as
``Optimizer.state_dict()`` writes it, or inside a train state (``{'step', 'optimizer',
'model_state', ...}``) at any depth. Replicated optimizers are stored as one copy (no device
axis), so they read like plain ones.

* :func:`inspect` reports the tree (paths, shapes, dtypes, bytes), the step, where the optimizer
  sits and which optimizer wrote it (per group for ``MultiOptimizer`` / ``focus=``), without
  building the optimizer (and without materialising arrays when given a path).
* :func:`to_optax`, :func:`to_train_state` and :func:`to_orbax` restore the file through the
  strict restore of ``optimizer_def`` (a mismatching optimizer fails with a message naming the
  optimizer the file looks like) and hand back ``optimizer_def.optax_transform()`` with the
  file's state as its optax state, so training continues with the legacy numbers.
* :func:`to_legacy` goes back: params and optax state to a legacy state dict (and a msgpack
  file) that flax 0.5.3 itself restores.
* :func:`diff` compares two checkpoints leaf by leaf.

The same is available from the command line: ``python -m flax_optim_compat --help``.
"""
import os
from typing import Any, Mapping, NamedTuple, Optional, Tuple, Union

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import serialization
from flax.training import train_state as flax_train_state

from . import _codec
from . import _diff
from . import _inspect
from . import _layouts
from . import _orbax_io
from . import _outputs
from . import _sources
from . import _state_dict
from . import _tree
from ._codec import CheckpointError
from ._diff import DiffResult
from ._inspect import CheckpointInfo
from .base import Optimizer
from .base import OptimizerDef
from .base import OptimizerState

__all__ = ['CheckpointError', 'CheckpointInfo', 'DiffResult', 'ConvertedCheckpoint', 'load',
           'load_converted', 'inspect', 'to_optax', 'to_train_state', 'to_orbax', 'to_legacy',
           'diff', 'write_msgpack', 'check_new_output', 'checkpoint_file']

Source = Union[str, os.PathLike, bytes, bytearray, memoryview, Mapping]


# ----------------------------------------------------------------------------- reading


def load(source: Source) -> dict:
  """The state dict of a msgpack checkpoint (numpy leaves), as ``flax.serialization.msgpack_restore``.

  Args:
    source: a path (file, or directory of ``checkpoint_<N>`` files), msgpack bytes, or a dict.

  Returns:
    The nested dict stored in the file.

  Raises:
    CheckpointError: the source is missing, empty, truncated or not a msgpack checkpoint.

  Examples:
    >>> import jax.numpy as jnp
    >>> from flax import serialization
    >>> from flax_optim_compat import convert
    >>> data = serialization.to_bytes({'w': jnp.ones(2)})
    >>> convert.load(data)
    {'w': array([1., 1.], dtype=float32)}
  """
  return _sources.read(source)[0]



def checkpoint_file(source: Union[str, os.PathLike]) -> str:
  """The msgpack file a path source reads: the file itself, or a directory's latest checkpoint.

  Raises:
    CheckpointError: the path does not exist, or the directory holds no ``checkpoint_<N>``
      file (or is an orbax directory).

  Examples:
    >>> import os, tempfile
    >>> from flax_optim_compat import convert
    >>> d = tempfile.mkdtemp()
    >>> for n in (3, 10):
    ...   open(os.path.join(d, f'checkpoint_{n}'), 'wb').close()
    >>> os.path.basename(convert.checkpoint_file(d))
    'checkpoint_10'
  """
  return _sources.msgpack_file(source)


# ----------------------------------------------------------------------------- inspect

def inspect(source: Source, *, progress=None) -> CheckpointInfo:
  """Describes a legacy checkpoint: tree, step, where the optimizer sits, which optimizer wrote it.

  Args:
    source: a path, msgpack bytes or a state dict.
    progress: optional ``callback(bytes_read, total_bytes)`` while a file is read.

  Returns:
    A :class:`CheckpointInfo`; ``.summary()`` is one line, ``.tree()`` the readable tree.

  Raises:
    CheckpointError: the source cannot be read (missing, empty, truncated, not msgpack).

  Examples:
    >>> import jax.numpy as jnp
    >>> from flax import serialization
    >>> import flax_optim_compat as optim
    >>> from flax_optim_compat import convert
    >>> opt = optim.Adam(0.1).create({'w': jnp.ones((2, 3))})
    >>> info = convert.inspect(serialization.to_bytes(opt))
    >>> info.optimizer, info.step, info.param_count
    ('Adam, AdaBelief or LAMB', 0, 6)
    >>> print(info.summary())
    Adam, AdaBelief or LAMB at step 0, a bare optimizer; 6 params (24 B), 4 leaves, 76 B of arrays
  """
  tree, where = _sources.read(source, mode='meta', progress=progress)
  return _inspect.describe(tree, where)


# ----------------------------------------------------------------------------- to optax


def _restore(tree: dict, where: str, opt_def: OptimizerDef) -> Tuple[Optimizer, Tuple[str, ...]]:
  if not isinstance(opt_def, OptimizerDef):
    raise TypeError(f'optimizer_def must be an OptimizerDef (e.g. optim.Adam(1e-3)), not '
                    f'{type(opt_def).__name__}.')
  path = _state_dict.locate(tree, where)
  node = _state_dict.at(tree, path)
  if _layouts.is_per_group_multi_state(node['state']):
    raise CheckpointError(f'{where}: the optimizer at {_tree.join_keys(path)} has the '
                          'MultiOptimizer layout of flax < 0.3.3, which later versions cannot '
                          'restore.')
  target = node['target']
  bad = [p for p, leaf in _state_dict.leaves(target)
         if not isinstance(leaf, (np.ndarray, np.generic, jax.Array))]
  if bad:
    leaf_path = _tree.join_keys(path + ('target',) + bad[0])
    raise CheckpointError(f'{where}: the target leaf at {leaf_path} is not an array.')
  template = _state_dict.abstract_optimizer(opt_def, target)
  try:
    restored = serialization.from_state_dict(template, node, name=_tree.join_keys(path).lstrip('/'))
  except ValueError as e:
    raise CheckpointError(f'{where}: {e}') from None
  return restored, path


def _optax_parts(optimizer: Optimizer):
  opt_def = optimizer.optimizer_def
  try:
    tx = opt_def.optax_transform()
    opt_state = opt_def.optax_state(optimizer.target, optimizer.state)
  except NotImplementedError as e:
    raise CheckpointError(f'{type(opt_def).__name__} cannot be converted to optax: {e}') from None
  return tx, opt_state


class OptaxCheckpoint(NamedTuple):
  """``(params, tx, opt_state)``: what :func:`to_optax` returns."""
  params: Any
  tx: optax.GradientTransformation
  opt_state: optax.OptState


def to_optax(source: Source, optimizer_def: OptimizerDef, *, progress=None) -> OptaxCheckpoint:
  """``(params, tx, opt_state)`` continuing the legacy run in plain optax.

  ``tx`` is ``optimizer_def.optax_transform()`` (the legacy numerics) and ``opt_state`` the
  file's optimizer state as its state; ``optax.apply_updates(params, tx.update(grads,
  opt_state, params)[0])`` is then the legacy ``apply_gradient``.

  Args:
    source: a path, msgpack bytes or a state dict holding one legacy optimizer.
    optimizer_def: the optimizer that wrote the file, e.g. ``optim.Adam(1e-3)``.
    progress: optional ``callback(bytes_read, total_bytes)`` while a file is read.

  Returns:
    An :class:`OptaxCheckpoint` ``(params, tx, opt_state)`` of ``jax.Array`` leaves.

  Raises:
    CheckpointError: unreadable source, no optimizer in it, or a file that does not fit
      ``optimizer_def`` (the message names the path and, if it can tell, the optimizer the file
      looks like); also for optimizers without an optax transform (WeightNorm, MultiOptimizer).

  Examples:
    >>> import jax.numpy as jnp, optax
    >>> from flax import serialization
    >>> import flax_optim_compat as optim
    >>> from flax_optim_compat import convert
    >>> legacy = optim.Momentum(0.1, beta=0.9).create({'w': jnp.ones(2)})
    >>> legacy = legacy.apply_gradient({'w': jnp.ones(2)})
    >>> params, tx, opt_state = convert.to_optax(serialization.to_bytes(legacy),
    ...                                          optim.Momentum(0.1, beta=0.9))
    >>> updates, opt_state = tx.update({'w': jnp.ones(2)}, opt_state, params)
    >>> optax.apply_updates(params, updates)['w']
    Array([0.71, 0.71], dtype=float32)
    >>> legacy.apply_gradient({'w': jnp.ones(2)}).target['w']
    Array([0.71, 0.71], dtype=float32)
  """
  tree, where = _sources.read(source, mode='jax', progress=progress)
  optimizer, _ = _restore(tree, where, optimizer_def)
  del tree
  tx, opt_state = _optax_parts(optimizer)
  return OptaxCheckpoint(optimizer.target, tx, opt_state)


def to_train_state(source: Source, optimizer_def: OptimizerDef, apply_fn=None, *,
                   progress=None) -> flax_train_state.TrainState:
  """A ``flax.training.train_state.TrainState`` continuing the legacy run.

  ``step`` is the legacy step, ``params`` the legacy target, ``tx`` the optimizer's
  ``optax_transform()`` and ``opt_state`` the legacy state as its optax state:
  ``state.apply_gradients(grads=grads)`` is then the legacy ``apply_gradient``.

  Args:
    source: a path, msgpack bytes or a state dict holding one legacy optimizer.
    optimizer_def: the optimizer that wrote the file.
    apply_fn: stored in the TrainState (e.g. ``model.apply``); optional.
    progress: optional ``callback(bytes_read, total_bytes)`` while a file is read.

  Returns:
    The ``TrainState``.

  Raises:
    CheckpointError: as :func:`to_optax`.

  Examples:
    >>> import jax.numpy as jnp
    >>> from flax import serialization
    >>> import flax_optim_compat as optim
    >>> from flax_optim_compat import convert
    >>> legacy = optim.Adam(0.1).create({'w': jnp.ones(2)}).apply_gradient({'w': jnp.ones(2)})
    >>> state = convert.to_train_state(serialization.to_bytes(legacy), optim.Adam(0.1))
    >>> int(state.step), state.params['w'].round(4)
    (1, Array([0.9, 0.9], dtype=float32))
  """
  tree, where = _sources.read(source, mode='jax', progress=progress)
  optimizer, _ = _restore(tree, where, optimizer_def)
  del tree
  tx, opt_state = _optax_parts(optimizer)
  return flax_train_state.TrainState(step=optimizer.state.step, apply_fn=apply_fn,
                                     params=optimizer.target, tx=tx, opt_state=opt_state)


def check_new_output(path: Union[str, os.PathLike]) -> str:
  """The absolute ``path`` if it can be a new output: it does not exist, its directory does.

  Raises:
    CheckpointError: ``path`` exists or its directory does not.
  """
  return _outputs.check_new(path)


def to_orbax(source: Source, optimizer_def: OptimizerDef, directory: Union[str, os.PathLike],
             *, progress=None) -> flax_train_state.TrainState:
  """Writes the :func:`to_train_state` of ``source`` as an orbax checkpoint in ``directory``.

  The checkpoint holds ``{'step', 'params', 'opt_state'}`` (the TrainState's state dict); plain
  orbax restores it, e.g. ``ocp.StandardCheckpointer().restore(directory, template)`` with
  ``template`` a freshly created TrainState (see the example), or without a template as nested
  dicts. It is written to a temporary directory next to ``directory`` and renamed when
  complete; ``directory`` must not exist.

  Args:
    source: a path, msgpack bytes or a state dict holding one legacy optimizer.
    optimizer_def: the optimizer that wrote the file.
    directory: the orbax checkpoint directory to create.
    progress: optional ``callback(bytes_read, total_bytes)`` while a file is read.

  Returns:
    The ``TrainState`` that was written.

  Raises:
    CheckpointError: as :func:`to_optax`, or ``directory`` exists.

  Examples:
    >>> import os, tempfile, jax.numpy as jnp
    >>> import orbax.checkpoint as ocp
    >>> from flax import serialization
    >>> import flax_optim_compat as optim
    >>> from flax_optim_compat import convert
    >>> legacy = optim.Adam(0.1).create({'w': jnp.ones(2)}).apply_gradient({'w': jnp.ones(2)})
    >>> out = os.path.join(tempfile.mkdtemp(), 'orbax')
    >>> _ = convert.to_orbax(serialization.to_bytes(legacy), optim.Adam(0.1), out)
    >>> restored = ocp.StandardCheckpointer().restore(out)
    >>> int(restored['step'])
    1
    >>> print(restored['params']['w'].round(4))
    [0.9 0.9]
  """
  directory = check_new_output(directory)
  state = to_train_state(source, optimizer_def, progress=progress)
  _orbax_io.write(directory, serialization.to_state_dict(state))
  return state


# ----------------------------------------------------------------------------- back to legacy


def _optax_count(opt_state) -> Optional[Any]:
  for key_path, leaf in jax.tree_util.tree_flatten_with_path(opt_state)[0]:
    last = key_path[-1] if key_path else None
    if getattr(last, 'name', None) == 'count':
      return leaf
  return None


def _legacy_param_states(opt_def: OptimizerDef, params, opt_state, step):
  """The legacy ``param_states`` whose ``optax_state`` is ``opt_state``.

  ``optax_state`` only moves arrays between the two layouts (one optax leaf per legacy leaf,
  the optax counts from ``step``), so it is linear in the float leaves and its transpose is its
  inverse; the result is checked by mapping it forward again.
  """
  template = jax.eval_shape(opt_def.init_state, params)
  leaves, treedef = jax.tree_util.tree_flatten(template.param_states)
  state_step = jnp.asarray(step, jnp.int32)

  def forward(float_leaves):
    full = treedef.unflatten(float_leaves)
    out = opt_def.optax_state(params, OptimizerState(state_step, full))
    return [x for x in jax.tree_util.tree_leaves(out) if _tree.is_inexact(x)]

  given = [x for x in jax.tree_util.tree_leaves(opt_state) if _tree.is_inexact(x)]
  expected = jax.eval_shape(forward, leaves)
  shapes = [(tuple(e.shape), np.dtype(e.dtype)) for e in expected]
  if [(tuple(np.shape(g)), np.dtype(jnp.result_type(g))) for g in given] != shapes:
    raise CheckpointError(
        f'opt_state does not fit {type(opt_def).__name__} over these params: its float leaves '
        f'are {[(tuple(np.shape(g)), jnp.result_type(g).name) for g in given]}, '
        f'{type(opt_def).__name__}.optax_transform().init(params) has '
        f'{[(s, d.name) for s, d in shapes]}.')
  zeros = [jnp.zeros(x.shape, x.dtype) for x in leaves]
  (legacy_leaves,) = jax.linear_transpose(forward, zeros)(
      [jnp.asarray(g) for g in given])
  again = forward(legacy_leaves)
  for a, g in zip(again, given):
    if not np.array_equal(np.asarray(a), np.asarray(g)):
      raise CheckpointError(f'opt_state cannot be expressed as a {type(opt_def).__name__} '
                            'legacy state (mapping it back does not reproduce it).')
  return treedef.unflatten(legacy_leaves)


def to_legacy(params, opt_state, optimizer_def: OptimizerDef, *, step=None,
              path: Optional[Union[str, os.PathLike]] = None) -> dict:
  """A legacy ``{'target', 'state'}`` state dict (and msgpack file) from params and optax state.

  The inverse of :func:`to_optax`: ``opt_state`` is a state of
  ``optimizer_def.optax_transform()`` (e.g. a TrainState's ``opt_state``); the result is what
  legacy ``Optimizer.state_dict()`` writes, so flax 0.5.3 (and this package) restore it with
  ``flax.serialization.from_bytes(optimizer, data)`` for old evaluation tooling.

  Args:
    params: the params (the legacy ``target``).
    opt_state: the optax state of ``optimizer_def.optax_transform()`` for ``params``.
    optimizer_def: the legacy optimizer def, e.g. ``optim.Adam(1e-3)``.
    step: the legacy step; default: the ``count`` in ``opt_state`` (needed when it has none,
      e.g. GradientDescent).
    path: if given, the state dict is also written there as msgpack (to a temporary file
      renamed when complete; the path must not exist).

  Returns:
    The legacy state dict (nested dicts of arrays).

  Raises:
    CheckpointError: ``opt_state`` does not fit the optimizer and params, no step, or ``path``
      exists.

  Examples:
    >>> import jax.numpy as jnp
    >>> import flax_optim_compat as optim
    >>> from flax_optim_compat import convert
    >>> params = {'w': jnp.ones(2)}
    >>> tx = optim.Adam(0.1).optax_transform()
    >>> opt_state = tx.init(params)
    >>> sd = convert.to_legacy(params, opt_state, optim.Adam(0.1))
    >>> sorted(sd['state']['param_states']['w']), int(sd['state']['step'])
    (['grad_ema', 'grad_sq_ema'], 0)
  """
  if not isinstance(optimizer_def, OptimizerDef):
    raise TypeError(f'optimizer_def must be an OptimizerDef, not {type(optimizer_def).__name__}.')
  if path is not None:
    path = check_new_output(path)
  if step is None:
    step = _optax_count(opt_state)
    if step is None:
      raise CheckpointError(f'opt_state of {type(optimizer_def).__name__} has no `count`; '
                            'pass step= (e.g. the TrainState step).')
  step = np.asarray(step)
  if step.ndim or step.dtype.kind not in 'iu':
    raise CheckpointError(f'step must be an integer scalar, not {step.dtype}{list(step.shape)}.')
  params = jax.tree_util.tree_map(jnp.asarray, params)
  try:
    param_states = _legacy_param_states(optimizer_def, params, opt_state, step)
  except NotImplementedError as e:
    raise CheckpointError(f'{type(optimizer_def).__name__} has no optax state: {e}') from None
  state = OptimizerState(jnp.asarray(step, jnp.int32), param_states)
  state_dict = optimizer_def.state_dict(params, state)
  if path is not None:
    write_msgpack(path, state_dict)
  return state_dict


class ConvertedCheckpoint(NamedTuple):
  """``(params, opt_state, step)``: what :func:`load_converted` returns."""
  params: Any
  opt_state: optax.OptState
  step: Any


def load_converted(source: Source, optimizer_def: OptimizerDef) -> ConvertedCheckpoint:
  """The params, optax state and step of a converted checkpoint, for :func:`to_legacy`.

  Args:
    source: what :func:`to_optax` / :func:`to_train_state` wrote with :func:`write_msgpack`
      (``{'params', 'opt_state'[, 'step']}``), an orbax directory :func:`to_orbax` wrote, or
      such a state dict.
    optimizer_def: the legacy optimizer whose ``optax_transform()`` state it holds.

  Returns:
    A :class:`ConvertedCheckpoint` ``(params, opt_state, step)``; ``step`` is None when the
    source has none.

  Raises:
    CheckpointError: the source is a legacy checkpoint, has no ``params``/``opt_state``, or
      its ``opt_state`` does not fit ``optimizer_def``.

  Examples:
    >>> import jax.numpy as jnp
    >>> import flax_optim_compat as optim
    >>> from flax_optim_compat import convert
    >>> tx = optim.Adam(0.1).optax_transform()
    >>> params = {'w': jnp.ones(2)}
    >>> saved = {'params': params, 'opt_state': tx.init(params), 'step': 0}
    >>> params, opt_state, step = convert.load_converted(saved, optim.Adam(0.1))
    >>> sorted(convert.to_legacy(params, opt_state, optim.Adam(0.1), step=step)['state'])
    ['param_states', 'step']
  """
  tree, where = _sources.read_any(source)
  if _state_dict.find_optimizers(tree):
    raise CheckpointError(f'{where} is already a legacy checkpoint; --to legacy converts what '
                          '`convert --to optax|train-state|orbax` wrote.')
  if not isinstance(tree, dict) or not {'params', 'opt_state'} <= set(tree):
    raise CheckpointError(f'{where} has no {{"params", "opt_state"}}: --to legacy converts '
                          'what `convert --to optax|train-state|orbax` wrote.')
  params = jax.tree_util.tree_map(jnp.asarray, tree['params'])
  template = optimizer_def.optax_transform().init(params)
  try:
    opt_state = serialization.from_state_dict(template, tree['opt_state'], name='opt_state')
  except (ValueError, KeyError, TypeError) as e:
    raise CheckpointError(f'{where}: its opt_state does not fit {type(optimizer_def).__name__} '
                          f'({type(e).__name__}: {e}).') from None
  return ConvertedCheckpoint(params, opt_state, tree.get('step'))


# ----------------------------------------------------------------------------- writing


def write_msgpack(path: Union[str, os.PathLike], state_dict: dict) -> None:
  """Writes ``state_dict`` as flax msgpack, leaf by leaf, to a temp file renamed when complete.

  The bytes are those of ``flax.serialization.msgpack_serialize(state_dict)``, without holding
  the whole encoding in memory. ``path`` must not exist.

  Raises:
    CheckpointError: ``path`` exists or its directory does not.
  """
  _outputs.write_file(path, lambda f: _codec.encode(f, state_dict))


# ----------------------------------------------------------------------------- diff


def _as_train_state_dict(tree: dict, where: str, optimizer_def: OptimizerDef) -> dict:
  if _state_dict.find_optimizers(tree):
    optimizer, _ = _restore(tree, where, optimizer_def)
    tx, opt_state = _optax_parts(optimizer)
    return serialization.to_state_dict({'step': optimizer.state.step,
                                        'params': optimizer.target, 'opt_state': opt_state})
  return tree


def diff(a: Source, b: Source, optimizer_def: Optional[OptimizerDef] = None) -> DiffResult:
  """Per-leaf max abs / rel differences of two checkpoints.

  Each side is a legacy or converted msgpack checkpoint (path or bytes), an orbax directory,
  or a state dict. With ``optimizer_def``, legacy sides are first converted to the
  ``{'step', 'params', 'opt_state'}`` layout of :func:`to_train_state`, so a legacy file
  compares with its converted continuation; without it, trees compare as stored.

  Args:
    a: the first checkpoint.
    b: the second checkpoint.
    optimizer_def: the optimizer of the legacy side(s), to compare across layouts.

  Returns:
    A :class:`DiffResult`; ``.same(rtol)`` says whether they agree within ``rtol``.

  Examples:
    >>> import numpy as np
    >>> from flax_optim_compat import convert
    >>> r = convert.diff({'w': np.array([1.0, 2.0])}, {'w': np.array([1.0, 2.5])})
    >>> r.leaves, r.same(rtol=0.1), r.same(rtol=0.2)
    ([('/w', 0.5, 0.2)], False, True)
  """
  tree_a, where_a = _sources.read_any(a)
  tree_b, where_b = _sources.read_any(b)
  if optimizer_def is not None:
    tree_a = _as_train_state_dict(tree_a, where_a, optimizer_def)
    tree_b = _as_train_state_dict(tree_b, where_b, optimizer_def)
  return _diff.compare(tree_a, tree_b)
