"""Project in, rewritten sources and a report out: analysis, plan, rules, imports, checks.

One pass per file applies every rule: the plan is keyed by the nodes of the analysed tree,
and a transformer sees those original nodes only in one walk (a second transformer would see
new nodes). Imports are then added and removed with LibCST's own ``AddImportsVisitor`` /
``RemoveImportsVisitor``. A file whose result does not compile is left as it was.
"""
import collections
import os
from typing import Callable, Dict, Tuple

import libcst as cst
from libcst import codemod
from libcst import metadata as meta
from libcst.codemod import visitors

from . import _edits
from . import _jax_names
from . import _leftovers
from . import _plan
from . import _project
from . import _refusals
from . import _rule
from . import _unit
from . import _unparsed
from ._report import Record, Report


class _Apply(cst.CSTTransformer):
  """Rewrites the plan's nodes with their rules; adds the plan's markers (once)."""

  def __init__(self, plan: _edits.FilePlan, context: _rule.Context):
    super().__init__()
    self.plan = plan
    self.context = context
    # LibCST parses the comment lines above a module's first statement into the module's
    # header, not into that statement's leading lines: a marker an earlier run wrote above
    # the first statement is found there.
    module = plan.unit.module
    self.first = module.body[0] if module.body else None
    self.header = {line.comment.value for line in module.header if line.comment}
    self.placeholders = False   # whether a placeholder holds a removed statement's comments

  def on_leave(self, original_node, updated_node):
    edit = self.plan.edits.get(id(original_node))
    if edit is not None:
      updated_node = edit.rule.rewrite(updated_node, edit.data, self.context)
      if _removed(updated_node) and isinstance(original_node, cst.BaseStatement) and any(
          line.comment for line in original_node.leading_lines):
        # A statement that goes keeps the comment lines above it: a placeholder holds them
        # until ``_DropPlaceholders`` moves them onto the next statement.
        updated_node = cst.SimpleStatementLine(body=[cst.Expr(cst.Name(_PLACEHOLDER))],
                                               leading_lines=original_node.leading_lines)
        self.placeholders = True
    markers = self.plan.markers.get(id(original_node))
    if markers and original_node is self.first:
      markers = [text for text in markers if text not in self.header]
    if markers and isinstance(updated_node, cst.FlattenSentinel):   # a statement split in two
      first, *rest = updated_node.nodes
      return cst.FlattenSentinel([_with_markers(first, markers), *rest])
    if markers:
      updated_node = _with_markers(updated_node, markers)
    return updated_node


def _removed(node) -> bool:
  return isinstance(node, cst.RemovalSentinel) or node is cst.RemoveFromParent()


# The one expression of a placeholder statement (a name no program has).
_PLACEHOLDER = '__flax_optim_compat_removed_statement__'


def _placeholder(statement) -> bool:
  return (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1
          and isinstance(statement.body[0], cst.Expr)
          and isinstance(statement.body[0].value, cst.Name)
          and statement.body[0].value.value == _PLACEHOLDER)


class _CarryComments(cst.CSTTransformer):
  """Moves the comment lines above the statements ``_goes`` picks onto the statement after them
  (or below the block's last one); what stays of such a statement is ``_rest(statement)``
  (None: nothing, and a block left empty keeps a ``pass``)."""

  def on_visit(self, node) -> bool:
    # No block lies inside a simple statement or an expression: those stay the same objects
    # (the import aliases among them are the ones ``_RemoveImports`` found unused).
    return not isinstance(node, (cst.SimpleStatementLine, cst.SimpleStatementSuite,
                                 cst.BaseExpression))

  def _goes(self, statement) -> bool:
    raise NotImplementedError

  def _rest(self, statement):
    raise NotImplementedError

  def _moved(self, body):
    out, carry = [], []
    for statement in body:
      if carry:
        statement = statement.with_changes(leading_lines=(*carry, *statement.leading_lines))
        carry = []
      if self._goes(statement):
        carry = list(statement.leading_lines)
        statement = self._rest(statement)
      if statement is not None:
        out.append(statement)
    return out, carry

  def leave_Module(self, original_node, updated_node):
    body, carry = self._moved(updated_node.body)
    return updated_node.with_changes(body=body, footer=(*carry, *updated_node.footer))

  def leave_IndentedBlock(self, original_node, updated_node):
    body, carry = self._moved(updated_node.body)
    if not body:   # the block held only removed statements
      body = [cst.SimpleStatementLine(body=[cst.Pass()])]
    return updated_node.with_changes(body=body, footer=(*carry, *updated_node.footer))


