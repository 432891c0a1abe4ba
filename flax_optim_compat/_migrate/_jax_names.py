"""Removed jax names rewritten to today's spelling: the rules FOM201-FOM206 and FOM299.

Which names, and what replaces each, is the package's one table (``_legacy_jax.NAMES``), the
same the runtime layer gives back. A name is found by what it refers to (LibCST's fully
qualified names: ``jx.tree_map`` after ``import jax as jx``, ``tree_map`` after ``from jax
import tree_map``), never by its text. Every rewrite gives the same object or the same
computation (bit-exact):

* a use ``jax.tree_map`` becomes ``jax.tree_util.tree_map`` on the program's own base
  (``jx.tree_util.tree_map``); ``jnp.DeviceArray`` becomes ``jax.Array`` (``import jax`` added);
  a name the table marks ``annotation_only`` (``jax.random.KeyArray``) only in annotations;
* an import of a removed name imports the replacement under the same local name
  (``from jax import tree_multimap`` -> ``from jax.tree_util import tree_map as tree_multimap``),
  an import of a moved module the new module;
* calls: ``jax.ops.index_update(x, jax.ops.index[i], y)`` -> ``x.at[i].set(y)`` (add, mul, min,
  max alike), ``jax.lax.tie_in(x, y)`` -> ``y``, ``jnp.clip(x, a_min=lo, a_max=hi)`` ->
  ``jnp.clip(x, min=lo, max=hi)``, a statement ``jax.config.enable_omnistaging()`` dropped;
  their imports go once nothing uses them;
* ``jax.api.X`` (the old module of jax's public functions) becomes ``jax.X`` on the program's
  base, then X's own rename; an import of names today's jax lacks that the file never reads goes.

A use no rule can rewrite (``jax.ops.index_update`` passed as a value, a call with ``*args``, a
name the table gives back as a function of ours, such as ``jax.random.shuffle``) is left as it
is and marked FOM299: the file then still needs the runtime layer.
"""
import dataclasses
import re
from typing import Dict, List, Optional, Tuple

import libcst as cst
import libcst.helpers

from .. import _legacy_jax
from . import _edits
from . import _unit
from ._jax_table import (BY_NAME, CONFIG_MODULES, MODULE_ALIASES, REMOVED_MODULES, TableName,
                         aliased, jax_version, missing_today, module_entry, todays_spelling)
from ._refusals import MARKER, MISSING_REASON, NN_ANNOTATION, UNREWRITTEN, UNREWRITTEN_REASON
from ._report import Record
from ._rule import Rule
from ._unit import SourceFile, call_arg, plainly_imported


_ATOMS = (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.BaseNumber, cst.BaseString)


def _code(node: cst.CSTNode) -> str:
  return cst.Module([]).code_for_node(node)


def _atom(text: str, node: cst.CSTNode) -> str:
  """``text`` in parentheses unless ``node`` binds tighter than any operator around it."""
  return text if isinstance(node, _ATOMS) else f'({text})'


def _split(name: str) -> Tuple[str, str]:
  parent, _, last = name.rpartition('.')
  return parent, last


@dataclasses.dataclass(frozen=True)
class Renamed:
  """A use of a renamed name: ``suffix`` appended to the program's own base, or ``full``."""
  suffix: Optional[str] = None
  full: Optional[str] = None

  def apply(self, updated: cst.CSTNode) -> cst.CSTNode:
    if self.full is not None:
      return cst.parse_expression(self.full)
    return cst.parse_expression(_code(updated.value) + self.suffix)


@dataclasses.dataclass(frozen=True)
class ImportLines:
  """An import statement line, replaced by the lines that import the replacements."""
  lines: Tuple[str, ...]

  def apply(self, updated: cst.SimpleStatementLine):
    new = [cst.parse_statement(line + '\n') for line in self.lines]
    new[0] = new[0].with_changes(leading_lines=updated.leading_lines)
    new[-1] = new[-1].with_changes(trailing_whitespace=updated.trailing_whitespace)
    return new[0] if len(new) == 1 else cst.FlattenSentinel(new)


