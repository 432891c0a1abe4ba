"""Inspect, diff and convert legacy ``flax.optim`` checkpoints: to optax, a TrainState, orbax, and back.

Every function takes a *source*: a path (a msgpack file, or a directory holding flax
``checkpoint_<N>`` files: the latest is read), raw msgpack ``bytes``, or an already-loaded state
dict. The optimizer is found wherever it sits: a bare ``{'target', 'state'}`` as
``Optimizer.state_dict()`` writes it, or inside a train state (``{'step', 'optimizer',
'model_state', ...}``) at any depth. Replicated optimizers are stored as one copy (no device
axis), so they read like plain ones.

:func:`inspect` reports the tree (paths, shapes, dtypes, bytes), the step, where the optimizer
sits and which optimizer wrote it (per group for ``MultiOptimizer`` / ``focus=``), without
building the optimizer (or materialising arrays, given a path). :func:`convert_checkpoint`
(:func:`to_optax`, :func:`to_train_state`, :func:`to_orbax`) restores the file through the
strict restore of ``optimizer_def`` (a mismatch names the optimizer the file looks like) and
gives its state to an optax transformation: training continues with the legacy numbers.
:func:`to_legacy` and :func:`legacy_from_converted` go back (flax 0.5.3 restores the result);
:func:`diff` compares two checkpoints leaf by leaf.

Files are not trusted (every record is checked before anything is allocated; failures are
:class:`CheckpointError` naming the file, the path inside it and the byte offset) and outputs
are all or nothing and never replace an existing path. The same is available from the
command line: ``python -m flax_optim_compat --help``.
"""
import os
from typing import List, Mapping, Optional, Union

from flax.training import train_state as flax_train_state

from ._checkpoint import _diff, _formats, _inspect, _legacy_to_optax, _optax_to_legacy
from ._checkpoint import _orbax_io, _outputs, _sources
from ._checkpoint._codec import CheckpointError
from ._checkpoint._legacy_to_optax import Conversion, ConversionWarning, OptaxCheckpoint, ProbeError
from ._checkpoint._optax_to_legacy import ConvertedCheckpoint
from ._checkpoint._diff import DiffResult
from ._checkpoint._formats import OutputFormat
from ._checkpoint._inspect import CheckpointInfo
from .base import OptimizerDef

__all__ = ['CheckpointError', 'ProbeError', 'CheckpointInfo', 'DiffResult', 'Conversion', 'ConversionWarning',
           'ConvertedCheckpoint', 'OutputFormat', 'load', 'load_converted', 'inspect', 'convert_checkpoint',
           'to_optax', 'to_train_state', 'to_orbax', 'to_legacy', 'legacy_from_converted',
           'diff', 'write_msgpack', 'check_new_output', 'checkpoint_file', 'load_code',
           'output_formats', 'output_format']

Source = Union[str, os.PathLike, bytes, bytearray, memoryview, Mapping]


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
  """The checkpoint a path source reads: the file or orbax directory itself, or a directory's
  latest ``checkpoint_<N>`` (a msgpack file, or an orbax directory as flax writes by default).

  Raises:
    CheckpointError: the path does not exist, or the directory holds no ``checkpoint_<N>``.

  Examples:
    >>> import os, tempfile
    >>> from flax_optim_compat import convert
    >>> d = tempfile.mkdtemp()
    >>> for n in (3, 10):
    ...   open(os.path.join(d, f'checkpoint_{n}'), 'wb').close()
    >>> os.path.basename(convert.checkpoint_file(d))
    'checkpoint_10'
  """
  return _sources.checkpoint_path(source)