class _DropPlaceholders(_CarryComments):
  """Removes the placeholder statements ``_Apply`` left for removed statements."""

  def _goes(self, statement) -> bool:
    return _placeholder(statement)

  def _rest(self, statement):
    return None


def _with_markers(node, markers):
  """``node`` with each marker line above it that is not there yet."""
  present = {line.comment.value for line in node.leading_lines if line.comment}
  new = [cst.EmptyLine(comment=cst.Comment(text)) for text in markers if text not in present]
  if new:
    node = node.with_changes(leading_lines=[*node.leading_lines, *new])
  return node


def _bound_names(module: cst.Module):
  return {n.value for n in _unit.walk(module) if isinstance(n, cst.Name)}


# The modules of the legacy API: an import of one goes once the rewrite left it unread.
def _rewrite(plan: _edits.FilePlan, unused_imports=(), star_read=frozenset()) -> str:
  """The file's new source; ``star_read``: the names other files read through its module's
  ``from X import *``, whose imports stay (but flax.optim's)."""
  unit = plan.unit
  if not plan.edits and not plan.markers:
    return unit.source
  names = _bound_names(unit.module)
  has_train_state = any('flax.training.train_state' in unit.names(n)
                        for n in unit.nodes if isinstance(n, cst.Name) and
                        n.value == 'train_state')
  alias = 'train_state' if has_train_state or 'train_state' not in names else 'flax_train_state'
  context = _rule.Context(train_state=alias)
  apply = _Apply(plan, context)
  module = unit.module.visit(apply)
  if apply.placeholders:
    module = module.visit(_DropPlaceholders())
  if not plan.edits:
    return module.code
  ctx = codemod.CodemodContext()
  read = _bound_names(module)   # every name the rewritten code has
  imported = _import_bindings(module)
  for needed in sorted(plan.needs, key=lambda i: (i.module, i.name or '', i.asname or '')):
    asname = needed.asname
    if needed == _edits.TRAIN_STATE and alias != 'train_state':
      asname = alias
    # Only what the new code reads: a create whose def another file builds names no optax here
    # (score_sde's run_lib.py: tx=losses.get_optimizer(...)), so no ``import optax`` is added.
    bound = asname or needed.name or needed.module.split('.')[0]
    if bound in read and (bound, needed.module + ('.' + needed.name if needed.name else '')
                          ) not in imported:
      visitors.AddImportsVisitor.add_needed_import(ctx, needed.module, needed.name, asname)
  module = _after_the_set_up(module, _AddImports(ctx).transform_module(module))
  for base, name, asname in unused_imports:   # removed jax names whose calls were rewritten
    visitors.RemoveImportsVisitor.remove_unused_import(ctx, base, name, asname)
  # The legacy imports, and every import the original code read: an import the rewrite left
  # unused goes (one the code never read, perhaps imported for its side effects, stays).
  for node in unit.nodes:
    if isinstance(node, cst.ImportFrom) and not isinstance(node.names, cst.ImportStar) and (
        not node.relative):
      base = _unit.dotted(node.module) if node.module else ''
      for a in node.names:
        legacy = unit.legacy(a.name) or base.startswith(_unit.LEGACY_MODULES) or (
            base == 'flax' and a.name.value == 'optim')
        if legacy or (_read(unit, a) and _unit.dotted(a.asname.name if a.asname else a.name)
                      not in star_read):
          asname = a.asname.name.value if a.asname else None
          visitors.RemoveImportsVisitor.remove_unused_import(ctx, base, a.name.value, asname)
    elif isinstance(node, cst.Import):
      for a in node.names:
        full = _unit.dotted(a.name)
        bound = _unit.dotted(a.asname.name) if a.asname else full.split('.')[0]
        if full.startswith(_unit.LEGACY_MODULES) or (_read(unit, a) and bound not in star_read):
          asname = a.asname.name.value if a.asname else None
          visitors.RemoveImportsVisitor.remove_unused_import(ctx, full, None, asname)
  return _drop_dotted_legacy_imports(_remove_imports(module, ctx)).code



