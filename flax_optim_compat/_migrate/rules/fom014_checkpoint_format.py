"""FOM014: a migrated file that saves or restores flax checkpoints keeps their format.

Importing ``flax.optim`` (this package) sets flax's ``flax_use_orbax_checkpointing`` to False,
as flax did until 0.6.7: ``checkpoints.save_checkpoint('ckpt', ...)`` writes one msgpack file
and takes a relative folder. Once the program no longer imports it, flax's default applies
(orbax: a directory per step, and ``ValueError: Checkpoint path should be absolute`` for
``'ckpt'``). So a file that calls ``save_checkpoint`` / ``restore_checkpoint``, in a project
where a use of flax.optim is rewritten (any file, any rule: ``Rule.after_the_project``), gets
``flax.config.update('flax_use_orbax_checkpointing', False)`` after its imports (once; after its
module-level ``import flax`` where code comes before that import, as in a notebook's export),
and the report names each call it keeps. Where part of the program still imports flax.optim, the line
sets what that import sets.
"""
import libcst as cst

from .. import _edits
from .. import _rule
from .. import _unit
from .._report import Record

FLAG = 'flax_use_orbax_checkpointing'
STATEMENT = f"flax.config.update('{FLAG}', False)"
_CALLS = frozenset(f'flax.training.checkpoints.{name}' for name in (
    'save_checkpoint', 'save_checkpoint_multiprocess', 'restore_checkpoint'))


class CheckpointFormat(_rule.Rule):
  code = 'FOM014'
  after_the_project = True
  title = ('checkpoints.save_checkpoint / restore_checkpoint in a project migrated off flax.optim '
           "-> flax.config.update('flax_use_orbax_checkpointing', False) after its imports "
           '(msgpack, relative paths, as with flax.optim imported)')

  def plan_name(self, unit, node, plan, records):
    if not (isinstance(node, cst.Call) and unit.names(node.func) & _CALLS):
      return False
    if _sets_the_flag(unit):
      return False
    plan.edits[id(unit.module)] = _rule.Edit(self)
    plan.needs.add(_edits.Import('flax'))
    name = unit.code(node.func)
    records.append(Record(unit.path, unit.line(node), self.code, 'rewritten', 'bit-exact',
                          f'{name}(...) keeps the msgpack format and relative paths of legacy '
                          f'(flax.optim set the flag): {STATEMENT} added after the imports'))
    return False   # its arguments are looked at as any code

  def rewrite(self, updated, data, context):
    body = list(updated.body)
    index = 0
    for i, statement in enumerate(body):
      if isinstance(statement, cst.SimpleStatementLine) and all(
          isinstance(s, (cst.Import, cst.ImportFrom)) or (
              isinstance(s, cst.Expr) and isinstance(s.value, cst.SimpleString) and i == 0)
          for s in statement.body):
        index = i + 1
      else:
        break
    # A module whose first import of flax comes after other statements (a notebook export
    # whose first cell runs code): the line goes after that import, where ``flax`` is bound.
    binding = next((i for i, statement in enumerate(body) if _binds_flax(statement)), None)
    if binding is not None and binding >= index:
      index = binding + 1
    line = cst.parse_statement(f'{STATEMENT}\n').with_changes(leading_lines=[
        cst.EmptyLine(comment=cst.Comment(
            '# Checkpoints as the legacy program wrote them (flax.optim imported): msgpack, '
            'relative paths.'))])
    return updated.with_changes(body=[*body[:index], line, *body[index:]])


def _binds_flax(statement) -> bool:
  """Whether a module-level statement binds ``flax`` (``import flax``, ``import flax.training``,
  at its level or in its blocks, outside functions and classes)."""
  found = []

  class _Imports(cst.CSTVisitor):
    def visit_FunctionDef(self, node):
      return False

    def visit_ClassDef(self, node):
      return False

    def visit_Import(self, node):
      found.extend(_unit.bound_name(a) == 'flax' for a in node.names)

    def visit_ImportFrom(self, node):
      if not isinstance(node.names, cst.ImportStar):
        found.extend(_unit.bound_name(a) == 'flax' for a in node.names)

  statement.visit(_Imports())
  return any(found)


def _sets_the_flag(unit) -> bool:
  return any(isinstance(n, cst.SimpleString) and FLAG in n.value for n in unit.nodes)


RULE = CheckpointFormat()
