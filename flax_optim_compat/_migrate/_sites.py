"""Every use of a legacy optimizer, classified: one *site* per use, for one rule or one refusal.

The project analysis (``_project``) says which values are optimizers; this module looks at what
the code around each one does with it: a ``create(...)`` or an annotation (found here), a use a
rule matches (``.target``, ``.apply_gradient(...)``, ...: each rule's ``match``), a read the
rewrite cannot keep (``.state.param_states``), or a place the analysis cannot follow (an
*escape*). A refused site refuses its whole object (``_plan``).
"""
import dataclasses
import os
from typing import Dict, List, Optional, Set

import libcst as cst
from libcst import metadata as meta

import flax_optim_compat as _optim

from . import _calls
from . import _flows
from . import _import_paths
from . import _project
from . import _refusals
from . import _unit
from . import rules
from .rules import fom005_replace
from .rules import fom017_pickle
from ._edits import statement_of
from ._program import COMPILERS
from ._rule import Rule
from ._unit import SourceFile
from ._unit import short


@dataclasses.dataclass
class Site:
  """One use of a legacy optimizer (or of a legacy name) in one file."""
  unit: SourceFile
  node: cst.CSTNode
  kind: str                 # create / def / target / step / apply / replace / annotation / flow
  slot: Optional[tuple] = None
  refusal: Optional[_refusals.Refusal] = None
  message: str = ''
  # A create whose def is chosen at run time: ``[(unit, def call, DefCall)]``, one per branch.
  branches: Optional[list] = None
  rule: Optional[Rule] = None   # the rule that matched the use, if one did

  @property
  def line(self) -> int:
    return self.unit.line(self.node)


def sites(project: _project.Project) -> List[Site]:
  """Every use of an optimizer value and every legacy name, classified."""
  found: List[Site] = []
  held_in: Dict[str, Set[tuple]] = {}   # path -> the optimizer slots its code holds
  for unit in project.units:
    seen: Set[int] = set()
    held_here = held_in.setdefault(unit.path, set())
    for node in unit.nodes:
      if id(node) in seen:
        continue
      if isinstance(node, cst.ClassDef):
        for base in node.bases:
          if unit.legacy(base.value) and unit.legacy(base.value) != 'Optimizer':
            found.append(Site(unit, node, 'subclass', None, _refusals.SUBCLASS,
                              f'class {node.name.value}({unit.code(base.value)})'))
          elif unit.legacy(base.value) is None and project.is_user_def(unit, base.value):
            found.append(Site(unit, node, 'subclass', None, _refusals.SUBCLASS,
                              f'class {node.name.value}({unit.code(base.value)}): '
                              f'{unit.code(base.value)} is a user subclass of a flax.optim def'))
      if isinstance(node, cst.Annotation):
        head = _unit.annotation_head(node.annotation)
        slot = _flows.annotated_slot(project, unit, node)
        # ``optimizer: flax.optim.OptimizerDef`` on a value the flows find an optimizer (tfx's
        # penguin trainer): the type the value has, rewritten with it.
        if unit.legacy(head) in _unit.OPTIMIZER_CLASSES or (
            unit.legacy(head) == 'OptimizerDef' and slot in project.optimizer_slots):
          found.append(Site(unit, node, 'annotation', slot))
        continue
      if not isinstance(node, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)):
        continue
      compiled = _compiled_create(project, unit, node)
      if compiled is not None:
        found.append(compiled)
      slot = project.slot_of(unit, node)
      if project.unparsed:   # what a file that does not parse may reach (below)
        held_here.add(slot or _held(project, unit, node))
      loaded = fom017_pickle.site(project, unit, node) if slot is None else (
          fom017_pickle.shared_dump(project, unit, node, slot))
      if loaded is not None:
        found.append(Site(unit, node, *loaded, rule=fom017_pickle.RULE))
        continue
      if slot is None:
        unresolved = _unresolved_result(project, unit, node)
        if unresolved is not None:
          found.append(Site(unit, node, 'escape', unresolved[0], _refusals.ESCAPE,
                            unresolved[1]))
          continue
        held = _held(project, unit, node)
        if held is not None and not _whole(unit, node):
          found.append(Site(unit, node, 'escape', held, _refusals.ESCAPE,
                            f'{unit.code(node)} holds optimizers (in a tuple or dict) and is '
                            f'read as {short(unit.code(unit.parent(node)))} at '
                            f'{_unit.at(unit, node)}, which the '
                            'analysis cannot tell apart by index or key'))
        elif held is not None and not _followed(project, unit, node, unit.parent(node)):
          found.append(Site(unit, node, 'escape', held, _refusals.ESCAPE,
                            f'{unit.code(node)} holds an optimizer (in a tuple) and '
                            + unfollowed_use(project, unit, node)))
        continue
      for site in _classify(project, unit, node, slot):
        found.append(site)
        if site.rule is not None and site.rule.covers_its_node:
          seen.add(id(site.node))
  _refuse_unparsed_reach(project, found, held_in)
  refuse_together(project, found)
  return found


