"""What stays legacy where no object the analysis follows covers it, and why (each a refusal).

A flax.optim name no rule rewrites and no refused object covers (``leftover_reason``, for the
plan: where a def goes, FOM112; ``WeightNorm``, FOM103; legacy internals, FOM104), and a use of
the legacy Optimizer API on a value the analysis does not tie to an object it follows
(``out_of_sight_uses``, FOM107: an object a library made, a name bound nowhere, a value that
comes from out of sight). A silent leftover would pass ``--check``.
"""
import builtins
import os
import re
from typing import List, Optional

import libcst as cst

from . import _flows
from . import _program
from . import _project
from . import _refusals
from . import _unit
from . import rules
from ._edits import FilePlan, statement_of
from ._report import Record
from ._unit import short

# The legacy defs (FOM112 names where one goes when no create uses it).
DEFS = frozenset(_unit.BUILTIN_DEFS + ('MultiOptimizer', 'WeightNorm'))


class LeftoverVisitor(cst.CSTVisitor):
  """Refuses every legacy name that no rule rewrites and no refusal covers, naming why: a def
  that goes where the analysis does not follow it (FOM112: ``make(optim.Adam(0.1))``, a def
  returned by a method of a value whose class it cannot name), ``WeightNorm`` (FOM103), legacy
  internals built by hand (FOM104: ``OptimizerState(...)``, ``flax.optim.adam._AdamParamState``).
  A silent leftover would pass ``--check``."""

  def __init__(self, project, unit, plan, handled, records, after_the_project=False):
    super().__init__()   # after_the_project: the second pass, only those rules
    self.project, self.unit, self.plan, self.handled = project, unit, plan, handled
    self.records, self.after_the_project = records, after_the_project
    self.pre_linen = project.pre_linen(unit)   # why the file cannot run, or None
    # A pre-Linen file: the rules plan into a plan that is dropped (one per file).
    self.scratch = FilePlan(unit) if self.pre_linen else None

  def _by_a_rule(self, node) -> bool:
    if self.pre_linen:
      # A pre-Linen file cannot run on today's flax whatever is rewritten: a legacy name a
      # rule would rewrite (``optim.DynamicScale``) stays with the file's refused optimizers.
      if any(rule.plan_name(self.unit, node, self.scratch, []) for rule in rules.NAMING
             if not rule.after_the_project):
        self.plan.mark(node, _refusals.marker_text(_refusals.PRE_LINEN))
        self.records.append(Record(self.unit.path, self.unit.line(node), _refusals.PRE_LINEN.code,
                                   'refused', '', f'{self.unit.code(node)}: {self.pre_linen}'))
        return True
      return False
    return any(rule.plan_name(self.unit, node, self.plan, self.records) for rule in rules.NAMING
               if rule.after_the_project == self.after_the_project)

  def on_visit(self, node) -> bool:
    if self.after_the_project and self.pre_linen:   # its rules plan into a dropped plan
      return False
    unit, plan = self.unit, self.plan
    edit = plan.edits.get(id(node))
    if isinstance(node, (cst.Import, cst.ImportFrom)):
      self._by_a_rule(node)   # ``from flax.optim import dynamic_scale as dynamic_scale_lib``
      return False
    # A statement a rule rebuilds from its rewritten parts (FOM011, FOM012): look inside.
    if id(node) in self.handled or (edit and not edit.rule.rebuilds_statement):
      return False
    if self._by_a_rule(node) or self.after_the_project:
      return self.after_the_project   # the second pass looks at every node's children
    if _unit.refers_to_legacy(unit, node):
      refusal, message = leftover_reason(self.project, unit, node)
      plan.mark(node, _refusals.marker_text(refusal))
      self.records.append(Record(unit.path, unit.line(node), refusal.code, 'refused', '',
                                 message))
      return False
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and (
        node.func.attr.value == 'optax_transform'):
      return False   # the package's exact transform, kept on purpose (flagged FOM009)
    return True