def _import_bindings(module: cst.Module) -> set:
  """``(name, object)`` for each name a module-level import binds: ``from jax import numpy as
  jnp`` binds ``jnp`` to ``jax.numpy``, as ``import jax.numpy as jnp`` does (an import the
  rewrite needs is not added again where the file already binds its name to it)."""
  found = set()
  for statement in module.body:
    for small in statement.body if isinstance(statement, cst.SimpleStatementLine) else ():
      if isinstance(small, cst.Import):
        found |= {(_unit.bound_name(a), _unit.dotted(a.name))
                  for a in small.names}   # ``import a.b``: a, a.b loaded
      elif isinstance(small, cst.ImportFrom) and small.module and not small.relative and (
          not isinstance(small.names, cst.ImportStar)):
        found |= {(_unit.bound_name(a), f'{_unit.dotted(small.module)}.{_unit.dotted(a.name)}')
                  for a in small.names}
  return found


def _drop_dotted_legacy_imports(module: cst.Module) -> cst.Module:
  """``import flax.optim`` left once nothing reads ``flax.optim``: LibCST keeps it, as it binds
  ``flax``, which the code still reads. It goes, or becomes ``import flax`` where no other
  import binds ``flax``."""
  imports = [n for n in _unit.walk(module) if isinstance(n, cst.Import)]
  legacy = [a for n in imports for a in n.names
            if a.asname is None and _unit.dotted(a.name).startswith(_unit.LEGACY_MODULES)]
  if not legacy:
    return module
  imported = {id(a) for n in imports for a in n.names}
  read = any(_unit.dotted(n).startswith(_unit.LEGACY_MODULES) for n in _unit.walk(module)
             if isinstance(n, (cst.Attribute, cst.Name)) and id(n) not in imported and
             not any(n is a.name for a in legacy))
  if read:
    return module
  binds_flax = any(_unit.bound_name(a) == 'flax' for n in imports for a in n.names
                   if a not in legacy)
  return module.visit(_DropAliases({id(a) for a in legacy}, keep_flax=not binds_flax))