def _refuse_unparsed_reach(project, found: List[Site], held_in: Dict[str, Set[tuple]]):
  """Refuses (FOM114) each object a file that does not parse may use. Such a file reaches an
  object only through the project's files it imports (``Program.imported_by``): the objects
  whose values those files hold. A file imported by it cannot run, and a value handed to its
  functions goes to code no tree shows (FOM107 there). Each such object's first site in
  those files (else its first site) gets the refusal, unless one of its sites has one."""
  for bad in project.unparsed:
    units = project.imported_by(bad.source)
    paths = {u.path for u in units}
    reached = {project.groups.find(s) for p in sorted(paths) for s in held_in.get(p, ())
               if s is not None}
    by_group: Dict[tuple, List[Site]] = {}
    for site in found:
      if site.slot is not None and project.groups.find(site.slot) in reached:
        by_group.setdefault(project.groups.find(site.slot), []).append(site)
    for group_sites in by_group.values():
      inside = [s for s in group_sites if s.unit.path in paths] or group_sites
      bad.reached.append(_unit.at(inside[0].unit, inside[0].node))
      if any(s.refusal is not None for s in group_sites):
        continue
      inside[0].refusal = _refusals.UNPARSED
      inside[0].message = (
          f'{bad.path}:{bad.line} does not parse and imports '
          f'{os.path.basename(inside[0].unit.path)} (directly or through other files), '
          'where this optimizer is held: what it does with it cannot be seen')


def _compiled_create(project, unit: SourceFile, node: cst.CSTNode) -> Optional[Site]:
  """A refused site (FOM107) for ``jax.pmap(opt_def.create)(params)`` (``jax.jit`` and
  ``jax.vmap`` too where the create is not one FOM001 rewrites: a def the analysis does not
  trace to its call, such as ``getattr(flax.optim, name)(...)``), ``opt_def`` a flax.optim def;
  the site holds the optimizer's slot where the result is assigned to one, else none (refused
  on its own). Else None."""
  if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Call) and
          unit.names(node.func.func) & (COMPILERS | _unit.CREATE_TRANSFORMS) and node.func.args):
    return None
  if project.is_create(unit, node):
    return None   # a create FOM001 rewrites (or refuses) as it is called
  create = node.func.args[0].value
  if not (isinstance(create, cst.Attribute) and create.attr.value == 'create'):
    return None
  receiver = create.value
  if project.def_branches(unit, receiver) is None and project.opaque_def(unit, receiver) is None:
    return None
  parent = unit.parent(node)
  slot = None
  target = _unit.sole_target(parent)
  if isinstance(target, cst.Name):
    slot = _flows.var_slot(unit, target)
    slot = slot if slot in project.optimizer_slots else None
  return Site(unit, node, 'escape', slot, _refusals.ESCAPE,
              f'{short(unit.code(node))} at {_unit.at(unit, node)} creates the optimizer '
              f'under {unit.code(node.func.func)}, a create migrate does not rewrite (it '
              f'rewrites {unit.code(create)}(...) called as it is, and through jax.jit or '
              'jax.vmap where it traces the def to its call: the same state, as a create only '
              'initialises it)')


def _held(project, unit: SourceFile, node: cst.CSTNode) -> Optional[tuple]:
  """The slot of an optimizer inside the value of ``node`` (a tuple that holds one), else
  None."""
  if not isinstance(node, (cst.Name, cst.Call)):
    return None
  parts = project.known.parts(_flows.base_of(project, unit, node))
  return parts[0][1] if parts and not project.reads_its_def(unit, node) else None