def leftover_reason(project, unit, node):
  """``(refusal, message)`` for a legacy name left as it is: what it is and why no rule
  rewrites it there."""
  name = unit.legacy(node)
  parent = unit.parent(node)
  call = parent if isinstance(parent, cst.Call) and parent.func is node else None
  shown = short(unit.code(call if call is not None else node))
  if name == 'WeightNorm':
    return _refusals.WEIGHT_NORM, f'{shown}: {_refusals.WEIGHT_NORM.reason}'
  missing = _unit.missing_member(unit, node)
  if missing is not None:
    return _refusals.UNFOLLOWED, (f'{short(unit.code(parent))}: flax.optim (flax 0.5.3) has no '
                                  f'{missing}; the program fails there on the legacy library '
                                  'too, so it was left as it is')
  if _unit.the_module(unit, node):
    shown = short(unit.code(unit.enclosing(node, (cst.Call,)) or node))
    return _refusals.UNFOLLOWED, (f'{shown}: flax.optim itself as a value (a def chosen by a '
                                  'name read at run time): no optax form can be decided here')
  if name == 'OptimizerState' or name is None:
    return _refusals.READ, (f'{shown}: legacy internals (an optimizer state, per-parameter '
                            'states) that a TrainState does not have')
  if name == 'OptimizerDef' and unit.enclosing(node, (cst.Annotation,)) is not None:
    return _refusals.UNFOLLOWED, (f'{shown}: the annotation of a def that is not rewritten, '
                                  'left as it is with it')
  wrapper = _weight_norm_of(unit, call) if call is not None and name in DEFS else None
  if wrapper is not None:   # hypernerf: `optimizer_def = optim.WeightNorm(optimizer_def)`
    return _refusals.WEIGHT_NORM, (
        f'{shown}: wrapped by {short(unit.code(wrapper), 40)} at {_unit.at(unit, wrapper)}: '
        f'{_refusals.WEIGHT_NORM.reason}, so this def has none either')
  why = _def_destination(project, unit, call) if call is not None and name in DEFS else None
  if call is None and name in DEFS and isinstance(parent, cst.Arg) and isinstance(
      unit.parent(parent), cst.Call):   # the class itself as a value: make(optim.Adam, lr=...)
    callee = unit.parent(parent).func
    if 'builtins.isinstance' in unit.names(callee):
      why = (f'the type of an isinstance(...) check at {_unit.at(unit, node)}: an optax '
             'transformation has no class per optimizer, so the check has no optax form')
    elif 'builtins.dict' in unit.names(callee):   # eve's dict(Eve=Eve, Adam=optim.Adam)[name]
      why = (f'the class is put in {short(unit.code(unit.parent(parent)), 40)} at '
             f'{_unit.at(unit, node)}, from which a class is chosen at run time: which one is '
             'called, and so its optax form, cannot be decided here')
    else:
      why = (f'the class is passed to {short(unit.code(callee), 40)}(...) at '
             f'{_unit.at(unit, node)}: a def class passed as a value is called elsewhere, with '
             'arguments the analysis does not read, so its optax form cannot be decided here')
  elif call is None and name in DEFS and isinstance(parent, cst.IfExp):   # eve's pixelcnn
    why = (f'the class is a branch of {short(unit.code(parent), 40)} at '
           f'{_unit.at(unit, node)}, which chooses the def class at run time: which one is '
           'called, and so its optax form, cannot be decided here')
  elif call is None and name in DEFS and isinstance(parent, cst.Assign):   # sabertooth
    why = (f'the class is bound to {short(unit.code(parent.targets[0].target), 40)} at '
           f'{_unit.at(unit, node)} and called through it: migrate reads a def where the '
           'flax.optim class itself is called (optim.Adam(...)), so its optax form cannot be '
           'decided here')
  return _refusals.UNFOLLOWED, f'{shown}: ' + (why or _refusals.UNFOLLOWED.reason)