@dataclasses.dataclass(frozen=True)
class IndexOp:
  """``index_update(x, idx, y, **kw)`` -> ``x.at[idx].set(y, **kw)``; ``jax.ops.index[i]`` -> ``i``."""
  method: str
  unwrap_index: bool

  def apply(self, updated: cst.Call) -> cst.CSTNode:
    x, idx, y = (call_arg(updated, i, k) for i, k in enumerate(('x', 'idx', 'y')))
    index = ''.join(_code(e) for e in idx.slice) if self.unwrap_index else _code(idx)
    rest = [_code(a.with_changes(comma=cst.MaybeSentinel.DEFAULT)) for a in updated.args
            if a.keyword is not None and a.keyword.value not in ('x', 'idx', 'y')]
    return cst.parse_expression(
        f'{_atom(_code(x), x)}.at[{index}].{self.method}({", ".join([_code(y), *rest])})')


@dataclasses.dataclass(frozen=True)
class TieIn:
  """``tie_in(x, y)`` -> ``y``."""

  def apply(self, updated: cst.Call) -> cst.CSTNode:
    y = call_arg(updated, 1, 'y')
    return cst.parse_expression(_atom(_code(y), y))


@dataclasses.dataclass(frozen=True)
class Expression:
  """``jnp.fix(a)`` -> ``jnp.trunc(jnp.true_divide(a, True))``: the entry's text with the call's
  arguments for its parameters' words and the call's module (``module``: the code of the
  module it stands for, as ``jax`` for ``jax.api``; else the call's own) for its module word."""
  template: str
  parameters: Tuple[str, ...]
  module_word: str
  module: Optional[str] = None

  def apply(self, updated: cst.Call) -> cst.CSTNode:
    words = (*self.parameters, self.module_word)
    module = (cst.parse_expression(self.module) if self.module is not None
              else updated.func.value)
    return cst.helpers.parse_template_expression(
        re.sub(rf'\b({"|".join(words)})\b', r'{\1}', self.template),
        **{self.module_word: module},
        **{p: call_arg(updated, i, p) for i, p in enumerate(self.parameters)})


@dataclasses.dataclass(frozen=True)
class Keywords:
  """Renamed keywords; a keyword that is now positional-only moves to the front."""
  keywords: Tuple[Tuple[str, str], ...]

  def apply(self, updated: cst.Call) -> cst.CSTNode:
    renames = dict(self.keywords)
    front, positional, keyword = [], [], []
    for a in updated.args:
      value = _code(a.value)
      if a.keyword is None:
        positional.append(_code(a.with_changes(comma=cst.MaybeSentinel.DEFAULT)))
      elif renames.get(a.keyword.value) == '':
        front.append(value)
      else:
        keyword.append(f'{renames.get(a.keyword.value, a.keyword.value)}={value}')
    return cst.parse_expression(f'{_code(updated.func)}({", ".join(front + positional + keyword)})')


@dataclasses.dataclass(frozen=True)
class Dropped:
  """A statement that only called a no-op: removed, or ``pass`` where it was alone."""
  alone: bool

  def apply(self, updated: cst.SimpleStatementLine):
    if self.alone:
      return updated.with_changes(body=[cst.Pass()])
    return cst.RemovalSentinel.REMOVE


class _JaxNameRule(Rule):
  """A rule of this module: its data (``Renamed``, ``IndexOp``, ...) writes the new node."""

  def __init__(self, code: str, title: str):
    super().__init__()
    self.code, self.title = code, title

  def rewrite(self, updated, data, context):
    return data.apply(updated)


def _rule(code: str, title: str) -> Rule:
  return _JaxNameRule(code, title)


ALIAS = _rule('FOM201', 'a renamed jax name -> its name today (jax.tree_map -> '
              'jax.tree_util.tree_map, jax.host_id -> jax.process_index, jnp.DeviceArray -> '
              'jax.Array, ...), in uses and imports')
INDEX_OPS = _rule('FOM202', 'jax.ops.index_update(x, jax.ops.index[i], y) (add, mul, min, max) '
                  '-> x.at[i].set(y) (add, multiply, min, max)')
KEYWORDS = _rule('FOM203', 'jnp.clip(x, a_min=lo, a_max=hi) -> jnp.clip(x, min=lo, max=hi)')
SECOND_ARGUMENT = _rule('FOM204', 'a removed function -> what it returned: jax.lax.tie_in(x, y) '
                        '-> y, jnp.fix(x) -> jnp.trunc(jnp.true_divide(x, True))')