def _unresolved_result(project, unit: SourceFile, node: cst.CSTNode):
  """``(slot, message)`` where ``node`` calls a function-valued parameter the analysis does
  not resolve (its function's call sites are not all in sight, or bind different functions),
  given an optimizer (or a value whose field holds one), and what it returns is used as an
  optimizer: read as ``.target`` / ``.apply_gradient`` / ..., or stored in an optimizer's
  field (``state.replace(optimizer=new)``). Left as it is, that value would stay legacy;
  else None."""
  if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Name)) or (
      _unit.parameter(unit, node.func) is None
      or project.resolve_callable(unit, node.func) is not None):
    return None
  fields = {s[2] for s in project.optimizer_slots if s[0] == 'field'}
  given = None
  for arg in node.args:
    value = arg.value
    candidates = [project.slot_of(unit, value), _held(project, unit, value)]
    if isinstance(value, cst.Name):
      candidates += [_flows.field_slot(project, unit, value, f) for f in sorted(fields)]
    given = next((c for c in candidates if c in project.optimizer_slots), given)
  if given is None:
    return None
  parent = unit.parent(node)
  reads = [node]
  target = _unit.sole_target(parent)
  if isinstance(target, cst.Name):
    reads = _unit.accesses(unit, target) or []
  for read in reads:
    use = unit.parent(read)
    stored = None
    if isinstance(use, cst.Arg) and use.keyword is not None:
      call = unit.parent(use)
      receiver = call.func.value if isinstance(call.func, cst.Attribute) else None
      stored = _flows.field_slot(project, unit, receiver, use.keyword.value) if (
          receiver is not None) else None
    if (isinstance(use, cst.Attribute) and use.value is read
        and use.attr.value in _unit.OPTIMIZER_ONLY_READS) or stored in project.optimizer_slots:
      return (stored if stored in project.optimizer_slots else given,
              f'{unit.code(read)} is used as an optimizer ({short(unit.code(use))}) at '
              f'{_unit.at(unit, read)}, and it is what '
              f'{short(unit.code(node))} at {_unit.at(unit, node)} '
              f'returns: {node.func.value} is a function passed in, which the analysis does '
              f'not resolve: {project.unresolved_why(unit, node.func)}')
  return None


def _whole(unit: SourceFile, node: cst.CSTNode) -> bool:
  """Whether a value that holds optimizers is used whole or by a literal index or key: not
  ``optimizers.items()``, ``optimizers[name]`` (which the analysis cannot tell apart)."""
  parent = unit.parent(node)
  if isinstance(parent, cst.Attribute) and parent.value is node:
    return False
  return not (isinstance(parent, cst.Subscript) and parent.value is node
              and _flows.literal_key(parent) is None)


def refuse_together(project, found: List[Site]):
  """Refuses each object that meets a refused one: used in one function (or one class body,
  or a module's top level) with it, directly or through other objects that do. Such objects
  share values (a tuple of both, one checkpoint save, one step), so the program is migrated
  whole or they are left together; an object that never meets a refused one is not refused."""
  scopes: Dict[int, tuple] = {}    # id(function | class | module) -> (unit, node, groups)
  for site in found:
    if site.slot is not None:
      scope = site.unit.enclosing(site.node, (cst.FunctionDef, cst.ClassDef)) or site.unit.module
      scopes.setdefault(id(scope), (site.unit, scope, {}))[2].setdefault(
          project.groups.find(site.slot), site)
  blocking = {}                    # group -> the refused site that blocks it
  for site in found:
    if site.slot is not None and site.refusal is not None:
      blocking.setdefault(project.groups.find(site.slot), site)
  queue = list(blocking)
  while queue:
    group = queue.pop(0)
    cause = blocking[group]
    for unit, scope, groups in scopes.values():
      if group not in groups:
        continue
      for other, site in groups.items():
        if other in blocking:
          continue
        where = (f'{type(scope).__name__[:-3].lower()} {scope.name.value}'
                 if isinstance(scope, (cst.FunctionDef, cst.ClassDef)) else 'the module')
        site.refusal = _refusals.ESCAPE
        what = cause.unit.code(cause.node)
        what = what if len(what) <= 60 else what[:57] + '...'
        site.message = (f'meets {what} in {where}, refused '
                        f'({cause.refusal.code} at {os.path.basename(cause.unit.path)}:'
                        f'{cause.line}): objects that meet are migrated together or not at all')
        blocking[other] = site
        queue.append(other)