def opaque_create(project, unit, create):
  """``(refusal, message)`` for a create whose def names flax.optim but is traced to no one def
  call (``Project.opaque_def``): the expression it comes from, and why the flax.optim name in
  it is not followed (``leftover_reason``), as that name's own record would say."""
  vunit, value = project.opaque_def(unit, _unit.create_receiver(unit, create))
  node = next(n for n in _unit.walk(value) if _unit.refers_to_legacy(vunit, n))
  refusal, why = leftover_reason(project, vunit, node)
  return refusal, (f'{short(unit.code(create))}: its def comes from {short(vunit.code(value))} '
                   f'({_unit.at(vunit, value)}), which the analysis does not trace to one '
                   f'flax.optim def call: {why}')


def _weight_norm_of(unit, call) -> Optional[cst.Call]:
  """The ``optim.WeightNorm(...)`` call that wraps the def ``call``: its argument directly, or
  through the variable ``call`` is assigned to (a read of it beside its creates); else None."""
  parent = unit.parent(call)
  reads = [call]
  target = _unit.sole_target(parent)
  if isinstance(target, cst.Name):
    reads = _project.reads_beside_create(unit, target)
  for read in reads:
    wrapper = _project.legacy_call_around(unit, read)
    if wrapper is not None and unit.legacy(wrapper.func) == 'WeightNorm':
      return wrapper
  return None


def _may_read(other, unit, name: str) -> bool:
  """Whether file ``other`` may read ``unit``'s module-level ``name``: it names it and imports
  ``unit``'s module (rff-mrf-jax's ``args.py`` says ``--optimizer`` and imports no ``lm``)."""
  module = (unit.module_name or os.path.splitext(os.path.basename(unit.path))[0]).split('.')[-1]
  return bool(re.search(rf'\b{re.escape(name)}\b', other.source) and re.search(
      rf'^[ \t]*(?:from|import)\b[^\n]*\b{re.escape(module)}\b', other.source, re.MULTILINE))


def _def_destination(project, unit, call):
  """Where a def call that no create uses goes, as a reason: a variable read elsewhere too, a
  return value of a function no resolved call creates from, an argument, an element of a
  container passed to a call (a decorator's). None if neither."""
  parent = unit.parent(call)
  variable = _unit.sole_target(parent)
  if isinstance(variable, cst.Name):
    if _unit.accesses(unit, variable) == [] and not any(   # rff-mrf-jax's lm.py
        isinstance(n, (cst.Global, cst.Nonlocal)) for n in unit.nodes) and not any(
            u is not unit and _may_read(u, unit, variable.value) for u in project.units):
      return (f'assigned to {variable.value}, which nothing reads: no optimizer is created from '
              'it, so migrate has no object to rewrite it with; remove the line, or write its '
              'optax form by hand')
    for use in _project.reads_beside_create(unit, variable)[:1]:
      return (f'assigned to {variable.value}, which is also read at {_unit.at(unit, use)} '
              f'({short(unit.code(statement_of(unit, use)))}): the analysis follows a def '
              'variable read only as the receiver of .create(...)')
  if isinstance(parent, cst.Return):
    fdef = unit.enclosing(call, (cst.FunctionDef,))
    if fdef is not None:
      elsewhere = project.def_used_elsewhere(unit, fdef)
      if elsewhere:
        return elsewhere
      called = [(u, n) for u in project.units for n in u.nodes if isinstance(n, cst.Call) and (
          (isinstance(n.func, cst.Attribute) and n.func.attr.value == fdef.name.value) or (
              isinstance(n.func, cst.Name) and n.func.value == fdef.name.value))]
      where = ', '.join(f'{_unit.at(u, n)} ({short(u.code(n), 40)})' for u, n in called[:3])
      return (f'returned by {fdef.name.value}(), ' + (
          f'called at {where}, where the analysis does not resolve the callee to one function '
          'whose every return is a def (e.g. a method of a value whose class is chosen at run '
          'time)' if called else 'which no call in the given files is seen to make'))
  if isinstance(parent, cst.Arg) and isinstance(unit.parent(parent), cst.Call):
    callee = unit.parent(parent).func
    resolved = project.resolve_callable(unit, callee)
    into = 'a parameter'
    if resolved is not None and isinstance(resolved[1], cst.ClassDef):
      # Optimizer objects are followed through fields; a def stored in one and created
      # from the field later is not.
      field = f'{resolved[1].name.value}.{parent.keyword.value}' if parent.keyword else (
          f'a field of {resolved[1].name.value}')
      into = f'a class field ({field}), to be created from it later'
    return (f'passed to {short(unit.code(callee), 40)}(...) at '
            f'{_unit.at(unit, call)}: the analysis does not follow a def into {into}')
  if isinstance(parent, cst.Element):   # ``named_parameters(('adam', optim.Adam(lr)), ...)``
    container = unit.parent(parent)
    outer = unit.parent(container)
    while isinstance(outer, cst.Element):
      container = unit.parent(outer)
      outer = unit.parent(container)
    if isinstance(outer, cst.Arg) and isinstance(unit.parent(outer), cst.Call):
      given = unit.parent(outer)
      kind = 'a list' if isinstance(container, cst.List) else (
          'a tuple' if isinstance(container, cst.Tuple) else 'a container')
      decorated = unit.parent(given)
      into = (f'which decorates {unit.parent(decorated).name.value}(): each of its tuples '
              'becomes that function\'s arguments, parameters the analysis does not follow a '
              'def into') if isinstance(decorated, cst.Decorator) else (
                  'the analysis does not follow a def into a container passed to a call')
      return (f'put in {kind} in the arguments of {short(unit.code(given.func), 40)}(...) at '
              f'{_unit.at(unit, given)}, {into}')
  return None