MODULES = _rule('FOM205', 'jax.experimental.optimizers / stax -> jax.example_libraries.*; '
                'from jax.config import config -> from jax import config')
NO_OP = _rule('FOM206', 'a statement jax.config.enable_omnistaging() dropped (always on)')
all_rules = (ALIAS, INDEX_OPS, KEYWORDS, SECOND_ARGUMENT, MODULES, NO_OP)
_RULE_OF_KIND = {'alias': ALIAS, 'at': INDEX_OPS, 'keywords': KEYWORDS,
                 'second_argument': SECOND_ARGUMENT, 'expression': SECOND_ARGUMENT,
                 'module': MODULES,
                 'config_module': MODULES, 'config_attribute': NO_OP}
_CALLS = ('at', 'second_argument', 'expression', 'keywords', 'config_attribute')


@dataclasses.dataclass
class FileResult:
  """What the rules found in one file: its records, and the imports to drop once unused."""
  records: List[Record] = dataclasses.field(default_factory=list)
  unused_imports: List[Tuple[str, str, Optional[str]]] = dataclasses.field(default_factory=list)


def _entry(unit: SourceFile, node: cst.CSTNode) -> Optional[TableName]:
  """The table entry ``node`` refers to (its one qualified name), else None."""
  names = unit.names(node)
  if len(names) != 1:
    return None
  (name,) = names
  moved = module_entry(name)
  return BY_NAME.get(name) or (moved if moved is not None and moved.name == name else None)


def _new_import(entry: TableName, full: str, bound: str) -> Tuple[str, str]:
  """``(module, 'name [as bound]')`` importing what replaces ``full`` under ``bound``."""
  new = entry.target + full[len(entry.name):] if entry.kind == 'module' else entry.target
  module, name = _split(new)
  return module, name if name == bound else f'{name} as {bound}'


def _import_texts(unit: SourceFile, stmt, kept_names,
                  kept_modules=frozenset()) -> Optional[Tuple[List[str], List[TableName]]]:
  """The new import statements for one import, and the entries they replace; None if unchanged.

  A name in ``kept_names`` keeps its import (a use of it is left as it is); so does a removed
  module of ``kept_modules`` (a use of it no rule rewrites). The import of any other module of
  :data:`REMOVED_MODULES` goes (every use of it is rewritten), as does one another plain import
  binds (flip's ``import jax.config`` under ``import jax``)."""
  entries, kept, added = [], [], {}
  if isinstance(stmt, cst.Import):
    out = []
    for a in stmt.names:
      full = _code(a.name)
      asname = a.asname.name.value if a.asname else None
      text = _code(a.with_changes(comma=cst.MaybeSentinel.DEFAULT))
      moved = module_entry(full)
      if moved is not None:
        entries.append(moved)
        text = moved.target + full[len(moved.name):] + (f' as {asname}' if asname else '')
      elif full in REMOVED_MODULES and full not in kept_modules:
        entries.append(TableName(full, 'module', ''))
        if asname:
          continue
        text = full.split('.')[0]   # ``import jax.lib.xla_bridge`` also bound ``jax``
      elif full in CONFIG_MODULES:   # ``import jax.config``: jax.config is jax's own object
        entries.append(BY_NAME[f'{full}.config'])
        parent, name = _split(CONFIG_MODULES[full])
        if asname:
          added.setdefault(parent, []).append(f'{name} as {asname}')
          continue
        text = parent
      out.append(text)
    if not entries:
      return None
    out = [t for t in out if t not in plainly_imported(unit, but=stmt)]   # ``import jax`` twice
    lines = [f'import {", ".join(out)}'] if out else []
    return lines + [f'from {m} import {", ".join(t)}' for m, t in added.items()], entries
  if not isinstance(stmt, cst.ImportFrom) or stmt.relative or stmt.module is None:
    return None
  module = _code(stmt.module)
  moved = module_entry(module)
  if isinstance(stmt.names, cst.ImportStar):
    if moved is None:
      return None
    return [f'from {moved.target + module[len(moved.name):]} import *'], [moved]
  for a in stmt.names:
    name = a.name.value
    bound = a.asname.name.value if a.asname else name
    full = f'{module}.{name}'
    entry = BY_NAME.get(full)
    if entry is None or entry.kind not in ('alias', 'config_module') or full in kept_names:
      entry = module_entry(full)
    if entry is None and full in REMOVED_MODULES and full not in kept_modules:
      entries.append(TableName(full, 'module', ''))
      continue
    if entry is None and _unread_removed_name(unit, full):
      # ``from jax.ops import index_update`` that nothing reads: kept, the import would fail on
      # today's jax (no use of it registers its removal, as a rewritten call does).
      entries.append(TableName(full, 'module', ''))
      continue
    if entry is None:
      kept.append(_code(a.with_changes(comma=cst.MaybeSentinel.DEFAULT)))
      continue
    entries.append(entry)
    new_module, text = _new_import(entry, full, bound)
    added.setdefault(new_module, []).append(text)
  if not entries:
    return None
  lines = [f'from {module} import {", ".join(kept)}'] if kept else []
  lines += [f'from {m} import {", ".join(texts)}' for m, texts in added.items()]
  return lines, entries