def _classify(project, unit: SourceFile, node: cst.CSTNode, slot: tuple) -> List[Site]:
  """The sites of the optimizer value ``node``: its creation, and its use by its parent.

  A ``create(...)`` call is both: ``optim.Adam(0.1).create(p).replicate()`` creates the
  optimizer and calls a method on it, and each of the two is rewritten by its own rule. A use
  is the rule's that matches it (``rules.ALL``); a member no rule matches is a read the
  rewrite cannot keep or a use the analysis cannot follow.
  """
  parent = unit.parent(node)
  matched = [Site(unit, m.node, m.kind, slot, m.refusal, m.message, rule=rule)
             for rule, m in rules.matches(unit, node)]
  member = isinstance(parent, cst.Attribute) and parent.value is node
  extra = [] if member else matched   # a use of the value itself (``isinstance(opt, ...)``)
  if isinstance(node, cst.Call) and project.is_create(unit, node):
    if not _followed(project, unit, node, parent):
      return extra + [Site(unit, node, 'escape', slot, _refusals.ESCAPE,
                           f'{unit.code(node)} ' + unfollowed_use(project, unit, node))]
    create = Site(unit, node, 'create', slot)
    return extra + [create] + ([_member(project, unit, node, slot, matched)] if member else [])
  if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and (
      node.func.attr.value == 'create') and project.resolve_callable(unit, node.func) is None:
    # stored where an optimizer is (``State(opt=...)``); ``util.create(...)`` calls the
    # project's function, whose optimizer is followed as a value
    return [Site(unit, node, 'escape', slot, _refusals.ESCAPE,
                 f'{short(unit.code(node), 40)} creates this optimizer from '
                 f'{short(unit.code(node.func.value), 40)}, a def the analysis does not trace to '
                 'a flax.optim def call, so its optax form cannot be decided here')]
  if member:
    if fom005_replace.unchanged_field(unit, parent) or fom005_replace.step_set(unit, parent):
      return extra   # passed back to its own replace: the keyword goes with FOM005's rewrite
    return [_member(project, unit, node, slot, matched)]
  if isinstance(node, (cst.Call, cst.Name, cst.Attribute, cst.Subscript)):
    if isinstance(parent, cst.Attribute) and parent.attr is node:
      return extra
    if _followed(project, unit, node, parent):
      return extra
    return extra + [Site(unit, node, 'escape', slot, _refusals.ESCAPE,
                         f'{unit.code(node)} ' + unfollowed_use(project, unit, node))]
  return extra


_READS = ('state', 'optimizer_def', 'hyper_params', 'state_dict', 'restore_state')


def _member(project, unit: SourceFile, node: cst.CSTNode, group: tuple, matched) -> Site:
  """The site of ``node.<attribute>``, where ``node`` (any expression) is an optimizer."""
  parent = unit.parent(node)
  if matched:
    site = matched[0]
    if site.rule.returns_optimizer and not _followed(project, unit, site.node,
                                                     unit.parent(site.node)):
      return Site(unit, site.node, 'escape', group, _refusals.ESCAPE,
                  f'the result of {parent.attr.value}() '
                  + unfollowed_use(project, unit, site.node))
    return site
  if parent.attr.value in _READS:
    return Site(unit, parent, 'read', group, _refusals.READ, _read_message(unit, parent))
  message = f'uses {unit.code(parent)}, which a TrainState does not have'
  # ShoeGAN's ``opt_d.apply_gradients(grad_D)``: a typo the legacy program fails at too.
  if parent.attr.value != 'create' and not _legacy_member(parent.attr.value):
    return Site(unit, parent, 'escape', group, _refusals.NO_MEMBER,
                f'uses {unit.code(parent)}, which flax 0.5.3\'s Optimizer does not have either: '
                'the program fails there as it is (AttributeError), so it is left as it is')
  if parent.attr.value == 'create':   # a def's method: one variable holds a def and an optimizer
    message += (f': create is a def\'s method, so {short(unit.code(node), 40)} holds a def here, '
                'one the analysis does not trace to a flax.optim def call, and an optimizer '
                'elsewhere')
  return Site(unit, parent, 'escape', group, _refusals.ESCAPE, message)


def _read_message(unit: SourceFile, read: cst.Attribute) -> str:
  """``reads optimizer.state, passed to zero_states(...) at training.py:340``: the legacy
  internal read and where it goes, so the report names what has no TrainState equivalent."""
  message = f'reads {unit.code(read)}'
  what = {'state': 'step and per-parameter states', 'optimizer_def': 'def',
          'hyper_params': 'hyper-parameters',
          # A TrainState's state dict is {step, params, opt_state} with optax's own state
          # fields; FOM016 rebuilds legacy's layout for the defs whose fields it maps.
          'state_dict': "state dict {'target', 'state': {'step', 'param_states'}} with its "
                        "per-parameter names (grad_ema, momentum...), which a TrainState's "
                        "state dict (step, params, optax's opt_state) does not have",
          # The argument is legacy's layout, built or edited by the program's own code.
          'restore_state': "method that loads a state dict in legacy's layout {'target', "
                           "'state': {'step', 'param_states'}} (the program builds or edits "
                           'one by those keys), which a TrainState has no method for and '
                           "whose per-parameter states optax keeps under other names"
          }.get(read.attr.value)
  if what:
    message += f' (legacy\'s {what})'
  parent = unit.parent(read)
  if isinstance(parent, cst.Arg) and isinstance(unit.parent(parent), cst.Call):
    call = unit.parent(parent)
    message += (f', passed to {short(unit.code(call.func))}(...) at '
                f'{_unit.at(unit, read)}')
  return message