# ---------------------------------------------- legacy uses on values from out of sight

# What only a legacy optimizer is used for (a def: ``create``), read on a value from out of
# sight: ``x.state`` counts only as ``x.state.step`` / ``x.state.param_states``.
_MEMBERS = ('apply_gradient', 'target', 'optimizer_def', 'state', 'create')
_CALLED = ('apply_gradient', 'create')


def out_of_sight_uses(project: _project.Project, refused, records, files) -> List[Record]:
  """A refusal (FOM107) at each legacy use that no record covers, on a value the analysis does
  not tie to an object it follows; ``refused``: the sites of each refused object; ``files``:
  the plans (``FilePlan``) that get a marker above each use that names what it may be.

  * ``x.apply_gradient(...)`` where ``x`` traces back, as an object (an assignment, the
    arguments a parameter's calls bind, a field of ``self``), to ``d.create(...)`` of a def
    ``d`` that a library's function returned (revisiting_rainbow: dopamine's
    ``create_optimizer('adam')``); what the project's own code makes is not such an object;
    or on a name bound nowhere (multimodal-rl's typo).
  * ``x.apply_gradient(...)``, ``x.target``, ``x.state.step``, ``x.create(...)`` where ``x``
    comes from out of sight (``_origin``: a parameter no call in the project supplies, ladax's
    jitted step driven from a notebook; one its decorator fills, absl's
    ``parameterized.named_parameters``; unpacked from one, algorithmic-efficiency's
    ``optimizer, p_train_step = optimizer_state``), in a file that names flax.optim: which
    optimizer it is, is decided out of sight. A use other than ``apply_gradient`` counts where
    the same name is also applied in its function, or where the file holds a refused object
    or def it may be; the record names that one (as a refused object's other uses name its
    first refused site in their file), and its statement gets a marker, as theirs do.

  * ``x.k.apply_gradient(...)``, ``x.k.target``, ``x.k.state.step`` where a refused object
    escaped as ``k=`` into a call the analysis does not resolve (ref_nerf_jax:
    ``state = utils.TrainState(optimizer=optimizer)``, no such class in the given files, then
    ``state.optimizer.target`` in ``main`` and in the step it hands ``state`` to): the field
    ``k`` of what that call made holds it, so each such use is refused with it, naming it
    (before, they had no record and no marker).

  Nothing where the project defines ``apply_gradient`` itself (its own protocol). The call
  stays legacy, so it is refused, never "nothing to change"."""
  covered = {(r.path, r.line) for r in records}
  found, own, library, pending = [], None, set(), []
  escaped = _escaped_fields(refused)
  for unit in project.units:
    for node in unit.nodes:
      use = _legacy_use(unit, node)
      if use is None:
        continue
      first = unit.line(use)
      if any((unit.path, line) in covered
             for line in range(first, first + unit.code(use).count('\n') + 1)):
        continue
      shown = short(unit.code(use), 40) if not isinstance(use, cst.Call) else (
          f'{short(unit.code(node.value), 40)}.{node.attr.value}(...)')
      apply = node.attr.value == 'apply_gradient'
      made = _library_made(project, unit, node.value, set()) if apply else None
      own = _defines_apply_gradient(project) if own is None else own
      message = None
      if made is not None:
        library.add(made)
        message = _library_use(shown, made, 'call')
      elif apply and not own and _unbound(unit, node.value):   # multimodal-rl's typo
        message = (f'{shown}: the legacy Optimizer API on {node.value.value}, a name bound '
                   f'nowhere in {os.path.basename(unit.path)} (a NameError on flax 0.5.3 too), '
                   'so migrate cannot tell which optimizer it is; the call is left as it is')
      elif not own and isinstance(node.value, cst.Attribute) and (
          node.value.attr.value in escaped):
        words, blocker = escaped[node.value.attr.value]
        message = (f'{shown}: the legacy Optimizer API on {short(unit.code(node.value), 40)}, '
                   f'the field {node.value.attr.value} that {words}: it is that optimizer, '
                   'so the use is left as it is')
        _mark_unrewritten(files[unit.path], use, f'a field that holds a refused {blocker}')
      elif not own:
        message, blocker = _out_of_sight(project, unit, node, shown, refused, records)
        if blocker is not None:   # no line numbers: the markers move the lines
          _mark_unrewritten(files[unit.path], use,
                            f'a value from out of sight that may be a refused {blocker[1]}')
      if message is not None:
        found.append(Record(unit.path, first, _refusals.ESCAPE.code, 'refused', '', message))
        covered.add((unit.path, first))
      elif not apply:
        pending.append((unit, node, first, shown))
  # ``x.target`` where ``x`` is such an object, one whose update is refused above (rcpm's
  # ``self.optimizer.target`` beside ``optimizer.apply_gradient(grads)``): a library's other
  # objects with a ``create`` are not named by an update.
  for unit, node, first, shown in pending if library else ():
    made = _library_made(project, unit, node.value, set())
    if made in library and (unit.path, first) not in covered:
      found.append(Record(unit.path, first, _refusals.ESCAPE.code, 'refused', '',
                          _library_use(shown, made, 'use')))
      covered.add((unit.path, first))
  return found


