"""Strict restore of an optimizer's ``(target, state)`` from a (legacy) state dict.

Legacy ``flax.optim`` restored with ``flax.serialization.from_state_dict`` alone, which only
looks at the container structure: a ``f64[5]`` leaf went silently into a ``f32[3]`` slot, a
Momentum checkpoint restored into an Adam optimizer failed with a bare ``KeyError``, and extra
keys were ignored. Here the whole state dict is checked against the optimizer it is restored
into **before** anything is built (the rules live in ``_state_check``, shared with the
checkpoint tool):

* the nested keys must be exactly those of ``{'target': ..., 'state': ...}`` of the template;
* every array leaf must have the template's shape and dtype, with two exceptions: the step
  counter (any integer that fits in ``int32`` and is not negative, cast to ``int32``), and
  per-parameter state leaves, where a float checkpoint restores into another float dtype with
  a cast to the template's (a float32 momentum into a bfloat16 state: legacy accepted it);
  ``None`` must stay ``None``;
* the first offending path (in the template's order: ``target`` before ``state``) is named,
  prefixed with the path of the optimizer inside the object being restored (e.g.
  ``/optimizer/state/param_states/dense/kernel/momentum`` for a train state's ``optimizer``
  field), with both shapes and dtypes; if the per-parameter state fields are those of another
  legacy optimizer, the message says which one the file looks like.

Orbax directories: today's ``flax.training.checkpoints.restore_checkpoint`` has orbax restore
onto the template's structure and dtypes (missing keys keep the template's values, extra keys
are dropped, dtypes are cast) before the package sees the data. When the restore runs inside
that function on an orbax directory, the tree orbax *wrote* (its metadata: keys, shapes and
dtypes, no array data) is read from the directory and checked with the same rules and
messages. Without a target, orbax returns the raw tree and the check happens when it is
restored into an optimizer. How the restore knows it runs inside that function, and why it reads
the function's frame, is said once, in :func:`_orbax_restore_in_progress`.

Not detectable: optimizers with the same state fields (Adam, AdaBelief and LAMB; Momentum and
LARS) cannot be told apart from a file. Corrupt msgpack bytes fail in
``flax.serialization.msgpack_restore`` (flax's code, before any optimizer code runs) with
msgpack's own message; the checkpoint tool (``convert``) decodes files with its own validating
codec, whose errors name the file.

What a restored optimizer holds: the arrays of the state dict, as legacy did: a file's arrays
come back as read-only NumPy arrays of the template's dtype (a cast leaf, a NumPy scalar and a
Python scalar for a 0-d array leaf too), ``jax.Array`` leaves (a state dict built in memory) as
they are, and ``step`` as an ``int32`` array. Nothing is moved to a device: the first step
moves them (a jitted step, or a built-in's un-jitted ``apply_gradient``, which runs a compiled
step, in one transfer), as it would move the NumPy leaves of a restored plain-optax train
state, and the placement stays the caller's (``jax_utils.replicate``, a mesh's
``device_put``). A leaf jax
placed per ``device_put`` costs 30-50 µs on top of its copy; a file of 3000 small leaves took
ten times its parse to restore that way. Read-only: an in-place write raises instead of
changing a state other objects may share. Python-scalar leaves of the template (legacy allowed
``{'w': 1.0}`` for GradientDescent and Momentum) accept any scalar of a compatible kind (a
Python scalar stays one).

Speed: a state dict whose structure, shapes and dtypes are exactly the template's (a file
written by the same optimizer on the same model) takes a flat path: one comparison of the tree
structures, one pass over the leaves, and the optimizer rebuilt from its own tree structure;
anything else (a cast, a scalar, a mismatch to report) takes the full check above.
"""
import collections
import dataclasses
import operator
import sys
import threading
import warnings
from typing import Any, Optional, Tuple

import jax
import numpy as np
from flax import core as flax_core
from flax import serialization

from . import _layouts
from . import _state_check
from . import _tree

__all__ = ['restore_target_and_state', 'check_single_copy']

def _outer_keys() -> Tuple[str, ...]:
  """Where the optimizer sits in the object ``from_state_dict`` is restoring (() at the top)."""
  path = serialization.current_path()  # e.g. '.', './optimizer', './opts/0'
  return tuple(key for key in path.split('/') if key not in ('', '.'))


def outer_path() -> str:
  """The path being restored by ``from_state_dict``, e.g. ``'/optimizer'`` (``''`` at the top)."""
  keys = _outer_keys()
  return _tree.join_keys(keys) if keys else ''