def _bindings(unit: SourceFile, func: cst.CSTNode) -> list:
  """The nodes that bind the name ``func`` in its scope (one per def, class or assignment)."""
  scope = unit.scopes.get(func)
  if not isinstance(func, cst.Name) or scope is None:
    return []
  return [a.node for a in _unit.bindings(unit, scope, func.value)
          if isinstance(a, meta.Assignment)]


def unfollowed_use(project, unit: SourceFile, node: cst.CSTNode) -> str:
  """What the optimizer value ``node`` is used for where ``_followed`` says no, and why the
  analysis stops there: ``is passed to utils.TrainState(...) as optimizer= at train.py:159:
  nerf.utils.TrainState is not a function or class of the given files ...``, so the report
  names the line to change and what it does."""
  parent = unit.parent(node)
  where = _unit.at(unit, node)
  if isinstance(parent, cst.Arg) and isinstance(unit.parent(parent), cst.Call):
    call = unit.parent(parent)
    how = (f'as {parent.keyword.value}=' if parent.keyword is not None
           else f'as argument {call.args.index(parent) + 1}')
    what = f'is passed to {short(unit.code(call.func))}(...) {how} at {where}'
    callee = project.resolve_callable(unit, call.func)
    if callee is not None:
      wrong = _flows.mismatch(callee[1], call.args)
      if wrong is not None:
        return f'{what}: {wrong}, and the argument is not followed into it'
      if _calls.differentiated(project, unit, call) is not None:
        return f'{what}: it is the argument the gradient is taken with respect to'
      return f'{what}: the analysis does not follow this argument into the call'
    param = _unit.parameter(unit, call.func)
    fdef = unit.enclosing(param, (cst.FunctionDef,)) if param is not None else None
    if fdef is not None:   # modax's ``train(update_fn, optimizer, ...)``
      return (f'{what}: {call.func.value} is a parameter of {fdef.name.value}(), which the '
              f'analysis does not resolve to one function: '
              f'{project.unresolved_why(unit, call.func)}')
    cls, methods = project.family_methods(unit, call.func) if isinstance(
        call.func, cst.Attribute) else (None, {})
    if len(methods) > 1:   # distml's register, overridden below the receiver's class
      where = ', '.join(f'{_unit.at(u, m.name)}' for u, m in methods.values())
      return (f'{what}: {call.func.attr.value}() is defined by {len(methods)} classes of the '
              f'family of {cls.rsplit(".", 1)[-1]} (at {where}), and which one runs is not '
              'decided (a subclass of the receiver\'s class overrides it, or the class has '
              'several bases)')
    made = _unit.assigned_value(unit, call.func) if isinstance(call.func, cst.Name) else None
    made = project.resolve_callable(unit, made.func) if isinstance(made, cst.Call) else None
    if made is not None and isinstance(made[1], cst.ClassDef):   # modax's mask_scheduler
      return (f'{what}: {call.func.value} is an instance of {made[1].name.value} (a class of the '
              f'given files, at {_unit.at(made[0], made[1].name)}), and the analysis follows a '
              'call of an instance into a __call__ its class defines itself, undecorated, not '
              'one it inherits')
    lam = _calls.lambda_of(unit, call.func)
    if lam is not None:
      return (f'{what}: {short(unit.code(call.func))} is the lambda at {_unit.at(unit, lam)}, '
              'which is also bound elsewhere or read other than as the callee of a call, so not '
              'all its calls are in sight (a lambda is followed where they are)')
    names = sorted(unit.names(call.func))
    unbound = None if names else _import_paths.bound_nowhere(project, unit, call.func)
    if unbound is not None:   # SayCan's ``checkpoint.restore_checkpoint``, a typo
      stars = ''.join(f', nor by its from {m} import *' for m in unit.star_sources)
      return (f'{what}: {unbound} is bound nowhere in its file{stars} (the program fails there '
              'as it is, NameError)')
    if not names:
      return f'{what}: a computed callable, which the analysis does not resolve'
    bound = _bindings(unit, call.func)
    if len(bound) > 1:   # a notebook-style script that defines the step again
      lines = ', '.join(str(unit.line(n)) for n in bound)
      return (f'{what}: {unit.code(call.func)} is bound more than once in its scope (lines '
              f'{lines}), and the analysis follows a callee bound once')
    own = project.own_name_ending(names[0])
    if own is not None:
      return (f'{what}: it is imported as {names[0]}, a path that does not resolve to the given '
              f'files, which define {own} (import it by that path to migrate this use)')
    holder = project.lacking_module(names[0])
    if holder is not None:   # ref_nerf_jax's utils.TrainState
      return (f'{what}: {names[0]} is not in the given files: their module '
              f'{holder.module_name} ({os.path.basename(holder.path)}) defines no '
              f'{names[0].rpartition(".")[2]} (the program fails there as it is, '
              'AttributeError, unless something sets it at run time)')
    receiver = call.func.value if isinstance(call.func, cst.Attribute) else None
    if isinstance(receiver, cst.Call) and 'builtins.super' in unit.names(receiver.func):
      cls = unit.enclosing(call, (cst.ClassDef,))   # ml-params-flax's library BaseTrainer
      own = [b for b in cls.bases if project.resolve_callable(unit, b.value)] if cls else []
      return (f'{what}: {call.func.attr.value}() of ' + (
          'a base class, and the analysis does not follow a call through super()' if own else
          'a base class the given files do not define (a library class it does not know)'))
    param = _unit.parameter(unit, receiver) if isinstance(receiver, cst.Name) else None
    fdef = unit.enclosing(param, (cst.FunctionDef,)) if param is not None else None
    if fdef is not None:   # flax_bert's ``state.take_step(optimizer, grad)``
      return (f'{what}: {receiver.value} is a parameter of {fdef.name.value}(), and which '
              f'class\'s {call.func.attr.value}() this calls is not decided (a parameter\'s '
              'class is taken from its function\'s calls where all are in sight and pass '
              'instances of one class of the given files)')
    return (f'{what}: {names[0]} is not a function or class of the given files (a library '
            'call the analysis does not know, or an import that does not resolve to them)')
  returned = parent if isinstance(parent, cst.Return) else unit.enclosing(node, (cst.Return,))
  calls = _unresolved_callers(project, unit, returned) if returned is not None and (
      statement_of(unit, returned) is statement_of(unit, node)) else []
  if calls:
    fdef = unit.enclosing(returned, (cst.FunctionDef,))
    shown = ', '.join(f'{_unit.at(u, c)} ({short(u.code(c), 40)})' for u, c in calls[:3])
    factory = unit.enclosing(unit.parent(fdef), (cst.ClassDef, cst.FunctionDef))
    if isinstance(factory, cst.FunctionDef):   # a nested function its factory hands back
      u, c = calls[0]
      if not isinstance(c, cst.Call) or (   # the factory's own call, its result not called
          project.resolve_callable(u, c.func) or (None, None))[1] is factory:
        return (f'is returned at {where} by the function {fdef.name.value}(), which '
                f'{factory.name.value}() hands back; what {factory.name.value}() returns is '
                f'used at {_unit.at(u, c)} ({short(u.code(c), 40)}) other than as a call the '
                'analysis resolves, so what the function returns where it is called is not '
                'followed')
      return (f'is returned at {where} by the function {fdef.name.value}(), which '
              f'{factory.name.value}() hands back; the call at {shown} runs '
              f'{project.unresolved_value(u, c.func)}, so what that call returns is not '
              'followed')
    if factory is None:
      return (f'is returned at {where} by the function {fdef.name.value}(), which is called at '
              f'{shown} by a path of the project\'s modules that the analysis does not resolve '
              'to it, so what that call returns is not followed')
    return (f'is returned at {where} by the method {fdef.name.value}(), which is called at '
            f'{shown} on a value whose class the analysis does not name (not self, nor a '
            'variable bound once to an instance of the class), so what that call returns is '
            'not followed')
  if isinstance(parent, (cst.Element, cst.DictElement, cst.StarredDictElement)):
    container = unit.parent(parent)
    return (f'is put in {short(unit.code(container))} at {where}, a container the analysis '
            'does not follow there')
  if isinstance(parent, cst.Assign):
    targets = ', '.join(short(unit.code(t.target), 40) for t in parent.targets)
    return (f'is assigned to {targets} at {where}, a target the analysis does not track (an '
            'item, or an attribute of a value it cannot name)')
  statement = statement_of(unit, node)
  statement = unit.code(statement if isinstance(statement, cst.SimpleStatementLine) else node)
  return f'is used in {short(statement)} at {where}, which the analysis does not follow'