def _mark_unrewritten(file_plan, use, what: str):
  """The FOM107 marker above a use left legacy for the refused object it may be (once per
  statement)."""
  code = _refusals.ESCAPE.code
  file_plan.mark(use, f'{_refusals.MARKER} {code} not rewritten: {what}',
                 unless=f'{_refusals.MARKER} {code} ')


def _escaped_fields(refused):
  """``{k: (words, marker words)}`` for each keyword ``k=`` by which a refused object escaped
  into a call the analysis does not resolve (the first such object per keyword)."""
  found = {}
  for sites in refused:
    for site in sites:
      arg = site.unit.parent(site.node)
      if site.kind == 'escape' and isinstance(arg, cst.Arg) and arg.keyword is not None and (
          arg.value is site.node and isinstance(site.unit.parent(arg), cst.Call)):
        call = site.unit.parent(arg)
        found.setdefault(arg.keyword.value, (
            f'holds what {short(site.unit.code(call.func), 40)}(...) at '
            f'{_unit.at(site.unit, call)} made of the optimizer passed as '
            f'{arg.keyword.value}=, refused ({site.refusal.code} there)',
            f'optimizer ({site.refusal.code} in {os.path.basename(site.unit.path)})'))
  return found


def _library_use(shown, made, what):
  return (f'{shown}: the legacy Optimizer API on an object created from {made}, a def a library '
          f'returned, which migrate cannot rewrite; the {what} is left as it is')


