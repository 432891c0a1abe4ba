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
others. A MultiOptimizer's, a def chosen in branches, an object with no create in sight, and one
with an update that sets no learning rate where the create's is no literal keep their modes
(docs/migrate.md): refusing it here would make a second run, on the first's output, decide
otherwise (SurVAE's ``optim.Adam(learning_rate=learning_rate)``).
"""
from typing import Dict, List, Set

import libcst as cst

from . import _calls
from . import _flows
from . import _unit

_PICKLED = ('pickle_dump', 'pickle_load')


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
      for part in _values(project, unit, tree):
        for slot in _held(project, unit, part, fields):
          roots.setdefault(project.groups.find(slot), _unit.at(unit, node))
  return roots


def _values(project, unit, tree) -> List[cst.CSTNode]:
  """The values a saved tree is built of: the elements of its tuples and lists, the values of
  its dicts, through the calls that hand back their argument (``unreplicate(state)``); not
  what an expression reads (``opt.target`` saves the params, not ``opt``)."""
  tree = _calls.unwrap(project, unit, tree)
  if isinstance(tree, (cst.Tuple, cst.List)):
    return [v for e in tree.elements for v in _values(project, unit, e.value)]
  items = _calls.dict_items(unit, tree)
  if items is not None:
    return [v for _, value in items for v in _values(project, unit, value)]
  return [tree]


def _held(project, unit, node, fields) -> List[tuple]:
  """The optimizer slots ``node``'s value is or holds: itself, its parts (``{'actor': a}``),
  the fields of the project's class it is an instance of (``TrainState(optimizer=...)``)."""
  slot = project.slot_of(unit, node)
  if slot is not None:
    return [slot]
  if not isinstance(node, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)) or (
      _unit.is_module_like(unit, node)):
    return []
  base = _flows.base_of(project, unit, node)
  held = [s for s in project.optimizer_slots if base is not None and _part_of(s, base)]
  if isinstance(node, (cst.Name, cst.Attribute, cst.Call)):   # ``State(opt, 0)`` too
    held += [s for s in fields if _flows.field_slot(project, unit, node, s[2]) == s]
  return held


def _part_of(slot: tuple, base: tuple) -> bool:
  while slot[0] == 'part':
    slot = slot[1]
    if slot == base:
      return True
  return False


def to_inject(project, found, decided) -> Dict[int, str]:
  """``{id(group): note}`` for the objects among ``decided`` (``(group, ObjectPlan)`` pairs)
  that are saved or restored (``checkpointed``) and must inject their learning rate, the note
  saying why; empty where those objects share one mode (the files are not walked where every
  object does)."""
  if len({obj.mode for g, obj in decided if not g.refused}) < 2:
    return {}
  roots = checkpointed(project, found)
  members = [(g, obj) for g, obj in decided if g.root in roots and not g.refused]
  modes: Set[str] = {obj.mode for _, obj in members}
  if len(modes) < 2:
    return {}
  others = ', '.join(sorted({roots[g.root] for g, obj in members if obj.mode == 'inject'}))
  return {id(g): ('its learning rate is injected (a state layout of its own otherwise): the '
                  'program saves or restores optimizers of other learning-rate modes, and a '
                  'checkpoint of one must restore into another' +
                  (f' (saved or restored at {others})' if others else ''))
          for g, obj in members if obj.mode != 'inject' and _may_inject(g, obj)}


def _may_inject(group, obj) -> bool:
  """Whether injecting keeps the object whole: one def, and each update that sets no learning
  rate can set the create's (a literal, on a plain receiver); else it keeps its mode, as a
  refusal here would change what a second run of migrate, on the first's output, decides."""
  if not obj.creates or obj.group_lrs or any(obj.multis.values()) or any(
      c.branches is not None for c in obj.creates):
    return False
  literal = obj.literal_rate()
  return all((literal and _unit.plain_reference(s.node.func.value)) or (
      obj.overrides.get(id(s)) is not None) for s in group.sites if s.kind in ('apply', 'optimize'))