def _state_floats(path, got: np.dtype, want: np.dtype) -> bool:
  """Where the restore casts: a float per-parameter state leaf into another float dtype (a run
  that switched its optimizer state to bfloat16; legacy accepted it). Params keep their dtype."""
  return (path[:2] == ('state', 'param_states')
          and _tree.dtype_kind(got) == _tree.dtype_kind(want) == 'f')


# ----------------------------------------------------------------------------- "looks like"

def _hint(opt_def, template, state_dict) -> str:
  if not isinstance(state_dict, dict) or not isinstance(state_dict.get('state'), dict):
    return ''
  state = state_dict['state']
  if _layouts.is_per_group_multi_state(state):
    return (' The checkpoint has the MultiOptimizer layout of flax < 0.3.3 (one state per '
            'sub-optimizer, each with its own step), which later versions cannot restore.')
  target_sd = template['target']
  theirs = _layouts.name_param_states(target_sd, state.get('param_states'))
  ours = _layouts.name_param_states(target_sd, template['state']['param_states'])
  if theirs is None or theirs == ours:
    return ''
  return ' ' + written_by(theirs, opt_def)


def written_by(theirs: str, opt_def) -> str:
  """The one sentence naming the optimizer a checkpoint's fields say wrote it."""
  return (f'The checkpoint looks like it was written by {theirs}, but it is being restored '
          f'into {opt_def!r}: restore it with the optimizer that wrote it.')


# ----------------------------------------------------------------------------- entry points

def _checked(opt_def, template, state_dict, strip_axis, orbax=False):
  try:
    return _state_check.check(template, state_dict, strip_axis=strip_axis,
                              may_cast=_state_floats, orbax=orbax)
  except _state_check.Mismatch as e:
    where = outer_path() + _tree.join_keys(e.path)
    raise ValueError(
        f'Cannot restore the checkpoint into this {opt_def!r} optimizer: at '
        f'{where!r} {e.detail}.{_hint(opt_def, template, state_dict)} Nothing was restored.'
    ) from None


def _read_only(x):
  """A restored leaf: NumPy arrays and scalars as a read-only ``np.ndarray``; others as they are."""
  if isinstance(x, np.generic):
    x = np.asarray(x)
  if type(x) is np.ndarray and x.flags.writeable:  # pylint: disable=unidiomatic-typecheck
    x = x.view()  # the caller's array keeps its own flags
    x.flags.writeable = False
  return x


def _read_only_leaves(tree):
  leaves, treedef = jax.tree_util.tree_flatten(tree)
  return treedef.unflatten([_read_only(x) for x in leaves])


# ----------------------------------------------------------------------------- flat path

class _Marker:
  """Stands for the optimizer's leaf number ``index`` while a flat path is made."""
  __slots__ = ('index',)

  def __init__(self, index):
    self.index = index


class _FlatPath:
  """How a state dict of one optimizer tree structure maps onto that structure's leaves.

  Attributes:
    state_dict_treedef: the tree structure of ``{'target': ..., 'state': ...}``.
    order: for each leaf of the optimizer's ``(target, state)``, its index among the
      state dict's leaves.
    step: the index of ``state/step`` among the state dict's leaves (None if none).
    mappings: per part (target, state), ``(where, keys)`` of every mapping in it: how to
      reach it (:func:`_mappings`) and the key order jax's rebuild gives it (sorted).
  """
  __slots__ = ('state_dict_treedef', 'order', 'step', 'mappings')

  def __init__(self, state_dict_treedef, order, step, mappings):
    self.state_dict_treedef = state_dict_treedef
    self.order = order
    self.step = step
    self.mappings = mappings


def _mappings(node, where=(), out=None):
  """``[(where, keys)]`` of the dicts and ``FrozenDict``s in ``node``, or None if ``node``
  holds a pytree node this walk cannot see into; ``where`` is a tuple of ``(getattr, name)``
  and ``(getitem, key)`` steps from ``node``."""
  out = [] if out is None else out
  if isinstance(node, (dict, flax_core.FrozenDict)):
    out.append((where, tuple(node.keys())))
    children = [((operator.getitem, key), value) for key, value in node.items()]
  elif isinstance(node, (tuple, list)):
    children = [((operator.getitem, i), value) for i, value in enumerate(node)]
  elif dataclasses.is_dataclass(node) and not isinstance(node, type):
    children = [((getattr, f.name), getattr(node, f.name)) for f in dataclasses.fields(node)]
  elif jax.tree_util.treedef_is_leaf(jax.tree_util.tree_structure(node)):
    return out  # a leaf (a marker), None, or a static value
  else:  # a pytree node this walk does not know could hold a mapping: no flat path
    return None
  for step, child in children:
    if _mappings(child, where + (step,), out) is None:
      return None
  return out