def _legacy_use(unit, node) -> Optional[cst.CSTNode]:
  """The use (the call, or the attribute) where ``node`` is ``x.<member>`` of ``_MEMBERS`` on
  a value ``x``: a call of ``apply_gradient`` / ``create``, ``x.state.step``; else None."""
  if not (isinstance(node, cst.Attribute) and node.attr.value in _MEMBERS):
    return None
  parent = unit.parent(node)
  if node.attr.value in _CALLED:
    return parent if isinstance(parent, cst.Call) and parent.func is node else None
  if node.attr.value == 'state':
    return parent if isinstance(parent, cst.Attribute) and parent.value is node and (
        parent.attr.value in ('step', 'param_states')) else None
  return node


def _out_of_sight(project, unit, node, shown, refused, records):
  """``(message, blocker)`` for the use ``node`` (``x.<member>``) where ``x`` comes from out
  of sight (``_origin``), ``blocker`` what refused it may be (``_blocker``); else ``(None,
  None)``."""
  origin = _origin(project, unit, node.value)
  if origin is None:
    return None, None
  fdef = unit.enclosing(node, (cst.FunctionDef,))
  blocker = _blocker(unit, fdef, refused, records)
  if node.attr.value != 'apply_gradient' and blocker is None and not _applied(unit, node.value):
    return None, None
  api = 'flax.optim API (a def\'s create)' if node.attr.value == 'create' else 'Optimizer API'
  message = (f'{shown}: the legacy {api} on {node.value.value}, {origin}: migrate cannot tell '
             'which optimizer it is, so the use is left as it is')
  if blocker is not None:
    return f'{message}, with {blocker[0]}, which it may be', blocker
  return (f'{message}. Migrate it with the code that calls it, or by hand (.target -> .params, '
          '.apply_gradient(g) -> .apply_gradients(grads=g)) where the callers pass the '
          'TrainState a rewritten create makes'), None


def _applied(unit, name: cst.Name) -> bool:
  """Whether the function that reads ``name`` also calls ``name.apply_gradient(...)``."""
  scope = unit.scopes.get(name)
  return scope is not None and any(
      isinstance(unit.parent(read.node), cst.Attribute)
      and unit.parent(read.node).attr.value == 'apply_gradient'
      for read in scope.accesses[name.value])


def _blocker(unit, fdef, refused, records):
  """``(words, marker words)``: what refused the value a use from out of sight may be: the
  flax.optim defs the function's decorator gives it (absl's ``parameterized.named_parameters``),
  else the file's first refused object (its create, and its first refused site in the file).
  None if neither."""
  codes = {r.line: r.code for r in records if r.path == unit.path and r.status == 'refused'}
  defs = [unit.line(n) for d in (fdef.decorators if fdef is not None else ())
          for n in _unit.walk(d) if isinstance(n, cst.Call) and unit.legacy(n.func) in DEFS]
  if defs and defs[0] in codes:
    lines = ', '.join(str(line) for line in defs)
    return (f'the flax.optim defs its decorator gives it (lines {lines}), refused '
            f'({codes[defs[0]]} at {os.path.basename(unit.path)}:{defs[0]})',
            f'def ({codes[defs[0]]} in {os.path.basename(unit.path)})')
  for sites in refused:
    here = [s for s in sites if s.unit is unit]
    if not here:
      continue
    create = next((s for s in here + sites if s.kind == 'create'), None)
    made = (f'created at {_unit.at(create.unit, create.node)}' if create is not None
            else f'used at {_unit.at(unit, here[0].node)}')
    cause = next((s for s in here + sites if s.refusal is not None))
    return (f'the optimizer {made}, refused ({cause.refusal.code} at '
            f'{_unit.at(cause.unit, cause.node)})',
            f'optimizer ({cause.refusal.code} in {os.path.basename(cause.unit.path)})')
  return None


def _origin(project, unit, node, seen=None, result_of=None) -> Optional[str]:
  """Where the value of the name ``node`` comes from, in words, where that is out of sight: a
  parameter (``_unsupplied``), or a name unpacked from such a value; every other binding of
  the name in its function updates it (``name = name.apply_gradient(...)`` or
  ``.create(...)``), is the result of a call of a function from out of sight (``optimizer =
  p_train_step(optimizer, x)``), or, in a caller (``result_of``), the call that hands it on
  (``optimizer, metrics = step(optimizer, ...)``). Else None."""
  seen = {} if seen is None else seen   # id(name) -> its origin (None while looked for)
  if not isinstance(node, cst.Name) or unit.scopes.get(node) is None:
    return None
  if id(node) not in seen:
    seen[id(node)] = None
    seen[id(node)] = _bindings_origin(project, unit, node, seen, result_of)
  return seen[id(node)]