def _unresolved_callers(project, unit: SourceFile, returned: cst.Return):
  """The calls that may run the method holding ``returned`` but that the analysis does not
  resolve to it (``_project.unresolved_method_calls``): what they return is not followed."""
  fdef = unit.enclosing(returned, (cst.FunctionDef, cst.Lambda))
  if not isinstance(fdef, cst.FunctionDef):
    return []
  return project.unresolved_method_calls(unit, fdef)


def _followed(project, unit: SourceFile, node: cst.CSTNode, parent: cst.CSTNode) -> bool:
  """Whether the optimizer value ``node`` goes somewhere the analysis follows."""
  if isinstance(parent, (cst.AssignTarget, cst.Param)):
    return True
  if isinstance(parent, cst.Assign) and parent.value is node:
    return all(_target_ok(project, unit, t.target) for t in parent.targets)
  if isinstance(parent, cst.AnnAssign):
    return True
  if isinstance(parent, cst.Return):
    return not _unresolved_callers(project, unit, parent)
  if isinstance(parent, cst.Lambda) and parent.body is node:   # what the lambda returns
    callee = _lambda_callee(unit, parent)
    return callee is not None and (_calls.called_lambda(unit, callee) is parent or (
        project.passed_lambda(unit, callee, parent)))
  if isinstance(parent, (cst.Element,)):
    container = unit.parent(parent)
    outer = unit.parent(container)
    while isinstance(container, (cst.Tuple, cst.List)) and isinstance(outer, cst.Element):
      container = unit.parent(outer)   # ``return loss, (opt_a, opt_b)``
      outer = unit.parent(container)
    if isinstance(container, cst.Tuple) and isinstance(outer, cst.Del):
      return True   # ``del optimizer, variables``
    if isinstance(container, (cst.Tuple, cst.List)) and isinstance(outer, cst.Arg):
      call = unit.parent(outer)   # ``save_checkpoint(d, (optimizer, ema), step)``
      if isinstance(call, cst.Call) and (_calls.pass_through_arg(project, unit, call) is container
                                         or _calls.sink_arg(unit, call) is container):
        return _tuple_destination_ok(project, unit, call, container)
      if isinstance(call, cst.Call) and _bound_by(project, unit, call, outer):
        return True   # ``scan(step, (optimizer, key), xs)``: each element into its part
    if isinstance(container, cst.Tuple) and isinstance(outer, cst.Return):
      return not _unresolved_callers(project, unit, outer)
    if isinstance(container, cst.Tuple) and isinstance(outer, cst.Assign):
      return True
    return isinstance(container, cst.Tuple) and isinstance(outer, cst.AssignTarget)
  if isinstance(parent, cst.DictElement) and parent.value is node:
    return _dict_followed(project, unit, unit.parent(parent))
  if isinstance(parent, cst.Attribute):
    return True   # its own attribute uses are classified on their own
  if isinstance(parent, cst.Del):
    return True   # ``del optimizer``: the name goes, whatever it holds
  if isinstance(parent, cst.Arg):
    call = unit.parent(parent)
    if not isinstance(call, cst.Call):
      return False
    names = unit.names(call.func)
    if parent.keyword is not None and _calls.dict_items(unit, call) is not None:
      return _dict_followed(project, unit, call)   # ``dict(optimizer=opt, epoch=0)``
    if rules.matches(unit, node):
      return True   # a rule rewrites this use (``isinstance(opt, optim.Optimizer)``)
    if _calls.pass_through_arg(project, unit, call) is node or _calls.sink_arg(unit, call) is node:
      return True
    if names & _calls.TREE_MAPS and parent.keyword is None and call.args[0] is not parent:
      return True
    if names & {'print', 'builtins.print'}:
      return True
    if _bound_by(project, unit, call, parent):
      return True
    if isinstance(call.func, cst.Attribute) and call.func.attr.value in (
        'replace', '_replace') and parent.keyword is not None:
      return True   # ``state.replace(optimizer=opt)``, a NamedTuple's ``_replace``
    return False
  if isinstance(parent, cst.Expr):
    return True
  if isinstance(parent, cst.FormattedStringExpression):
    return True   # ``f'... {config.optim.optimizer}'``: formatted as text, as print does
  if isinstance(parent, cst.Subscript):
    return True
  if isinstance(parent, cst.Comparison) and len(parent.comparisons) == 1 and isinstance(
      parent.comparisons[0].operator, (cst.Is, cst.IsNot)) and isinstance(
          parent.comparisons[0].comparator, cst.Name) and (
              parent.comparisons[0].comparator.value == 'None'):
    return True   # ``state.optimizer is None``: a TrainState is no None either
  return False