def _same_key_orders(part, mappings) -> bool:
  """Whether every mapping of ``part`` has the key order jax's rebuild would give it."""
  for where, keys in mappings:
    node = part
    for get, key in where:
      node = get(node, key)
    if tuple(node.keys()) != keys:
      return False
  return True


_MAX_FLAT_PATHS = 32
_flat_paths: 'collections.OrderedDict[Any, Optional[_FlatPath]]' = collections.OrderedDict()
_flat_paths_lock = threading.Lock()


def _make_flat_path(treedef, opt_target, opt_state) -> Optional[_FlatPath]:
  """The flat path for ``treedef`` (that of ``(opt_target, opt_state)``), or None if it has none.

  Made by restoring markers the slow way: the flat path is taken only where
  ``to_state_dict`` and ``from_state_dict`` move each leaf as it is (no leaf converted,
  dropped or duplicated) and rebuild the very structure ``treedef`` describes.
  """
  n = treedef.num_leaves
  markers = [_Marker(i) for i in range(n)]
  marked_target, marked_state = treedef.unflatten(markers)
  sd = {'target': serialization.to_state_dict(marked_target),
        'state': serialization.to_state_dict(marked_state)}
  sd_leaves, sd_treedef = jax.tree_util.tree_flatten(sd)
  if (len(sd_leaves) != n or not all(isinstance(x, _Marker) for x in sd_leaves)
      or len({x.index for x in sd_leaves}) != n):
    return None
  rebuilt = (serialization.from_state_dict(opt_target, sd['target'], name='target'),
             serialization.from_state_dict(opt_state, sd['state'], name='state'))
  rebuilt_leaves, rebuilt_treedef = jax.tree_util.tree_flatten(rebuilt)
  if rebuilt_treedef != treedef or [
      x.index if isinstance(x, _Marker) else None for x in rebuilt_leaves] != list(range(n)):
    return None
  mappings = (_mappings(marked_target), _mappings(marked_state))
  if None in mappings:
    return None
  position = {x.index: j for j, x in enumerate(sd_leaves)}
  step = sd['state'].get('step') if isinstance(sd['state'], dict) else None
  return _FlatPath(sd_treedef, [position[i] for i in range(n)],
               position[step.index] if isinstance(step, _Marker) else None, mappings)


def _flat_path(treedef, opt_target, opt_state) -> Optional[_FlatPath]:
  with _flat_paths_lock:
    if treedef in _flat_paths:
      _flat_paths.move_to_end(treedef)
      return _flat_paths[treedef]
  try:
    flat = _make_flat_path(treedef, opt_target, opt_state)
  except Exception:  # pylint: disable=broad-except  # a structure serialization cannot mark
    flat = None
  with _flat_paths_lock:
    _flat_paths[treedef] = flat
    while len(_flat_paths) > _MAX_FLAT_PATHS:
      _flat_paths.popitem(last=False)
  return flat


_ARRAY_TYPES = set()  # leaf types seen to be concrete arrays (jax or NumPy), for a quick test


def _is_concrete_array(x) -> bool:
  kind = type(x)
  if kind in _ARRAY_TYPES:
    return True
  if isinstance(x, (np.ndarray, jax.Array)) and not isinstance(x, jax.core.Tracer):
    _ARRAY_TYPES.add(kind)
    return True
  return False


