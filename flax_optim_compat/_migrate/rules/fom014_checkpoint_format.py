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

The format is kept, not the tree: a migrated optimizer is written as its TrainState
(``{'step', 'params', 'opt_state'}``), not as legacy's ``{'target', 'state': {'step',
'param_states'}}``. A raw restore (``restore_checkpoint(d, target=None)``, as
ai-weather-climate's ``get_params``) read by legacy's keys (``['optimizer']['target']``,
``['state']['step']``, ``['state']['param_states']``) would fail on what the migrated program
writes (``KeyError: 'target'``). Where the key before is a field the project's classes
annotate as a legacy ``Optimizer`` (``optimizer: flax.optim.Optimizer``, now a TrainState, so
what the migrated program writes under it is the TrainState's dict), the read is rewritten:
``['optimizer']['target']`` -> ``['optimizer']['params']``, ``['optimizer']['state']['step']``
-> ``['optimizer']['step']`` (the same arrays; a file the legacy program wrote reads so after the
report's convert command). Anywhere else, and for ``['state']['param_states']`` (optax keeps its
own layout), the read is flagged and marked with the key that holds the same values now: a key
of the file names a field the program chose, maybe another object's (a target network's
``'target'``).
"""
import libcst as cst

from .. import _edits
from .. import _refusals
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
    if _RESTORE in unit.names(node.func) and _raw(node):
      _plan_legacy_key_reads(unit, node, plan, records, self.code)
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
    if data == 'params':   # ``x['target']`` -> ``x['params']``, the key's own quotes
      index = updated.slice[0].slice.value
      return updated.deep_replace(index, cst.SimpleString(f'{index.quote}params{index.quote}'))
    if data == 'step':     # ``x['state']['step']`` -> ``x['step']``
      return updated.with_changes(value=updated.value.value)
    body = list(updated.body)
    # After the first imports; in a module that sets up what jax reads before its first import
    # of jax (``os.environ['JAX_ENABLE_X64'] = 'True'``), after that import's block, where the
    # imports the rewrite adds go (``_engine``): ``flax`` is bound there, jax loaded as before.
    index = max(_edits.first_lines_end(body), _edits.set_up_end(body) or 0)
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


_RESTORE = 'flax.training.checkpoints.restore_checkpoint'


def _raw(call: cst.Call) -> bool:
  """Whether ``call`` restores without a target (a tree of dicts, keyed as the file is)."""
  target = _unit.call_arg(call, 1, 'target')
  return target is None or (isinstance(target, cst.Name) and target.value == 'None')


def _key(subscript: cst.Subscript):
  if len(subscript.slice) != 1 or not isinstance(subscript.slice[0].slice, cst.Index):
    return None
  index = subscript.slice[0].slice.value
  return index.evaluated_value if isinstance(index, cst.SimpleString) else None


def _plan_legacy_key_reads(unit, call, plan, records, code):
  """Rewrites (under a field annotated as an Optimizer) or flags each read of the raw restore
  ``call``'s result by legacy's Optimizer keys: the call read where it is, or the variable it
  is bound to, subscripted by string keys."""
  parent = unit.parent(call)
  roots = [call] if isinstance(parent, cst.Subscript) else []
  variable = _unit.sole_target(parent, call)
  if isinstance(variable, cst.Name):
    roots += _unit.accesses(unit, variable) or []
  for root in roots:
    keys, node = [], root
    while isinstance(unit.parent(node), cst.Subscript) and unit.parent(node).value is node:
      node = unit.parent(node)
      keys.append((_key(node), node))
    for i, (key, subscript) in enumerate(keys):
      after = keys[i + 1][0] if i + 1 < len(keys) else None
      before = keys[i - 1][0] if i else None
      if before in plan.optimizer_fields and (key == 'target' or (
          key == 'state' and after == 'step')):
        edited = subscript if key == 'target' else keys[i + 1][1]
        plan.edits[id(edited)] = _rule.Edit(RULE, 'params' if key == 'target' else 'step')
        now = "['params']" if key == 'target' else "['step']"
        records.append(Record(
            unit.path, unit.line(subscript), code, 'rewritten', 'bit-exact',
            f"{_unit.short(unit.code(keys[-1][1]))}: a raw checkpoint read by legacy's Optimizer "
            f"key {key!r} under {before!r}, a field the project annotates as an Optimizer (now a "
            f'TrainState): {now}, which holds the same arrays in what the migrated program '
            "writes (a file the legacy program wrote: after the report's convert command)"))
        break
      if key == 'target':
        now = "['params']"
      elif key == 'state' and after == 'step':
        now = "['step'] in place of ['state']['step']"
      elif key == 'state' and after == 'param_states':
        now = ("['opt_state'] in place of ['state']['param_states'], in optax's own layout "
               "(flax-optim-compat inspect shows it)")
      else:
        continue
      text = (f"a raw checkpoint read by legacy's Optimizer key {key!r}: the migrated "
              "program writes an optimizer as its TrainState ({'step', 'params', 'opt_state'}), "
              f"so where this is the optimizer read {now} (a file the legacy program wrote: "
              "after the report's convert command)")
      plan.mark(subscript, f'{_refusals.MARKER} {code} {text}')
      records.append(Record(unit.path, unit.line(subscript), code, 'flagged', 'not exact',
                            f'{_unit.short(unit.code(keys[-1][1]))}: {text}'))
      break


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