def _dict_followed(project, unit: SourceFile, container: cst.CSTNode) -> bool:
  """Whether a dict built whole with string keys (``{'actor': opt_a, 'critic': opt_c}``,
  ``dict(actor=opt_a, critic=opt_c)``) goes where each value is followed at its key: assigned
  to a target, returned, bound to a parameter of the project's own function, or handed to a
  pass-through call (``restore_checkpoint``) whose result is assigned or returned, or to a sink
  (``save_checkpoint``)."""
  if _calls.dict_items(unit, container) is None:
    return False
  outer = unit.parent(container)
  if isinstance(outer, cst.Assign) and outer.value is container:
    return all(_target_ok(project, unit, t.target) for t in outer.targets)
  if isinstance(outer, cst.Element):   # ``return {'actor': a, 'critic': c}, loss``
    return _followed(project, unit, container, outer)
  if isinstance(outer, cst.Return):
    return True
  if isinstance(outer, cst.Arg) and isinstance(unit.parent(outer), cst.Call):
    call = unit.parent(outer)
    if _calls.sink_arg(unit, call) is container or _bound_by(project, unit, call, outer):
      return True
    if _calls.pass_through_arg(project, unit, call) is container:
      node, parent = call, unit.parent(call)
      while isinstance(parent, cst.Arg) and isinstance(unit.parent(parent), cst.Call) and (
          _calls.pass_through_arg(project, unit, unit.parent(parent)) is node):
        node = unit.parent(parent)
        parent = unit.parent(node)
      return isinstance(parent, cst.Return) or (
          isinstance(parent, cst.Assign) and all(
              isinstance(t.target, cst.Name) for t in parent.targets))
  return False