def _unread_removed_name(unit: SourceFile, full: str) -> bool:
  """Whether ``full`` is a function of the table that today's jax lacks (not one whose
  keywords only changed) and no name of the file outside its imports reads."""
  entry = BY_NAME.get(full)
  if entry is None or entry.kind not in ('at', 'second_argument', 'expression', 'function'):
    return False
  return not _read_outside_imports(unit, [full])


def _read_outside_imports(unit: SourceFile, fulls) -> bool:
  """Whether a name or attribute of the file outside its imports reads one of ``fulls`` (or a
  name under one)."""
  return any(isinstance(n, (cst.Name, cst.Attribute)) and not _within_import(unit, n) and
             any(q == f or q.startswith(f + '.') for q in unit.names(n) for f in fulls)
             for n in unit.nodes)


def _within_import(unit: SourceFile, node: cst.CSTNode) -> bool:
  return unit.enclosing(node, (cst.Import, cst.ImportFrom)) is not None


def _plan_import_line(unit, line, plan, result, kept_names, kept_modules):
  if not any(isinstance(s, (cst.Import, cst.ImportFrom)) for s in line.body):
    return
  texts, entries = [], []
  for s in line.body:
    new = _import_texts(unit, s, kept_names, kept_modules)
    if new is None:
      texts.append(_code(s.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)))
    else:
      texts += new[0]
      entries += new[1]
  if not entries:
    return
  gone = sorted({e.name for e in entries if not e.target})
  message = '; '.join(
      ([', '.join(sorted({e.name for e in entries if e.target})) + " imported from today's jax"]
       if len(gone) < len(entries) else []) +
      ([', '.join(gone) + ': removed from jax, every use (if any) rewritten, the import goes']
       if gone else []))
  if not texts:
    block = unit.parent(line)
    _add(plan, result, line, MODULES, Dropped(len(getattr(block, 'body', ())) == 1), message)
    return
  lines = tuple(texts) if len(line.body) == 1 else ('; '.join(texts),)
  _add(plan, result, line, _RULE_OF_KIND[entries[0].kind], ImportLines(lines), message)


def _add(plan, result, node, rule, data, message):
  if id(node) in plan.edits:    # another rule rewrites this very node: leave it to that rule
    return
  plan.edits[id(node)] = _edits.Edit(rule, data)
  result.records.append(Record(plan.unit.path, plan.unit.line(node), rule.code, 'rewritten',
                               'bit-exact', message))


def _refuse(plan, result, node, name, reason=UNREWRITTEN_REASON):
  plan.mark(node, f'{MARKER} {UNREWRITTEN} {reason}: {name}')
  result.records.append(Record(plan.unit.path, plan.unit.line(node), UNREWRITTEN, 'refused', '',
                               f'{reason}: {name}'))


def _alias_uses(unit: SourceFile):
  """``(node, full, canonical)``: the outermost attribute of each use ``jax.api.X...``."""
  for node in unit.nodes:
    if not isinstance(node, cst.Attribute) or _within_import(unit, node):
      continue
    parent = unit.parent(node)
    if isinstance(parent, cst.Attribute) and parent.value is node:
      continue
    names = unit.names(node)
    if len(names) != 1:
      continue
    (full,) = names
    under = aliased(full)
    if under is not None:
      yield node, full, under[1]