def inspect(source: Source, *, progress=None) -> CheckpointInfo:
  """Describes a legacy checkpoint: tree, step, where the optimizer sits, which optimizer wrote it.

  A msgpack file's arrays are not materialised; an orbax directory is read from its metadata
  (arrays over 1 KB never read) and the data files its OCDBT manifest names are checked to be
  present and long enough (a note says what was checked, or what was not).

  Args:
    source: a path (msgpack file, orbax directory, or a directory of ``checkpoint_<N>``),
      msgpack bytes or a state dict.
    progress: optional ``callback(bytes_read, total_bytes)`` while a file is read.

  Returns:
    A :class:`CheckpointInfo`; ``.summary()`` is one line, ``.tree()`` the readable tree.

  Raises:
    CheckpointError: the source cannot be read (missing, empty, truncated, not msgpack; an
      orbax directory whose metadata or data files plain orbax could not restore from).

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
  tree, name, notes = _sources.read_meta(source, progress=progress)
  info = _inspect.checkpoint_info(tree, name)
  info.notes.extend(notes)
  return info


def convert_checkpoint(source: Source, optimizer_def: OptimizerDef, *, tx=None,
                       keep_layout: bool = False, replica: Optional[int] = None, apply_fn=None,
                       progress=None, accept_difference: bool = False,
                       tx_source=None) -> Conversion:
  """Converts a legacy checkpoint into the state of the optax transformation a user writes.

  The legacy per-parameter state is mapped into ``tx.init(params)``'s structure by meaning
  (``grad_ema`` -> ``mu``, ``momentum`` -> ``trace``, every ``count`` := the legacy step; an
  ``optax.inject_hyperparams`` state gets the optimizer's hyper-params), by the optimizer's
  own ``optax_state(params, state, tx=tx)``.

  Args:
    source: a path, msgpack bytes or a state dict holding one legacy optimizer, bare or in a
      train state (``{'step', 'optimizer', 'model_state', ...}``).
    optimizer_def: the optimizer that wrote the file, e.g. ``optim.Adam(1e-3)``.
    tx: the optax transformation to convert into (for a MultiOptimizer: a list, one per group
      in order). Default: the optimizer's ``plain_optax()`` expression where it continues the
      legacy numbers (bit-exact or to 1e-6); otherwise (Adagrad; LARS with weight decay) its
      ``optax_transform()``, whose state then needs this package to load. A ``tx`` given for
      an optimizer that no plain optax continues exactly warns (:class:`ConversionWarning`).
    keep_layout: keep the file's tree and replace only the optimizer node by ``{'step',
      'params', 'opt_state'}`` (what a dataclass whose ``optimizer`` field became a flax
      ``TrainState`` restores); default: the flat TrainState fields with every key that sat
      beside the optimizer as a field beside them (what a ``TrainState`` subclass declaring
      them restores, as flax's examples carry ``batch_stats``).
    replica: for a file saved with a leading device axis on every leaf: the replica to take;
      default: replica 0, after checking that all replicas agree.
    apply_fn: stored in the TrainState (e.g. ``model.apply``).
    progress: optional ``callback(bytes_read, total_bytes)`` while a file is read.
    accept_difference: convert even where the probe finds the target beyond its class
      (``Conversion.accepted`` then says what differs).
    tx_source: the Python source of ``tx`` (a list per group for a MultiOptimizer): the
      ``load_with`` text, and the cause a refusal names (the keywords that differ).

  Before anything is returned (so before anything is written) the *probe* runs the legacy
  optimizer as ``optimizer_def`` states it and the target transformation from the converted
  state side by side for a few updates from the file's own values at its step (big leaves cut
  down to at most 160 per dimension), and compares each update relative to the legacy update:
  ``Conversion.probe.summary()`` says what it measured (bit-exact, or within 1e-6 of each
  update with the largest difference).

  Returns:
    A :class:`Conversion` ``(train_state, state_dict, load_with, notes, probe, accepted)``.

  Raises:
    CheckpointError: unreadable source, no optimizer, a file that does not fit
      ``optimizer_def``, a ``tx`` whose state has no place for a legacy field (or a field
      with no legacy counterpart: another algorithm), replicas that differ.
    ProbeError: the target does not continue ``optimizer_def`` within its class (another
      algorithm with the same state fields, other hyper-parameters): the message names the
      first differing leaf and the measured difference (not raised with ``accept_difference``).

  Examples:
    >>> import jax.numpy as jnp
    >>> from flax import serialization
    >>> import flax_optim_compat as optim
    >>> from flax_optim_compat import convert
    >>> legacy = optim.Momentum(0.1).create({'w': jnp.ones(2)}).apply_gradient({'w': jnp.ones(2)})
    >>> data = serialization.to_bytes({'step': 1, 'optimizer': legacy, 'rng': jnp.arange(2)})
    >>> result = convert.convert_checkpoint(data, optim.Momentum(0.1))
    >>> result.load_with
    'optax.sgd(learning_rate=0.1, momentum=0.9, nesterov=False)'
    >>> sorted(result.state_dict), result.notes[0][:40]
    (['opt_state', 'params', 'rng', 'step'], 'the state fields fit Momentum or LARS al')
  """
  tree, where = _sources.read(source, mode='jax', progress=progress)
  return Conversion(*_legacy_to_optax.convert_tree(tree, where, optimizer_def, tx=tx,
                                               keep_layout=keep_layout, replica=replica,
                                               apply_fn=apply_fn,
                                               accept_difference=accept_difference,
                                               tx_source=tx_source))


def to_optax(source: Source, optimizer_def: OptimizerDef, *, tx=None,
             replica: Optional[int] = None, progress=None,
             accept_difference: bool = False) -> OptaxCheckpoint:
  """``(params, tx, opt_state)`` continuing the legacy run in plain optax.

  ``opt_state`` is the file's optimizer state as a state of ``tx`` (default: the optimizer's
  ``plain_optax()`` expression), so that the legacy ``apply_gradient`` is
  ``optax.apply_updates(params, tx.update(grads, opt_state, params)[0])``.

  Args:
    source: a path, msgpack bytes or a state dict holding one legacy optimizer.
    optimizer_def: the optimizer that wrote the file, e.g. ``optim.Adam(1e-3)``.
    tx: the optax transformation to convert into (see :func:`convert_checkpoint`).
    replica: the replica of a replicated file (see :func:`convert_checkpoint`).
    progress: optional ``callback(bytes_read, total_bytes)`` while a file is read.
    accept_difference: see :func:`convert_checkpoint` (its probe runs here too).

  Returns:
    An :class:`OptaxCheckpoint` ``(params, tx, opt_state)`` of ``jax.Array`` leaves.

  Raises:
    CheckpointError: as :func:`convert_checkpoint`.

  Examples:
    >>> import jax.numpy as jnp, optax
    >>> from flax import serialization
    >>> import flax_optim_compat as optim
    >>> from flax_optim_compat import convert
    >>> legacy = optim.Momentum(0.1, beta=0.9).create({'w': jnp.ones(2)})
    >>> legacy = legacy.apply_gradient({'w': jnp.ones(2)})
    >>> params, tx, opt_state = convert.to_optax(serialization.to_bytes(legacy),
    ...                                          optim.Momentum(0.1, beta=0.9),
    ...                                          tx=optax.sgd(0.1, momentum=0.9))
    >>> updates, opt_state = tx.update({'w': jnp.ones(2)}, opt_state, params)
    >>> optax.apply_updates(params, updates)['w']
    Array([0.71, 0.71], dtype=float32)
    >>> legacy.apply_gradient({'w': jnp.ones(2)}).target['w']
    Array([0.71, 0.71], dtype=float32)
  """
  state = convert_checkpoint(source, optimizer_def, tx=tx, replica=replica,
                             progress=progress, accept_difference=accept_difference).train_state
  return OptaxCheckpoint(state.params, state.tx, state.opt_state)


def to_train_state(source: Source, optimizer_def: OptimizerDef, apply_fn=None, *, tx=None,
                   replica: Optional[int] = None, progress=None,
                   accept_difference: bool = False) -> flax_train_state.TrainState:
  """A ``flax.training.train_state.TrainState`` continuing the legacy run.

  ``step`` is the legacy step (the train state's own where the file has one beside the
  optimizer), ``params`` the legacy target and ``opt_state`` the legacy state as a state of
  ``tx`` (default: the optimizer's ``plain_optax()`` expression), so that
  ``state.apply_gradients(grads=grads)`` is the legacy ``apply_gradient``. Keys beside the
  optimizer (model state, ...) are in :func:`convert_checkpoint`'s ``state_dict``.

  Args:
    source: a path, msgpack bytes or a state dict holding one legacy optimizer.
    optimizer_def: the optimizer that wrote the file.
    apply_fn: stored in the TrainState (e.g. ``model.apply``); optional.
    tx: the optax transformation to convert into (see :func:`convert_checkpoint`).
    replica: the replica of a replicated file (see :func:`convert_checkpoint`).
    progress: optional ``callback(bytes_read, total_bytes)`` while a file is read.
    accept_difference: see :func:`convert_checkpoint` (its probe runs here too).

  Returns:
    The ``TrainState``.

  Raises:
    CheckpointError: as :func:`convert_checkpoint`.

  Examples:
    >>> import jax.numpy as jnp, optax
    >>> from flax import serialization
    >>> import flax_optim_compat as optim
    >>> from flax_optim_compat import convert
    >>> legacy = optim.Adam(0.1).create({'w': jnp.ones(2)}).apply_gradient({'w': jnp.ones(2)})
    >>> tx = optax.inject_hyperparams(optax.adam)(learning_rate=0.1)
    >>> state = convert.to_train_state(serialization.to_bytes(legacy), optim.Adam(0.1), tx=tx)
    >>> int(state.step), int(state.opt_state.count), state.params['w'].round(4)
    (1, 1, Array([0.9, 0.9], dtype=float32))
  """
  return convert_checkpoint(source, optimizer_def, tx=tx, replica=replica, apply_fn=apply_fn,
                            progress=progress, accept_difference=accept_difference).train_state


def check_new_output(path: Union[str, os.PathLike]) -> str:
  """The absolute ``path`` if it can be a new output: it does not exist, and the folders above
  it exist or can be made (the writers make them).

  Raises:
    CheckpointError: ``path`` exists, or a file stands where a folder above it should be.
  """
  return _outputs.check_new(path)


def to_orbax(source: Source, optimizer_def: OptimizerDef, directory: Union[str, os.PathLike],
             *, tx=None, keep_layout: bool = False, replica: Optional[int] = None,
             progress=None, accept_difference: bool = False,
             tx_source=None) -> Conversion:
  """Writes the conversion of ``source`` as an orbax checkpoint in ``directory``.

  The checkpoint holds :func:`convert_checkpoint`'s ``state_dict``: ``{'step', 'params',
  'opt_state'}`` and every key that sat beside the optimizer. Plain orbax
  (``ocp.StandardCheckpointer().restore(directory, template)``, as below) and flax
  (``flax.training.checkpoints.restore_checkpoint(directory, target=template)``) restore it
  into a template made with the expression of ``load_with``: flax's ``TrainState``, or a
  subclass declaring the keys carried beside it (e.g. ``model_state``; ``restore_checkpoint``
  also restores the train state alone into flax's own ``TrainState``). It is written to a
  temporary directory next to ``directory`` and renamed when complete (it must not exist).

  Args:
    source: a path, msgpack bytes or a state dict holding one legacy optimizer.
    optimizer_def: the optimizer that wrote the file.
    directory: the orbax checkpoint directory to create.
    tx: the optax transformation to convert into (see :func:`convert_checkpoint`).
    keep_layout: keep the file's tree (see :func:`convert_checkpoint`).
    replica: the replica of a replicated file (see :func:`convert_checkpoint`).
    progress: optional ``callback(bytes_read, total_bytes)`` while a file is read.
    accept_difference: see :func:`convert_checkpoint` (the probe runs before the write).
    tx_source: see :func:`convert_checkpoint`.

  Returns:
    The :class:`Conversion` that was written.

  Raises:
    CheckpointError: as :func:`convert_checkpoint`, or ``directory`` exists.

  Examples:
    >>> import os, tempfile, jax.numpy as jnp, optax
    >>> import orbax.checkpoint as ocp
    >>> from flax import serialization
    >>> from flax.training import train_state
    >>> import flax_optim_compat as optim
    >>> from flax_optim_compat import convert
    >>> legacy = optim.Adam(0.1).create({'w': jnp.ones(2)}).apply_gradient({'w': jnp.ones(2)})
    >>> out = os.path.join(tempfile.mkdtemp(), 'orbax')
    >>> convert.to_orbax(serialization.to_bytes(legacy), optim.Adam(0.1), out).load_with
    'optax.adam(learning_rate=0.1, b1=0.9, b2=0.999, eps=1e-08)'
    >>> template = train_state.TrainState.create(
    ...     apply_fn=None, params={'w': jnp.zeros(2)},
    ...     tx=optax.adam(learning_rate=0.1, b1=0.9, b2=0.999, eps=1e-08))
    >>> restored = ocp.StandardCheckpointer().restore(out, template)
    >>> int(restored.step), restored.params['w'].round(4)
    (1, Array([0.9, 0.9], dtype=float32))
  """
  directory = check_new_output(directory)
  result = convert_checkpoint(source, optimizer_def, tx=tx, keep_layout=keep_layout,
                              replica=replica, progress=progress,
                              accept_difference=accept_difference, tx_source=tx_source)
  _orbax_io.write(directory, result.state_dict)
  return result


def to_legacy(params, opt_state, optimizer_def: OptimizerDef, *, step=None, tx=None,
              path: Optional[Union[str, os.PathLike]] = None) -> dict:
  """A legacy ``{'target', 'state'}`` state dict (and msgpack file) from params and optax state.

  The inverse of :func:`to_optax`: ``opt_state`` is a state of ``tx`` (a TrainState's
  ``opt_state``), read back field by field by ``optimizer_def.legacy_state``; the result is
  what legacy ``Optimizer.state_dict()`` writes, so flax 0.5.3 (and this package) restore it
  with ``flax.serialization.from_bytes(optimizer, data)`` for old evaluation tooling.

  Args:
    params: the params (the legacy ``target``).
    opt_state: the optax state for ``params``.
    optimizer_def: the legacy optimizer def, e.g. ``optim.Adam(1e-3)``.
    step: the legacy step; default: the ``count`` in ``opt_state`` (needed when it has none,
      e.g. GradientDescent).
    tx: the transformation ``opt_state`` belongs to (a list per group for a MultiOptimizer);
      default: the one :func:`convert_checkpoint` converts into by default. Any state with
      the legacy fields' counterparts reads back (``optax.adam``, its ``inject_hyperparams``
      form, ``optimizer_def.optax_transform()``...); ``tx`` only matters where it keeps a field
      negated (``optax.lars``).
    path: if given, the state dict is also written there as msgpack (to a temporary file
      renamed when complete; the path must not exist).

  Returns:
    The legacy state dict (nested dicts of arrays).

  Raises:
    CheckpointError: ``opt_state`` does not fit the optimizer and params, no step, or ``path``
      exists.

  Examples:
    >>> import jax.numpy as jnp, optax
    >>> import flax_optim_compat as optim
    >>> from flax_optim_compat import convert
    >>> params = {'w': jnp.ones(2)}
    >>> opt_state = optax.adam(0.1).init(params)
    >>> sd = convert.to_legacy(params, opt_state, optim.Adam(0.1))
    >>> sorted(sd['state']['param_states']['w']), int(sd['state']['step'])
    (['grad_ema', 'grad_sq_ema'], 0)
  """
  _legacy_to_optax.check_def(optimizer_def)
  path = None if path is None else check_new_output(path)
  state_dict = _optax_to_legacy.legacy_state_dict(params, opt_state, optimizer_def, step=step, tx=tx)
  if path is not None:
    write_msgpack(path, state_dict)
  return state_dict


def load_converted(source: Source, optimizer_def: OptimizerDef, *, tx=None) -> ConvertedCheckpoint:
  """The params, optax state and step of a converted checkpoint, for :func:`to_legacy`.

  Args:
    source: what :func:`convert_checkpoint` wrote (msgpack or orbax, either layout), or such
      a state dict.
    optimizer_def: the legacy optimizer.
    tx: the transformation it was converted into (default as :func:`convert_checkpoint`).

  Returns:
    A :class:`ConvertedCheckpoint` ``(params, opt_state, step)``; ``step`` is None when the
    source has none.

  Raises:
    CheckpointError: the source is a legacy checkpoint, has no ``params``/``opt_state``, or
      its ``opt_state`` does not fit.

  Examples:
    >>> import jax.numpy as jnp, optax
    >>> import flax_optim_compat as optim
    >>> from flax_optim_compat import convert
    >>> params = {'w': jnp.ones(2)}
    >>> saved = {'params': params, 'opt_state': optax.adam(0.1).init(params), 'step': 0}
    >>> params, opt_state, step = convert.load_converted(saved, optim.Adam(0.1))
    >>> sorted(convert.to_legacy(params, opt_state, optim.Adam(0.1), step=step)['state'])
    ['param_states', 'step']
  """
  return _optax_to_legacy.load(source, optimizer_def, tx)


def legacy_from_converted(source: Source, optimizer_def: OptimizerDef, *, tx=None, step=None,
                          optimizer_key: str = 'optimizer',
                          path: Optional[Union[str, os.PathLike]] = None) -> dict:
  """The legacy checkpoint of a converted one, with everything that was carried beside it.

  The inverse of :func:`convert_checkpoint`: a flat ``{'step', 'params', 'opt_state', ...}``
  becomes ``{'step', optimizer_key: {'target', 'state'}, ...}`` (a bare ``{'target',
  'state'}`` when nothing else is there); a ``keep_layout`` tree gets its ``{'step',
  'params', 'opt_state'}`` node replaced by the legacy optimizer. flax 0.5.3 restores the
  result into the original dataclass.

  Args:
    source: what :func:`convert_checkpoint` wrote (msgpack or orbax), or such a state dict.
    optimizer_def: the legacy optimizer.
    tx: the transformation it was converted into (default as :func:`convert_checkpoint`).
    step: the legacy optimizer step; default the optax ``count``, else the train state's step.
    optimizer_key: the key of the optimizer in a flat train state (legacy code: ``optimizer``).
    path: if given, the result is also written there as msgpack (must not exist).

  Returns:
    The legacy state dict.

  Raises:
    CheckpointError: as :func:`load_converted` and :func:`to_legacy`.

  Examples:
    >>> import jax.numpy as jnp
    >>> from flax import serialization
    >>> import flax_optim_compat as optim
    >>> from flax_optim_compat import convert
    >>> legacy = optim.Adam(0.1).create({'w': jnp.ones(2)})
    >>> data = serialization.to_bytes({'step': 0, 'optimizer': legacy, 'bn': jnp.ones(1)})
    >>> back = convert.legacy_from_converted(
    ...     convert.convert_checkpoint(data, optim.Adam(0.1)).state_dict, optim.Adam(0.1))
    >>> sorted(back), sorted(back['optimizer'])
    (['bn', 'optimizer', 'step'], ['state', 'target'])
  """
  path = None if path is None else check_new_output(path)
  result = _optax_to_legacy.legacy_tree(source, optimizer_def, tx=tx, step=step,
                                   optimizer_key=optimizer_key)
  if path is not None:
    write_msgpack(path, result)
  return result


def write_msgpack(path: Union[str, os.PathLike], state_dict: dict) -> None:
  """Writes ``state_dict`` as flax msgpack to the new file ``path``, all or nothing.

  The bytes are those of ``flax.serialization.msgpack_serialize(state_dict)``, written leaf by
  leaf (never the whole encoding in memory) to a temporary file next to ``path``, fsynced, and
  linked to ``path`` only if nothing has taken that name meanwhile: of two writers racing to
  one path exactly one succeeds. On any error or Ctrl-C the temporary file is removed.

  Raises:
    CheckpointError: ``path`` exists (before or by the time the file is complete), its
      directory does not, or the disk is full.

  Examples:
    >>> import os, tempfile, numpy as np
    >>> from flax_optim_compat import convert
    >>> path = os.path.join(tempfile.mkdtemp(), 'state.msgpack')
    >>> convert.write_msgpack(path, {'w': np.ones(2, np.float32)})
    >>> convert.load(path)
    {'w': array([1., 1.], dtype=float32)}
    >>> convert.write_msgpack(path, {'w': np.zeros(2, np.float32)})
    Traceback (most recent call last):
    flax_optim_compat.convert.CheckpointError: '...state.msgpack' already exists; choose a new output path (nothing was overwritten).
  """
  _outputs.write_msgpack(path, state_dict)


def diff(a: Source, b: Source, optimizer_def: Optional[OptimizerDef] = None, *,
         tx=None) -> DiffResult:
  """Per-leaf differences of two checkpoints.

  Each side is a legacy or converted msgpack checkpoint (path or bytes), an orbax directory,
  or a state dict. With ``optimizer_def``, legacy sides are first converted to the ``{'step',
  'params', 'opt_state'}`` layout of :func:`to_train_state` (into ``tx``, default the plain
  optax expression; without ``step`` when the other side is a converted file without one),
  so a legacy file compares with its conversion; without it, trees compare as stored. Float
  leaves compare within a tolerance (NaN equals NaN, inf equals inf at the same place);
  integer and bool leaves exactly, whatever their width; other leaves by value. An empty dict
  and None are the same leaf (an empty optax state: msgpack stores ``{}``, orbax reads None).

  Args:
    a: the first checkpoint.
    b: the second checkpoint.
    optimizer_def: the optimizer of the legacy side(s), to compare across layouts.
    tx: the transformation the legacy side(s) convert into (see :func:`convert_checkpoint`);
      needs ``optimizer_def``.

  Returns:
    A :class:`DiffResult`; ``.same(rtol, atol)`` says whether they agree.

  Raises:
    CheckpointError: a side cannot be read, or (with ``optimizer_def``) a legacy side does not
      fit ``optimizer_def``.

  Examples:
    >>> import numpy as np
    >>> from flax_optim_compat import convert
    >>> r = convert.diff({'w': np.array([1.0, 2.0])}, {'w': np.array([1.0, 2.5])})
    >>> r.leaves, r.same(rtol=0.1), r.same(rtol=0.2)
    ([('/w', 0.5, 0.2)], False, True)
    >>> convert.diff({'step': np.int32(3)}, {'step': 3}).same()
    True
  """
  if tx is not None and optimizer_def is None:
    raise TypeError('diff: tx= converts the legacy side; give optimizer_def too.')
  trees = [_sources.read(a)[0], _sources.read(b)[0]]
  if optimizer_def is not None:
    trees = _legacy_to_optax.aligned(trees, optimizer_def, tx=tx)
  return _diff.compare(*trees)


def output_formats() -> List[OutputFormat]:
  """The output formats ``convert`` writes (the CLI's ``--to`` choices), in order.

  Each is an :class:`OutputFormat`: its ``name``, a ``help`` clause, ``write(path, tree)``,
  whether it ``reads_converted`` (goes back to legacy) and ``load_code(...)``. Each is one
  module of ``_checkpoint/_formats/``.

  Examples:
    >>> from flax_optim_compat import convert
    >>> first = convert.output_formats()[0]
    >>> first.name, first.help
    ('optax', 'msgpack {step, params, opt_state}, loaded as a dict')
    >>> [f.name for f in convert.output_formats() if f.reads_converted]
    ['legacy']
  """
  return _formats.all_formats()


def output_format(name: str) -> OutputFormat:
  """The output format ``name`` (a ``--to`` value).

  Raises:
    CheckpointError: there is no such format (the message names those there are).

  Examples:
    >>> from flax_optim_compat import convert
    >>> convert.output_format('orbax').carried_by_name
    True
  """
  return _formats.get(name)


def load_code(state_dict, path: Union[str, os.PathLike], *, tx: str, to: str = 'train-state',
              labels: Optional[str] = None) -> Optional[str]:
  """The plain flax + optax Python that loads ``state_dict`` written to ``path`` as ``to``.

  Its imports are those of the names it uses: it runs as printed, given the user's ``params``
  (and, for orbax, each carried key's value by its own name). For ``train-state`` and ``orbax``
  a flax ``TrainState`` (a subclass declaring exactly the keys carried beside it) of ``tx``
  over ``params``, restored from the msgpack file, or from the orbax directory by its absolute
  path (orbax restores into a template of the same structure); for ``optax`` a dict template.
  None where a carried key is not a Python name, or the format prints no load code (``legacy``).

  Args:
    state_dict: :class:`Conversion`'s ``state_dict``.
    path: where it was written.
    tx: the optax expression it is a state of, as source (``Conversion.load_with``).
    to: the output format it was written in (:func:`output_formats`).
    labels: the ``param_labels = ...`` line ``tx`` needs (a MultiOptimizer's).

  Raises:
    CheckpointError: ``to`` is no output format.

  Examples:
    >>> import numpy as np
    >>> from flax_optim_compat import convert
    >>> tree = {'step': 3, 'params': {'w': np.ones(2)}, 'opt_state': {}, 'model_state': {}}
    >>> print(convert.load_code(tree, 'state.msgpack', tx='optax.sgd(0.1)'))
    import optax
    from flax import serialization
    from typing import Any
    from flax.training import train_state
    <BLANKLINE>
    class TrainState(train_state.TrainState):
      model_state: Any = None
    <BLANKLINE>
    tx = optax.sgd(0.1)
    template = TrainState.create(apply_fn=None, params=params, tx=tx)
    with open('state.msgpack', 'rb') as f:
      state = serialization.from_bytes(template, f.read())
    <BLANKLINE>
  """
  return _formats.get(to).load_code(state_dict, os.fspath(path), tx=tx, labels=labels)