def _bound_by(project, unit: SourceFile, call: cst.Call, arg: cst.Arg) -> bool:
  """Whether ``arg`` of ``call`` binds a parameter of the project's own function or class
  (also through ``functools.partial``, ``jax.grad`` of it, other than the argument it
  differentiates), or is the initial carry of a ``lax`` loop."""
  callee = project.resolve_callable(unit, call.func)
  if callee is not None:
    return _flows.mismatch(callee[1], call.args) is None
  lam = _calls.called_lambda(unit, call.func)
  if lam is not None and not arg.star:   # binds one of its parameters
    params = [*lam.params.posonly_params, *lam.params.params]
    return (any(p.name.value == arg.keyword.value for p in [*params, *lam.params.kwonly_params])
            if arg.keyword is not None else call.args.index(arg) < len(params))
  if project.partial_callee(unit, call) is not None and call.args[0] is not arg:
    return True   # ``functools.partial(loss_fn, opt)``: a parameter of loss_fn
  loop = _calls.loop(project, unit, call)
  if loop is not None:
    return loop[2] is arg.value
  differentiated = _calls.differentiated(project, unit, call)
  if differentiated is not None and arg.keyword is None and not arg.star:
    argnums = _unit.call_arg(call.func, 1, 'argnums')
    if argnums is None:
      wrt = {0}
    elif isinstance(argnums, cst.Integer):
      wrt = {int(argnums.value)}
    elif isinstance(argnums, cst.Tuple) and all(isinstance(e.value, cst.Integer)
                                                for e in argnums.elements):
      wrt = {int(e.value.value) for e in argnums.elements}
    else:
      return False
    return call.args.index(arg) not in wrt
  return False


def _legacy_member(name: str) -> bool:
  """Whether the legacy ``Optimizer`` has the attribute ``name`` (a field or a method)."""
  return name in {f.name for f in dataclasses.fields(_optim.Optimizer)} or hasattr(
      _optim.Optimizer, name)


def _lambda_callee(unit: SourceFile, lam: cst.Lambda) -> Optional[cst.CSTNode]:
  """What the calls of ``lam`` name: the lambda (or the call compiling it) where it is called
  where it is written, or the variable it is bound to (so); else None."""
  node, parent = lam, unit.parent(lam)
  if isinstance(parent, cst.Arg) and isinstance(unit.parent(parent), cst.Call) and (
      unit.parent(parent).args[0] is parent):
    node = unit.parent(parent)   # ``jax.jit(lambda ...)``
    parent = unit.parent(node)
  if isinstance(parent, cst.Call) and parent.func is node:
    return node
  target = _unit.sole_target(parent, value=node)
  return target if isinstance(target, cst.Name) else None


def _tuple_destination_ok(project, unit: SourceFile, call: cst.Call, container) -> bool:
  """Whether a tuple handed to a pass-through call comes back where it is followed: unpacked
  into as many targets, or returned (a sink reads it and is done)."""
  if _calls.pass_through_arg(project, unit, call) is not container:
    return True
  node, parent = call, unit.parent(call)
  while isinstance(parent, cst.Arg) and isinstance(unit.parent(parent), cst.Call) and (
      _calls.pass_through_arg(project, unit, unit.parent(parent)) is node):
    node = unit.parent(parent)
    parent = unit.parent(node)
  if isinstance(parent, cst.Return):
    return True
  target = _unit.sole_target(parent)
  return isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == len(
      container.elements)


def _target_ok(project, unit: SourceFile, target) -> bool:
  if isinstance(target, (cst.Tuple, cst.List)):
    return all(_target_ok(project, unit, e.value) for e in target.elements)
  return _flows.target_slot(project, unit, target) is not None