def _plan_alias_use(unit, node, full, canonical, plan, result):
  """``jax.api.X`` -> ``jax.X`` on the program's own base (then X's rename, if it has one), or
  FOM299 naming what today's jax lacks."""
  alias, _ = aliased(full)
  entry = BY_NAME.get(canonical)
  call = unit.parent(node)
  if entry is not None and entry.kind == 'expression' and isinstance(call, cst.Call) and (
      call.func is node) and full == f'{alias}.{entry.name.split(".", 1)[1]}' and not any(
          a.star for a in call.args):
    # ``jax.api.device_put_sharded(...)``: the entry's text on the program's ``jax``.
    base = node.value
    while unit.names(base) != {alias.split('.')[0]} and isinstance(base, cst.Attribute):
      base = base.value
    if unit.names(base) == {alias.split('.')[0]} and _plan_expression(
        unit, call, entry, plan, result, module=_code(base)):
      return
  if entry is not None and entry.kind != 'alias':
    _refuse(plan, result, node, f'{full} (it is {canonical}, which no rule rewrites through '
            f'{alias})')
    return
  new_name = entry.target if entry is not None else canonical
  missing = None if entry is not None else missing_today(canonical)
  if missing is not None:
    _refuse(plan, result, node, f'{full} (it is {canonical}; {jax_version()} has no '
            f'{missing})', MISSING_REASON)
    return
  base = node
  depth = full.count('.') - alias.count('.')   # attributes after the alias module
  for _ in range(depth):
    base = base.value
  # ``jax.api`` spelled through ``import jax [as jx]``: its base keeps the program's spelling.
  # ``from jax import api`` keeps its import (marked): the use stays with it.
  if not (isinstance(base, cst.Attribute) and unit.names(base.value) == {alias.split('.')[0]}
          and new_name.startswith('jax.')):
    _refuse(plan, result, node, f'{full} (it is {canonical}; {alias} is imported by name, '
            'which no rule rewrites)', MISSING_REASON)
    return
  _add(plan, result, node, ALIAS, Renamed(full=_code(base.value) + new_name[len('jax'):]),
       f'{full} -> {new_name} ({alias} held {MODULE_ALIASES[alias]}\'s public functions)')


def _unused_missing_import(unit: SourceFile, node) -> bool:
  """Whether ``node`` is ``from M import a, b`` (or ``import M as m``) of names today's jax lacks,
  none of which the file reads: the import only fails today, so it can go."""
  if isinstance(node, cst.ImportFrom):
    if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
      return False
    module = _code(node.module)
    fulls = [f'{module}.{a.name.value}' for a in node.names]
  elif isinstance(node, cst.Import) and all(a.asname is not None for a in node.names):
    fulls = [_code(a.name) for a in node.names]
  else:
    return False   # ``import jax.experimental.host_callback`` also binds ``jax``
  if any(missing_today(f) is None or f in BY_NAME or module_entry(f) is not None
         for f in fulls):
    return False
  line = unit.enclosing(node, cst.SimpleStatementLine)
  return line is not None and len(line.body) == 1 and not _read_outside_imports(unit, fulls)


def _missing_names(unit: SourceFile):
  """``(node, name, missing)``: an import, or a use spelled as an attribute, of a jax name
  today's jax does not have and the table does not cover (``jax.mask``, ``host_callback``)."""
  for node in unit.nodes:
    names = []
    if isinstance(node, cst.Import):
      names = [_code(a.name) for a in node.names]
    elif isinstance(node, cst.ImportFrom) and not node.relative and node.module is not None:
      module = _code(node.module)
      names = [module] if isinstance(node.names, cst.ImportStar) else [
          f'{module}.{a.name.value}' for a in node.names]
    elif isinstance(node, cst.Attribute) and not _within_import(unit, node):
      parent = unit.parent(node)
      if not (isinstance(parent, cst.Attribute) and parent.value is node):
        names = sorted(unit.names(node))[:1] if len(unit.names(node)) == 1 else []
    for name in names:
      if (name in BY_NAME or module_entry(name) is not None or name in CONFIG_MODULES
          or any(name == m or name.startswith(m + '.') for m in REMOVED_MODULES)):
        continue
      if isinstance(node, cst.Attribute) and aliased(name) is not None:
        break   # ``jax.api.X``: planned as ``jax.X`` (``_plan_alias_use``)
      missing = missing_today(name)
      if missing is not None:
        yield node, todays_spelling(name), missing
        break


