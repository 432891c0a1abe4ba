"""Prototype (not adopted): an ``Optimizer`` that jax flattens as one node of flat leaves.

Today's ``Optimizer`` is a ``flax.struct`` node over ``(state, target)``; its state is an
``OptimizerState`` node over ``param_states``, a tree with one ``flax.struct`` node per parameter
(``_AdamParamState(grad_ema, grad_sq_ema)``). Every jitted call flattens the arguments and
rebuilds the results, and jax calls a Python function for each of those nodes: about 1 µs a
node, which is what separates a many-leaf jitted step from plain optax's (whose states are
NamedTuples of dicts, flattened in C++).

``FlatOptimizer`` keeps the legacy objects but registers one node: its children are the leaves
of ``(target, state)`` in the legacy order, and its auxiliary data is the optimizer def and an
interned layout (the legacy tree structure). A jit output is rebuilt as a lazy
``FlatOptimizer`` holding the leaves; ``target`` and ``state`` (the legacy view, with the
per-parameter dataclasses) are built from the layout on first access and cached. A chained
jitted loop therefore never builds a per-parameter object outside the trace.

What it gives up, and why it was not adopted:

* ``jax.tree_util.tree_flatten_with_path(optimizer)`` would name a leaf with one key
  (``.state.param_states['w'].grad_ema`` as a single entry) instead of legacy's chain of
  ``GetAttrKey`` / ``DictKey`` entries, and ``tree_structure(optimizer)`` is one node with N
  children: code that walks the treedef or compares paths entry by entry sees a difference.
  Flattening with keys into the legacy chain while flattening plainly into flat leaves is not
  an option: jax requires both flattenings to give the same children.
* ``Optimizer`` is a ``flax.struct`` dataclass in legacy (``dataclasses.fields``,
  ``dataclasses.replace``): a lazy object has to imitate that.

``benchmarks/bench_leaves.py --parts step`` measures it next to today's ``Optimizer``, plain
optax and the floor (the same compiled step on a flat list of leaves).
"""
import threading

import jax

__all__ = ['FlatOptimizer', 'from_optimizer']


class _Layout:
  """An interned legacy tree structure: equality and hashing by identity first (jit compares
  and hashes argument structures on every call; a 3000-leaf treedef compares in ~0.1 ms)."""
  __slots__ = ('treedef', '_hash')
  _interned = {}
  _lock = threading.Lock()

  def __init__(self, treedef):
    self.treedef = treedef
    self._hash = hash(treedef)

  @classmethod
  def of(cls, treedef):
    with cls._lock:
      layout = cls._interned.get(treedef)
      if layout is None:
        layout = cls._interned[treedef] = cls(treedef)
      return layout

  def __eq__(self, other):
    return self is other or (isinstance(other, _Layout) and self.treedef == other.treedef)

  def __hash__(self):
    return self._hash


class FlatOptimizer:
  """``Optimizer``'s legacy surface (``target``, ``state``, ``apply_gradient``, ``replace``)."""
  __slots__ = ('optimizer_def', '_target', '_state', '_leaves', '_layout')

  def __init__(self, optimizer_def, state, target):
    self.optimizer_def = optimizer_def
    self._state, self._target = state, target
    self._leaves = self._layout = None

  @classmethod
  def _lazy(cls, optimizer_def, layout, leaves):
    self = object.__new__(cls)
    self.optimizer_def, self._layout, self._leaves = optimizer_def, layout, leaves
    self._target = self._state = None
    return self

  def _materialize(self):
    self._target, self._state = self._layout.treedef.unflatten(self._leaves)

  @property
  def target(self):
    if self._target is None and self._leaves is not None:
      self._materialize()
    return self._target

  @property
  def state(self):
    if self._state is None and self._leaves is not None:
      self._materialize()
    return self._state

  def replace(self, **changes):
    fields = dict(optimizer_def=self.optimizer_def, state=self.state, target=self.target)
    fields.update(changes)
    return FlatOptimizer(**fields)

  def apply_gradient(self, grads, **hyper_param_overrides):
    hyper_params = self.optimizer_def.update_hyper_params(**hyper_param_overrides)
    target, state = self.optimizer_def.apply_gradient(hyper_params, self.target, self.state,
                                                      grads)
    return self.replace(target=target, state=state)


def _flatten(optimizer):
  if optimizer._leaves is None:
    leaves, treedef = jax.tree_util.tree_flatten((optimizer._target, optimizer._state))
    optimizer._leaves, optimizer._layout = leaves, _Layout.of(treedef)
  return optimizer._leaves, (optimizer.optimizer_def, optimizer._layout)


def _unflatten(aux, leaves):
  return FlatOptimizer._lazy(aux[0], aux[1], list(leaves))


jax.tree_util.register_pytree_node(FlatOptimizer, _flatten, _unflatten)


def from_optimizer(optimizer) -> FlatOptimizer:
  """The same optimizer (def, state, target) as a ``FlatOptimizer``."""
  return FlatOptimizer(optimizer.optimizer_def, optimizer.state, optimizer.target)