def _bindings_origin(project, unit, node, seen, result_of) -> Optional[str]:
  """``_origin`` of the name ``node``, from its bindings."""
  params, origins = [], []
  for binding in unit.scopes[node][node.value]:
    target = getattr(binding, 'node', None)
    if isinstance(target, cst.Param):
      params.append(target)
      continue
    assign = unit.enclosing(target, (cst.Assign,)) if isinstance(target, cst.CSTNode) else None
    value = assign.value if assign is not None else None
    if value is None:
      return None
    if value is result_of or (
        isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)
        and value.func.attr.value in _CALLED and isinstance(value.func.value, cst.Name)
        and value.func.value.value == node.value):
      continue
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and (
        _unit.parameter(unit, value.func) is None) and _origin(
            project, unit, value.func, seen) is not None:
      continue   # a step unpacked from out of sight, called on it
    unpacked = isinstance(value, cst.Name) and isinstance(
        _unit.sole_target(assign), (cst.Tuple, cst.List))
    source = _origin(project, unit, value, seen) if unpacked else None
    if source is None:
      return None
    origins.append(f'unpacked at {_unit.at(unit, assign)} from {value.value}, {source}')
  if len(params) > 1:
    return None
  if params:
    origins.insert(0, _unsupplied(project, unit, params[0], seen))
  return origins[0] if origins and None not in origins else None


def _unsupplied(project, unit, param: cst.Param, seen) -> Optional[str]:
  """``param`` of a function, in words, where no call in the project supplies it, in a file
  that names flax.optim or uses jax or flax (a step beside the model, imported by a script
  whose call the analysis does not resolve to it: its optimizer is refused there, and its
  uses here are that optimizer's): the function has no caller (its callers are out of
  sight), or every call passes it a value from out of sight in turn (ladax's
  ``train_epoch(optimizer, ...)`` handing it to ``multi_sample_train_step``), or a decorator
  calls it, or it is a method that a call reaches only by its name (flax_bert's
  ``state.take_step(optimizer, grad)``, ``state`` a parameter: the analysis does not decide
  the receiver's class, so it does not follow what the call passes). Else None."""
  fdef = unit.enclosing(param, (cst.FunctionDef, cst.Lambda))
  if not isinstance(fdef, cst.FunctionDef) or not (unit.names_flax_optim or
                                                     unit.uses_jax_or_flax):
    return None
  name = f'a parameter of {fdef.name.value}()'
  callers = project.callers_of(unit, fdef)
  decorator = fdef.decorators[0].decorator if fdef.decorators else None
  method = isinstance(unit.enclosing(unit.parent(fdef), (cst.ClassDef, cst.FunctionDef)),
                      cst.ClassDef)
  # A compiled method keeps the decorator's record (its calls are not followed: qbdiv's
  # ``@functools.partial(jax.jit, ...)`` method); a compiled function is passed on as a value.
  compiled = decorator is not None and not method and _program.compiling(unit, decorator)
  if callers is None and decorator is not None and not compiled:   # absl's parameterized
    shown = short(unit.code(decorator.func if isinstance(decorator, cst.Call) else decorator), 40)
    return (f'{name}, which its decorator @{shown}' + ('(...)' if isinstance(
        decorator, cst.Call) else '') + f' at {_unit.at(unit, decorator)} calls')
  if compiled and callers is None:   # reprieve's ``@jax.jit def train_step_fn``, returned
    name = f'{name}, compiled by @{short(unit.code(decorator), 40)} at {_unit.at(unit, decorator)}'
  if callers is None and method:
    return None   # a method whose name others share: its calls may be in sight
  if callers is None:   # ``jax.jit(functools.partial(train_step, ...))``
    value = next((n for n in unit.nodes if isinstance(n, cst.Name) and n is not fdef.name
                  and n.value == fdef.name.value and unit.parent(n) is not fdef
                  and _reads_def(unit, n, fdef)), None)
    where = f' at {_unit.at(unit, value)}' if value is not None else ''
    return (f'{name}, which is passed on as a value{where} (the calls that supply it are not '
            'in sight)')
  unfollowed = []
  for cunit, call, args, shift in callers:
    if method and (project.resolve_callable(cunit, call.func) or (None, None))[1] is not fdef:
      unfollowed.append(_unit.at(cunit, call))
      continue
    arg = _flows.bound_argument(unit, fdef, args, shift, param)
    if not isinstance(arg, cst.Name) or _origin(project, cunit, arg, seen, call) is None:
      return None
  if unfollowed:
    return (f'{name}, whose call at {", ".join(unfollowed)} the analysis does not follow into '
            'it (which class\'s method that call runs is not decided)')
  if callers:
    return f'{name}, which every call in the given files passes a value from out of sight'
  return f'{name} that no call in the given files supplies'