def _fast_restore(opt_target, opt_state, state_dict):
  """``(target, state)`` if ``state_dict`` is exactly of the template's structure, shapes and
  dtypes (with a step in [0, int32 max]); None when the full check must decide."""
  if not isinstance(state_dict, dict):
    return None
  leaves, treedef = jax.tree_util.tree_flatten((opt_target, opt_state))
  flat = _flat_path(treedef, opt_target, opt_state)
  if flat is None:
    return None
  try:
    sd_leaves, sd_treedef = jax.tree_util.tree_flatten(state_dict)
  except (TypeError, ValueError):  # keys jax cannot sort
    return None
  if sd_treedef != flat.state_dict_treedef:
    return None
  out = []
  for expected, j in zip(leaves, flat.order):
    x = sd_leaves[j]
    if type(x) is np.ndarray:  # pylint: disable=unidiomatic-typecheck
      if x.flags.writeable:
        x = x.view()
        x.flags.writeable = False
    elif isinstance(x, np.generic):
      x = _read_only(x)
    elif not _is_concrete_array(x):
      return None
    # Python-scalar or traced templates take the full check's rules
    if (not _is_concrete_array(expected) or x.shape != expected.shape
        or x.dtype != expected.dtype):
      return None
    out.append(x)
  if flat.step is not None:
    step = sd_leaves[flat.step]
    if np.size(step) and np.min(step) < 0:  # an integer: its dtype is the template's
      return None
  # jax rebuilds dicts with sorted keys; from_state_dict keeps the template's order (which
  # later writes follow): a part whose template has another order is rebuilt by it instead.
  target_treedef, state_treedef = treedef.children()
  n_target = target_treedef.num_leaves
  parts = []
  for part, part_treedef, leaves_of_part, mappings, name in (
      (opt_target, target_treedef, out[:n_target], flat.mappings[0], 'target'),
      (opt_state, state_treedef, out[n_target:], flat.mappings[1], 'state')):
    if _same_key_orders(part, mappings):
      parts.append(part_treedef.unflatten(leaves_of_part))
    else:
      values = part_treedef.unflatten(leaves_of_part)
      parts.append(serialization.from_state_dict(
          part, serialization.to_state_dict(values), name=name))
  return tuple(parts)


# ----------------------------------------------------------------------------- orbax

# The locals of flax's `restore_checkpoint` read by _orbax_restore_in_progress (pinned by
# tests/test_restore_strict.py on the installed flax).
FLAX_RESTORE_LOCALS = ('is_orbax', 'orbax_checkpointer', 'ckpt_path')
_warned_about_flax = []


def _restore_checkpoint_code():
  """The code object of flax's ``restore_checkpoint`` (None if flax.training is not loaded)."""
  checkpoints = sys.modules.get('flax.training.checkpoints')
  return getattr(getattr(checkpoints, 'restore_checkpoint', None), '__code__', None)


def local_names(code) -> tuple:
  """The local variables of a function's code object (cells too: a closure's variables)."""
  return code.co_varnames + code.co_cellvars


def _orbax_restore_in_progress():
  """``(checkpointer, directory)`` if flax's ``restore_checkpoint`` is restoring an orbax dir.

  flax's ``restore_checkpoint`` restores an orbax directory onto the target's structure and
  dtypes (``orbax_checkpointer.restore(ckpt_path, item=target, restore_args=...)``), then hands
  the result to the target's serialization handler (``serialization.from_state_dict``): by then
  a missing key holds the template's value and an extra key is gone. Its frame (found by the
  public function's code object) holds the directory and the checkpointer; None when this
  restore does not run inside it (``from_bytes``, a msgpack file, a direct ``restore_state``),
  and, with a ``RuntimeWarning`` (once) and the check of the values only, when the function no
  longer has the locals :data:`FLAX_RESTORE_LOCALS`.

  Why a frame and not a supported mechanism: none tells the handler which file it restores.
  Of flax, the handler sees only the restored tree and ``serialization.current_path()`` (the
  key path); orbax's checkpointer is the caller's or one ``restore_checkpoint`` makes, with no
  per-restore hook. The one other way, wrapping ``flax.training.checkpoints.restore_checkpoint``
  to note its arguments, was measured and rejected: (1) it must be in place before any restore,
  so ``import flax_optim_compat`` (every legacy program) would import
  ``flax.training.checkpoints`` and with it orbax, +1.8-2.5 s on a 9-10 s import (``python -X
  importtime`` on a loaded 2-core machine), or install an import hook into flax; (2) a
  reference taken before the wrap (``from flax.training.checkpoints import
  restore_checkpoint`` ahead of ``from flax import optim``, a ``functools.partial``) would
  restore unchecked, silently; (3) it replaces another library's function for every program
  in the process. The frame read changes nothing, works however the function was reached
  (tested), and fails loudly (the warning) where flax renames its locals.
  """
  code = _restore_checkpoint_code()
  if code is None:
    return None
  frame = sys._getframe(1)
  while frame is not None and frame.f_code is not code:
    frame = frame.f_back
  if frame is None:
    return None
  missing = [name for name in FLAX_RESTORE_LOCALS if name not in local_names(code)]
  if missing:
    if not _warned_about_flax:
      _warned_about_flax.append(True)
      warnings.warn(
          'flax_optim_compat cannot tell whether this flax.training.checkpoints.'
          f'restore_checkpoint is restoring an orbax directory (its locals {missing} are gone '
          'in this flax release): the restored values are checked, but not the tree orbax '
          'wrote, so a key missing from the directory keeps the target\'s value and an extra '
          'key is dropped, as orbax restores them.', RuntimeWarning, stacklevel=4)
    return None
  local = frame.f_locals
  checkpointer, directory = local.get('orbax_checkpointer'), local.get('ckpt_path')
  if local.get('is_orbax') and checkpointer is not None and directory:
    return checkpointer, directory
  return None