# Calls that read the same value however often they run, so an argument that is one may be
# written twice; and the builtins that copy such a value into an equal new list or tuple.
_DEVICE_LISTS = frozenset({'jax.local_devices', 'jax.devices'})
_COPIES = frozenset({'builtins.list', 'builtins.tuple'})


def _device_list(unit, node) -> bool:
  """Whether ``node`` is ``jax.local_devices()`` or ``jax.devices()``, or the builtin ``list``
  or ``tuple`` of one (jraph's ``list(jax.devices())``)."""
  if not (isinstance(node, cst.Call) and len(unit.names(node.func)) == 1):
    return False
  if not node.args:
    return unit.names(node.func) <= _DEVICE_LISTS
  (arg, *rest) = node.args
  return (unit.names(node.func) <= _COPIES and not rest and not arg.star and arg.keyword is None
          and _device_list(unit, arg.value))


def _plan_expression(unit, call, entry, plan, result, module: Optional[str] = None) -> bool:
  """Plans ``call`` (of an ``'expression'`` entry) as the entry's text, its arguments in place
  of the parameters' words; False if the call gives other arguments, or if the text would read
  an argument twice (``devices`` of ``device_put_replicated``) that is not a plain name or
  attribute, or would put one inside its own ``lambda`` where a name of it is the lambda's."""
  arguments = [call_arg(call, i, p) for i, p in enumerate(entry.parameters)]
  if any(a is None for a in arguments) or len(call.args) != len(entry.parameters):
    return False
  lambdas = set(re.findall(r'lambda\s*\*?(\w+)', entry.target))
  for parameter, argument in zip(entry.parameters, arguments):
    if _unit.mentioned_names(unit, argument) & lambdas:
      return False
    if len(re.findall(rf'\b{parameter}\b', entry.target)) > 1 and not (
        _unit.plain_reference(argument) or _device_list(unit, argument)):
      return False
  signature = ', '.join(entry.parameters)
  _add(plan, result, call, _RULE_OF_KIND[entry.kind],
       Expression(entry.target, entry.parameters, entry.module_word, module),
       f'{entry.name}({signature}) -> {entry.target} (what it returned)')
  return True


def _plan_call(unit, call, entry, plan, result) -> bool:
  """Plans the rewrite of a call of a removed function; False if it cannot be rewritten."""
  if any(a.star for a in call.args):
    return False
  rule = _RULE_OF_KIND[entry.kind]
  if entry.kind == 'at':
    x, idx, y = (call_arg(call, i, k) for i, k in enumerate(('x', 'idx', 'y')))
    if x is None or idx is None or y is None:
      return False
    unwrap = isinstance(idx, cst.Subscript) and unit.names(idx.value) == {'jax.ops.index'}
    _add(plan, result, call, rule, IndexOp(entry.target, unwrap),
         f'{entry.name}(x, idx, y) -> x.at[idx].{entry.target}(y)')
    return True
  if entry.kind == 'second_argument':
    if call_arg(call, 1, 'y') is None or len(call.args) != 2:
      return False
    _add(plan, result, call, rule, TieIn(), f'{entry.name}(x, y) -> y')
    return True
  if entry.kind == 'expression':
    if not isinstance(call.func, cst.Attribute):
      return False
    return _plan_expression(unit, call, entry, plan, result)
  if entry.kind == 'config_attribute':
    expr = unit.parent(call)
    line = unit.parent(expr) if isinstance(expr, cst.Expr) else None
    if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1:
      return False
    block = unit.parent(line)
    alone = len(getattr(block, 'body', ())) == 1
    _add(plan, result, line, rule, Dropped(alone), f'{entry.name}() dropped: a no-op today')
    return True
  keywords = dict(entry.keywords)
  if any(a.keyword is not None and a.keyword.value in keywords for a in call.args):
    _add(plan, result, call, rule, Keywords(entry.keywords),
         f'{entry.name}: keywords ' + ', '.join(f'{old} -> {new or "positional"}'
                                                for old, new in entry.keywords))
  return True