class _DropAliases(cst.CSTTransformer):
  """Drops the given ``import`` aliases (``keep_flax``: the first ``flax.*`` one becomes
  ``import flax``), and a statement left with none."""

  def __init__(self, ids, keep_flax):
    super().__init__()
    self._ids, self._keep_flax = ids, keep_flax

  def leave_Import(self, original_node, updated_node):
    names = []
    for old, new in zip(original_node.names, updated_node.names):
      if id(old) not in self._ids:
        names.append(new)
      elif self._keep_flax and _unit.dotted(old.name).startswith('flax.'):
        names.append(new.with_changes(name=cst.Name('flax')))
        self._keep_flax = False
    if not names:
      return cst.RemoveFromParent()
    names[-1] = names[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return updated_node.with_changes(names=names)


def _read(unit, alias: cst.ImportAlias) -> bool:
  """Whether the original code reads the name an import binds."""
  bound = alias.asname.name if alias.asname else alias.name
  while isinstance(bound, cst.Attribute):   # ``import jax.numpy`` binds ``jax``
    bound = bound.value
  if not isinstance(bound, cst.Name):
    return False
  scope = unit.scopes.get(alias)
  if scope is None:
    return False
  if any(isinstance(a, meta.ImportAssignment) and a.node is unit.parent(alias) and a.references
         for a in scope[bound.value]):
    return True
  # ``import flax`` beside ``import flax.optim``: LibCST gives ``flax.optim.X`` to the dotted
  # import, yet it reads ``flax`` too.
  return isinstance(unit.parent(alias), cst.Import) and alias.asname is None and any(
      isinstance(a, meta.ImportAssignment) and a.name.startswith(bound.value + '.')
      and a.references for a in scope.assignments)


def _import_lines(module: cst.Module) -> set:
  """The code of every statement line holding an import (its comment lines above left out)."""
  lines = set()

  class _Collect(cst.CSTVisitor):
    def on_visit(self, node):   # not into an expression, nor into a line's statements
      if isinstance(node, cst.SimpleStatementLine):
        if _may_hold_imports(node):
          lines.add(module.code_for_node(node.with_changes(leading_lines=())))
        return False
      return _may_hold_imports(node)
  module.visit(_Collect())
  return lines


class _CommentsToNext(_CarryComments):
  """Moves the comment lines above the given statement lines onto the statement after them."""

  def __init__(self, module, lines):
    super().__init__()
    self._module, self._lines = module, lines

  def _goes(self, statement) -> bool:
    return (isinstance(statement, cst.SimpleStatementLine) and bool(statement.leading_lines)
            and self._module.code_for_node(statement.with_changes(leading_lines=()))
            in self._lines)

  def _rest(self, statement):
    return statement.with_changes(leading_lines=())


def _may_hold_imports(node: cst.CSTNode) -> bool:
  """False for a node no import can be inside (an expression; a line of simple statements none of
  which is an import): LibCST's import visitors act only on imports and on the module, yet call
  their matchers on every node, about a third of a file's rewrite time; they skip these."""
  if isinstance(node, cst.BaseExpression):
    return False
  if isinstance(node, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
    return any(isinstance(small, (cst.Import, cst.ImportFrom)) for small in node.body)
  return True


class _ImportsOnly:
  """Mixed into a LibCST import visitor: it does not descend where no import can be."""

  def on_visit(self, node):
    return _may_hold_imports(node) and super().on_visit(node)


class _AddImports(_ImportsOnly, visitors.AddImportsVisitor):
  """LibCST's ``AddImportsVisitor``, its walk pruned."""


def _after_the_set_up(before: cst.Module, after: cst.Module) -> cst.Module:
  """``after`` (``before`` with the import lines LibCST added after the file's first block of
  imports) with those lines moved to just after the block of imports that first loads jax,
  where a statement that is not an import comes before that block: the file sets up what jax
  reads as it loads (``os.environ['JAX_ENABLE_X64'] = 'True'`` between ``import os`` and
  ``import jax``), and an ``import optax`` above that would load jax first (float32 where the
  program ran in float64)."""
  body = list(before.body)
  at = _edits.set_up_end(body)
  if at is None:
    return after
  bare = lambda m, s: m.code_for_node(s.with_changes(leading_lines=()))
  old = collections.Counter(bare(before, s) for s in body)
  new = set()   # the places in ``after`` of the statements ``before`` does not have
  for i, code in enumerate(bare(after, s) for s in after.body):
    if old[code]:
      old[code] -= 1
    else:
      new.add(i)
  if len(new) != len(after.body) - len(body) or not all(
      _edits.import_line(after.body[i]) for i in new):
    return after   # LibCST also wrote into a line of the file (``from X import a, b``): as it is
  rest = [s for i, s in enumerate(after.body) if i not in new]   # ``body``'s, in its order
  # each with its own lines above (LibCST put a blank one above the line after its imports)
  rest = [s.with_changes(leading_lines=b.leading_lines) for s, b in zip(rest, body)]
  return after.with_changes(body=rest[:at] + [after.body[i] for i in sorted(new)] + rest[at:])


class _GatherUnused(_ImportsOnly, visitors.GatherUnusedImportsVisitor):
  """LibCST's ``GatherUnusedImportsVisitor``, its walk pruned (the uses it checks come from the
  scope analysis and its own visitors of the whole module, not this walk)."""


class _RemoveImports(_ImportsOnly, visitors.RemoveImportsVisitor):
  """LibCST's ``RemoveImportsVisitor`` that keeps the module it ran on and the import aliases it
  found unused; given those (``unused``), it reuses them instead of analysing the module again
  (run then with ``module.visit``, on a tree whose import aliases are that module's own)."""

  def __init__(self, ctx, unused=None):
    super().__init__(ctx)
    self.module_seen = None
    self._given = unused

  def visit_Module(self, node):
    self.module_seen = node
    if self._given is None:   # RemoveImportsVisitor.visit_Module, its walk pruned
      gather = _GatherUnused(self.context)
      node.visit(gather)
      self._unused_imports = dict(gather.unused_imports)
    else:
      self._unused_imports = self._given


def _remove_imports(module: cst.Module, ctx) -> cst.Module:
  """LibCST's ``RemoveImportsVisitor``, keeping the comment lines above an import line it
  removes (it drops a statement's leading lines with it): they move onto the next statement.

  The imports are analysed once: which are unused does not depend on comment lines, so the
  second removal, after the comments moved, reuses the first one's findings."""
  first = _RemoveImports(ctx)
  removed_once = first.transform_module(module)
  removed = _import_lines(module) - _import_lines(removed_once)
  if not removed:
    return removed_once
  analysed = first.module_seen   # the copy the first removal analysed (the same code)
  moved = analysed.visit(_CommentsToNext(analysed, removed))
  return moved.visit(_RemoveImports(ctx, unused=first._unused_imports))


def migrate_sources(sources: Dict[str, str], plain_optax: bool = False, unreadable=(),
                    step: Callable[[str], None] = lambda label: None
                    ) -> Tuple[Dict[str, str], Report]:
  """``(new source per changed path, report)`` for a project given as ``{path: source}``;
  ``unreadable``: its files the interpreter cannot read (``_command.read``), reported as files
  that do not parse (no file can import them, so they reach nothing); ``step(label)`` is
  called as each stage starts (the command line's step line)."""
  step(f'analysing {len(sources)} file(s)')
  project = _project.Project(sources)
  plan = _plan.make_plan(project, plain_optax=plain_optax)
  failed = [_unparsed_record(bad) for bad in list(unreadable) + project.unparsed]
  changed: Dict[str, str] = {}
  records = sorted(plan.records + _leftovers.out_of_sight_uses(project, plan.refused,
                                                                plan.records, plan.files),
                   key=lambda r: (r.path, r.line))   # a file's records in line order
  for done, (path, file_plan) in enumerate(plan.files.items()):
    step(f'rewriting {os.path.basename(path)} ({done + 1} of {len(plan.files)})')
    jax_names = _jax_names.plan_file(file_plan.unit, file_plan)
    try:
      new = _rewrite(file_plan, jax_names.unused_imports,
                     project.star_read.get(file_plan.unit.module_name, frozenset()))
      if new != sources[path]:   # the file as given compiled in ``_program.Program``
        _unparsed.compile_quietly(new, path)
    except (SyntaxError, ValueError, cst.ParserSyntaxError, codemod.SkipFile) as e:
      failed.append(Record(path, getattr(e, 'lineno', 0) or 0, _refusals.FAILED.code,
                           'refused', '', f'{_refusals.FAILED.reason}: {type(e).__name__}: {e}'))
      continue   # left as it was: no record of a removed jax name says it was rewritten
    records += jax_names.records
    if new != sources[path]:
      changed[path] = new
  report = Report(records, plan.conversions, sorted(changed), failed)
  return changed, report


def _unparsed_record(bad) -> Record:
  """A file that does not parse: ``skipped`` where it can use no flax.optim object (it names
  none, and imports no file of the project that holds one), else ``refused``."""
  reason = (_refusals.NOT_COMPILED if bad.parsed else _refusals.NOT_PARSED).reason
  message = f'{reason}: {bad.path}:{bad.line}: {bad.error}'
  if bad.names_legacy is not None:
    message += (f'; it names flax.optim (line {bad.names_legacy}), so its own uses stay legacy')
  if bad.reached:
    message += (f'; it imports the files that hold the optimizers at {", ".join(bad.reached)}, '
                f'which are refused ({_refusals.UNPARSED.code})')
  status = 'refused' if bad.names_legacy is not None or bad.reached else 'skipped'
  if status == 'skipped':
    message += ('; it names no flax.optim and imports no file that holds an optimizer, so '
                'nothing in it is left legacy')
  return Record(bad.path, bad.line, _refusals.NOT_PARSED.code, status, '', message)


def migrate_source(source: str, path: str = 'script.py', plain_optax: bool = False
                   ) -> Tuple[str, Report]:
  """One file on its own: ``(new source, report)``."""
  changed, report = migrate_sources({path: source}, plain_optax=plain_optax)
  return changed.get(path, source), report
