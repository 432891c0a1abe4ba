"""Optimizer objects that meet through checkpoint files take one optax state layout.

Legacy's state layout depends only on the def (every ``Adam`` writes ``{'target', 'state':
{'step', 'param_states'}}``), so one script may save an optimizer that another restores, or
loads into from a state dict, whatever each does with its learning rate. The optax layout
depends on the learning-rate mode too (``_learning_rate``): ``optax.adam(1.)``'s state is not
``optax.inject_hyperparams(optax.adam)(...)``'s, nor ``optax.adam(schedule)``'s. Which files
pair up is known only at run time (ElecFF's ``param_elecff.py`` pickles
``to_state_dict(optimizer)`` with a learning rate set per step, ``train_elecff.py`` restores it
into an optimizer with none: migrated with two layouts, the reader raised ``ValueError ... at
path ./opt_state``), so where the objects the program saves or restores have more than one mode,
each of them injects its learning rate (``'inject'``): exact for an object whose sites never
set one (the injected value is the def's and nothing changes it), the general form for the
others. A MultiOptimizer's, a def chosen in branches or an object with no create in sight keeps
its mode (docs/migrate.md, FOM001).
"""
from typing import Dict, List, Set

import libcst as cst

from . import _calls
from . import _flows
from . import _unit

_PICKLED = ('pickle_dump', 'pickle_load')
# An apply site of such an object sets the create's rate (a restored state holds the file's).
NO_LITERAL = ('applied without learning_rate=, its learning rate injected (a checkpoint shared '
              "with optimizers of other modes), and the create's is no literal to set here")


def checkpointed(project, found) -> Dict[tuple, str]:
  """``{object root: where}`` for the objects a checkpoint call saves or restores (the tree
  argument, or a part of it, is the optimizer or an instance of the project's class whose field
  holds it), or a pickle call writes or reads; ``where``: the first such call, ``file:line``."""
  roots: Dict[tuple, str] = {}
  fields = [s for s in project.optimizer_slots if s[0] == 'field' and s[1] is not None]
  for site in found:
    if site.kind in _PICKLED and site.slot is not None:
      roots.setdefault(project.groups.find(site.slot), _unit.at(site.unit, site.node))
  for unit in project.units:
    for node in unit.nodes:
      if not isinstance(node, cst.Call):
        continue
      names = unit.names(node.func) & set(_calls.CHECKPOINT_IO)
      tree = _unit.call_arg(node, *_calls.CHECKPOINT_IO[min(names)]) if names else None
      if tree is None:
        continue
      for part in _unit.walk(tree):
        if isinstance(part, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)):
          for slot in _held(project, unit, part, fields):
            roots.setdefault(project.groups.find(slot), _unit.at(unit, node))
  return roots


def _held(project, unit, node, fields) -> List[tuple]:
  """The optimizer slots ``node``'s value is or holds: itself, its parts (``{'actor': a}``),
  the fields of the project's class it is an instance of (``TrainState(optimizer=...)``)."""
  slot = project.slot_of(unit, node)
  if slot is not None:
    return [slot]
  if not isinstance(node, (cst.Name, cst.Attribute, cst.Subscript)) or (
      _unit.is_module_like(unit, node)):
    return []
  base = _flows.base_of(project, unit, node)
  held = [s for s in project.optimizer_slots if base is not None and _part_of(s, base)]
  if isinstance(node, (cst.Name, cst.Attribute)):
    held += [s for s in fields if _flows.field_slot(project, unit, node, s[2]) == s]
  return held


def _part_of(slot: tuple, base: tuple) -> bool:
  while slot[0] == 'part':
    slot = slot[1]
    if slot == base:
      return True
  return False


def to_inject(decided, roots: Dict[tuple, str]) -> Dict[int, str]:
  """``{id(group): note}`` for the objects among ``decided`` (``(group, ObjectPlan)`` pairs)
  that are saved or restored (``roots``) and must inject their learning rate, the note saying
  why; empty where those objects share one mode."""
  members = [(g, obj) for g, obj in decided if g.root in roots and not g.refused]
  modes: Set[str] = {obj.mode for _, obj in members}
  if len(modes) < 2:
    return {}
  others = ', '.join(sorted({roots[g.root] for g, obj in members if obj.mode == 'inject'}))
  return {id(g): ('its learning rate is injected (a state layout of its own otherwise): the '
                  'program saves or restores optimizers of other learning-rate modes, and a '
                  'checkpoint of one must restore into another' +
                  (f' (saved or restored at {others})' if others else ''))
          for g, obj in members if obj.mode != 'inject' and _may_inject(obj)}


def _may_inject(obj) -> bool:
  return bool(obj.creates) and not obj.group_lrs and not any(obj.multis.values()) and all(
      c.branches is None for c in obj.creates)