def _uses(unit: SourceFile):
  """``(node, entry)`` for each use of a removed name outside the import statements."""
  for node in unit.nodes:
    if not isinstance(node, (cst.Name, cst.Attribute)) or _within_import(unit, node):
      continue
    parent = unit.parent(node)
    if isinstance(node, cst.Name) and isinstance(parent, cst.Attribute) and parent.value is not node:
      continue    # the ``tree_map`` of ``jax.tree_map``: the attribute is the use
    entry = _entry(unit, node)
    if entry is not None:
      yield node, entry


def _removed_module_uses(unit: SourceFile):
  """``(node, module, name, ambiguous)``: each use of a module of :data:`REMOVED_MODULES` no rule
  rewrites: another of its names (``xla_bridge.get_compile_options``), or the module itself
  handed on as a value; or any name of it where the name read has other bindings too
  (``except ImportError: xla_bridge = None``): no rule rewrites a name of two meanings."""
  for node in unit.nodes:
    if not isinstance(node, (cst.Name, cst.Attribute)) or _within_import(unit, node):
      continue
    parent = unit.parent(node)
    if isinstance(parent, cst.Attribute) and parent.value is node:
      continue    # ``xb`` of ``xb.device_count``: the attribute is the use
    if isinstance(node, cst.Name) and isinstance(parent, cst.Attribute):
      continue
    names = unit.names(node)
    for name in sorted(names):
      parts = name.split('.')
      if len(names) == 1 and any('.'.join(parts[:i]) in BY_NAME for i in range(2, len(parts) + 1)):
        continue    # renamed, or an attribute of what it returns (``get_backend().platform``)
      for module in REMOVED_MODULES:
        if name == module or name.startswith(module + '.'):
          if len(names) == 1 or module != 'flax.nn':   # flax.nn: FOM105's, file by file
            yield node, module, name, len(names) > 1