def _reads_def(unit, name: cst.Name, fdef: cst.FunctionDef) -> bool:
  """Whether the name ``name`` may read the function ``fdef`` (a binding of it in its scope is
  that def), not another function of the same name."""
  scope = unit.scopes.get(name)
  return scope is not None and any(getattr(a, 'node', None) is fdef
                                   for a in scope[name.value])


def _unbound(unit, node) -> bool:
  """Whether ``node`` is a name that nothing binds (no assignment, import or builtin), in a
  file that names flax.optim."""
  scope = unit.scopes.get(node) if isinstance(node, cst.Name) else None
  return scope is not None and not scope[node.value] and unit.names_flax_optim and not hasattr(
      builtins, node.value)


def _defines_apply_gradient(project) -> bool:
  """Whether the project defines a function or method named ``apply_gradient`` (its own
  protocol: a call of that name on an unknown value may be its own)."""
  return any(isinstance(node, cst.FunctionDef) and node.name.value == 'apply_gradient'
             for unit in project.units for node in unit.nodes)


def _library_made(project, unit, node, seen) -> Optional[str]:
  """``'call at file:line'`` where ``node``'s value is ``d.create(...)`` (or an update of it) of
  a def ``d`` returned by a call the project does not resolve, reached through assignments,
  the arguments a parameter's calls bind and the fields of ``self``; else None."""
  if id(node) in seen:
    return None
  seen.add(id(node))
  values = []
  if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
    if node.func.attr.value in ('apply_gradient', 'replace'):
      values = [(unit, node.func.value)]
    elif node.func.attr.value == 'create':
      made = node.func.value
      made = _unit.assigned_value(unit, made) if isinstance(made, cst.Name) else made
      if isinstance(made, cst.Call) and not unit.legacy(made.func) and (
          project.resolve_callable(unit, made.func) is None):
        return f'{_unit.short(unit.code(made), 40)} at {_unit.at(unit, made)}'
  elif isinstance(node, cst.Name) and unit.scopes.get(node) is not None:
    for binding in unit.scopes[node][node.value]:
      assign = _unit.plain_assignment(unit, binding)
      param = getattr(binding, 'node', None)
      if assign is not None:
        values.append((unit, assign.value))
      elif isinstance(param, cst.Param):   # what the function's calls bind to it
        fdef = unit.enclosing(param, (cst.FunctionDef,))
        for cunit, _, args, shift in (project.callers_of(unit, fdef) or []) if fdef else []:
          arg = _flows.bound_argument(unit, fdef, args, shift, param)
          if isinstance(arg, cst.BaseExpression) and arg is not param.default:
            values.append((cunit, arg))
  elif isinstance(node, cst.Attribute) and project.receiver_class(unit, node.value):
    values = [(u, v) for u, v in project.field_values(project.field_key(
        project.receiver_class(unit, node.value), node.attr.value), node.attr.value)
              if v is not None]
  for u, value in values:
    made = _library_made(project, u, value, seen)
    if made is not None:
      return made
  return None