def _orbax_written_tree(checkpointer, directory):
  """What orbax wrote at this optimizer's place in ``directory`` (None if not found there)."""
  tree = _state_check.orbax_metadata(checkpointer, directory)
  for key in _outer_keys():
    if not isinstance(tree, dict) or key not in tree:
      return None
    tree = tree[key]
  return tree if isinstance(tree, dict) else None


# ----------------------------------------------------------------------------- entry points

def _check_input(opt_def, state_dict):
  if isinstance(state_dict, (bytes, bytearray, memoryview)):
    raise TypeError(
        f'restore_state of {opt_def!r} takes a state dict, not msgpack bytes: use '
        'flax.serialization.from_bytes(optimizer, data), or decode the bytes first.')


def restore_target_and_state(opt_def, opt_target, opt_state, state_dict):
  """``(target, state)`` from ``state_dict``, checked against the current target and state.

  Inside ``flax.training.checkpoints.restore_checkpoint`` of an orbax directory, the tree
  orbax wrote is checked as well (see the module docstring).

  Args:
    opt_def: the optimizer def being restored into (named in error messages).
    opt_target: the current target: only its structure, shapes and dtypes are used.
    opt_state: the current ``OptimizerState``: only its structure, shapes and dtypes are used.
    state_dict: ``{'target': ..., 'state': ...}`` as written by ``Optimizer.state_dict``.

  Returns:
    ``(target, state)`` holding the state dict's arrays: NumPy ones read-only, jax ones as
    they are (``step`` as ``int32``).

  Raises:
    ValueError: the state dict does not fit the optimizer; names the first offending path.
    TypeError: ``state_dict`` is msgpack bytes rather than a decoded state dict.
  """
  _check_input(opt_def, state_dict)
  orbax = _orbax_restore_in_progress()
  if orbax is not None:
    written = _orbax_written_tree(*orbax)
    if written is not None:
      _checked(opt_def, _state_check.template(opt_target, opt_state), written, strip_axis=False,
               orbax=True)
  fast = _fast_restore(opt_target, opt_state, state_dict)
  if fast is not None:
    return fast
  template = _state_check.template(opt_target, opt_state)
  values = _read_only_leaves(_checked(opt_def, template, state_dict, strip_axis=False))
  return (serialization.from_state_dict(opt_target, values['target'], name='target'),
          serialization.from_state_dict(opt_state, values['state'], name='state'))


def check_single_copy(replicated_def, opt_target, opt_state, state_dict) -> None:
  """For ``ReplicatedOptimizer.restore_state``: checks the state dict before it is replicated.

  A replicated optimizer's state dict holds the first device's copy only (legacy layout), so
  it is checked against the template's shapes without their leading device axis; errors then
  name the shapes as they are in the file.

  Raises:
    ValueError: the state dict does not fit the optimizer; names the first offending path.
    TypeError: ``state_dict`` is msgpack bytes rather than a decoded state dict.
  """
  _check_input(replicated_def, state_dict)
  _checked(replicated_def, _state_check.template(opt_target, opt_state), state_dict, strip_axis=True)


def local_copies(opt_def, state_dict):
  """``state_dict`` with each cross-process array replaced by this process's copy of it.

  For ``ReplicatedOptimizer.restore_state``, which replicates the state dict onto this
  process's devices: a fully replicated cross-process array (e.g. the state of a mesh-trained
  optimizer, replicated on the mesh) holds the whole value on every process, so this process's
  copy is the value; a sharded one has parts on other processes.

  Raises:
    ValueError: a leaf is sharded across processes; names the leaf.
  """
  def local(path, x):
    if not isinstance(x, jax.Array) or x.is_fully_addressable:
      return x
    if x.is_fully_replicated:
      return x.addressable_data(0)
    where = outer_path() + _tree.format_path(path)
    raise ValueError(
        f'Cannot restore the state dict into this {opt_def!r} optimizer: at {where!r} the '
        f'array (shape {x.shape}) is sharded across processes ({x.sharding}), and one process '
        'cannot replicate what it does not hold. Gather it first, e.g. with '
        'jax.experimental.multihost_utils.process_allgather(tree, tiled=True). Nothing was '
        'restored.')
  return jax.tree_util.tree_map_with_path(local, state_dict)