def plan_file(unit: SourceFile, plan: _edits.FilePlan) -> FileResult:
  """Adds the edits for the removed jax names of one file to its plan; returns its records."""
  result = FileResult()
  uses = list(_uses(unit))
  # An annotation-only name used other than to annotate keeps its import and that use.
  kept_names = {entry.name for node, entry in uses if entry.annotation_only and
                unit.enclosing(node, cst.Annotation) is None}
  unrewritten = list(_removed_module_uses(unit))
  kept_modules = frozenset(module for _, module, _, _ in unrewritten)
  called: Dict[int, bool] = {}   # id(func node) -> whether its call is planned
  index_args = set()             # id of `jax.ops.index[...]` arguments an index op unwraps
  for node, module, name, ambiguous in unrewritten:
    if module == 'flax.nn':   # its module system (nn.Dense, nn.Model): FOM105's, file by file
      if unit.enclosing(node, cst.Annotation) is not None and not _unit.uses_flax_nn(unit):
        _refuse(plan, result, node, name, NN_ANNOTATION)   # gradient-norm-penalty
      continue
    _refuse(plan, result, node, f'{name} (the name read is bound to {module} and to another value'
            ': no rule rewrites a name of two meanings)' if ambiguous else f'{name} ('
            f'{_legacy_jax.PARTIAL_REFUSALS[module]}; no rule rewrites this name)' if name != module
            else f'{name} (a removed module, used as a value)')
  dropped = set()
  for node, name, missing in _missing_names(unit):
    statement = unit.enclosing(node, cst.SimpleStatementLine) if isinstance(
        node, (cst.Import, cst.ImportFrom)) else node
    if isinstance(node, (cst.Import, cst.ImportFrom)) and _unused_missing_import(unit, node):
      if id(statement) not in dropped:
        dropped.add(id(statement))
        _add(plan, result, statement, MODULES,
             Dropped(len(getattr(unit.parent(statement), 'body', ())) == 1),
             f"{_code(node)}: today's jax has no {missing}, and nothing in the file reads "
             'what it imports: the import goes')
      continue
    _refuse(plan, result, statement, f'{name} ({jax_version(missing)} has no {missing})',
            MISSING_REASON)
  for node, full, canonical in _alias_uses(unit):
    _plan_alias_use(unit, node, full, canonical, plan, result)
  for node in unit.nodes:
    if isinstance(node, cst.SimpleStatementLine):
      _plan_import_line(unit, node, plan, result, kept_names, kept_modules)
    elif isinstance(node, cst.Call):
      entry = _entry(unit, node.func)
      if entry is not None and entry.kind in _CALLS:
        called[id(node.func)] = _plan_call(unit, node, entry, plan, result)
        idx = call_arg(node, 1, 'idx') if entry.kind == 'at' else None
        if called[id(node.func)] and idx is not None:
          index_args.add(id(idx))
  in_block = {}   # id(import line) -> (the line, the modules its renamed uses now read)
  for node, entry in uses:
    unwrapped = id(unit.parent(node)) in index_args
    if entry.kind == 'keywords':
      continue    # the function itself still exists
    if entry.annotation_only and unit.enclosing(node, cst.Annotation) is None:
      _refuse(plan, result, node, f'{entry.name} (outside an annotation, {entry.target} '
              'would widen what it matches)')
    elif entry.kind in ('alias', 'module', 'config_module') and not unwrapped:
      if isinstance(node, cst.Attribute):   # a Name was imported: its import is rewritten
        module = _plan_rename(node, entry, plan, result)
        lines = module and _edits.imported_in_a_block(unit, node, module.split('.')[0])
        for line in lines or ():
          in_block.setdefault(id(line), (line, set()))[1].add(module)
        if module and not lines:
          plan.needs.add(_edits.Import(module))
      elif entry.kind == 'config_module':
        # ``from jax.config import config`` became ``from jax import config``: once its only
        # use, ``config.enable_omnistaging()``, is dropped (FOM206), that import goes too.
        module, name = _split(entry.target)
        result.unused_imports.append((module, name, node.value if node.value != name else None))
    elif not (called.get(id(node), False) or unwrapped):
      if entry.kind in _CALLS:
        why = f'not called as the rule rewrites it, {entry.name}(...) with its arguments'
      elif entry.kind == 'function' and '.' not in entry.target:
        why = ('a function only the runtime layer gives back: no rule rewrites it, as no '
               'expression of today\'s jax gives what it returned; see docs/legacy_names.md')
      else:
        why = 'not called as the rule rewrites it, or a function only the runtime layer gives back'
      _refuse(plan, result, node, f'{entry.name} ({why})')
    elif isinstance(node, cst.Name):   # imported by name: the import goes once unused
      module, name = _split(entry.name)
      local = node.value if node.value != name else None
      result.unused_imports.append((module, name, local))
      if entry.kind == 'alias':   # the import was rewritten to the target's name
        module, target = _split(entry.target)
        result.unused_imports.append((module, target, node.value if node.value != target else None))
  for line, modules in in_block.values():
    _import_in_place(plan, result, line, sorted(modules))
  return result


def _import_in_place(plan, result, line, modules):
  """The dropped import ``line`` (inside a block) replaced by the imports its rewritten uses
  need, where it stood."""
  edit = plan.edits.get(id(line))
  if edit is None or not isinstance(edit.data, (Dropped, ImportLines)):
    plan.needs.update(_edits.Import(m) for m in modules)
    return
  new = tuple(f'import {m}' for m in modules)
  kept = edit.data.lines if isinstance(edit.data, ImportLines) else ()
  plan.edits[id(line)] = _edits.Edit(edit.rule, ImportLines(kept + new))
  at = plan.unit.line(line)
  for i, record in enumerate(result.records):
    if record.line == at and record.code == edit.rule.code:
      result.records[i] = dataclasses.replace(record, message=f"{record.message}; "
                                              f"{', '.join(new)} in its place, inside its block")


def _plan_rename(node, entry, plan, result) -> Optional[str]:
  """Plans the rename of ``node``; returns the module the new name needs imported, if any."""
  parent, _ = _split(entry.name)
  needed = None
  if entry.target.startswith(parent + '.'):
    data = Renamed(suffix=entry.target[len(parent):])
  elif entry.target.startswith('builtins.'):   # ``np.float`` -> ``float``: nothing to import
    data = Renamed(full=entry.target[len('builtins.'):])
  else:
    data = Renamed(full=entry.target)
    module = _split(entry.target)[0]
    # ``import jax`` does not load ``jax.extend``: a name under it imports its own module.
    needed = module if module.startswith('jax.extend') else entry.target.split('.')[0]
  _add(plan, result, node, _RULE_OF_KIND[entry.kind], data, f'{entry.name} -> {entry.target}')
  return needed
