"""FOM019: an import of flax.optim that nothing in its file reads -> removed.

A file may import flax.optim and read none of it: an import left from the legacy days
(ssljax's ``ssltrainstate.py``: ``from flax import optim``, no use), or one whose uses were
removed by hand. Without this package the import fails (flax has had no ``optim`` since 0.6.0),
so a migrated program that keeps it still needs the package, and ``--check`` must not pass over
it. Where the file has other rewrites the import would go with them (an import the rewrite left
unused goes); a file with nothing else to rewrite was left as it was, silently. The rule records
the import and has the engine drop it as it drops any legacy import no code reads (one place:
``_engine._rewrite``), in every file, whatever else the project does with flax.optim. Importing
flax.optim also set flax's legacy flags; FOM014 and FOM018 keep what the project's code relied
on (the rule's record opens their second pass as any flax.optim rewrite does). A star import
(``from flax.optim import *``) re-exports flax.optim's names from its module: refused (FOM112),
as what other files read through it is not followed.
"""
import libcst as cst

from .. import _refusals
from .. import _rule
from .. import _unit
from .._report import Record


def imports_flax_optim(node) -> bool:
  """Whether the import statement ``node`` imports flax.optim (itself, a module or a name)."""
  if isinstance(node, cst.Import):
    return any(_unit.dotted(a.name).startswith(_unit.LEGACY_MODULES) for a in node.names)
  if node.relative or node.module is None:
    return False
  base = _unit.dotted(node.module)
  if base.startswith(_unit.LEGACY_MODULES):
    return True
  return base == 'flax' and not isinstance(node.names, cst.ImportStar) and any(
      a.name.value == 'optim' for a in node.names)


class UnreadImport(_rule.Rule):
  code = 'FOM019'
  title = ('an import of flax.optim that nothing in its file reads -> removed (without this '
           'package it fails at import)')

  def plan_name(self, unit, node, plan, records):
    if not (isinstance(node, (cst.Import, cst.ImportFrom)) and imports_flax_optim(node)):
      return False
    if isinstance(node, cst.ImportFrom) and isinstance(node.names, cst.ImportStar):
      # netket's ``nk/optimizer/__init__.py``: every flax.optim name becomes the module's, read
      # through it by other files (and by the library's users): not an import nothing reads.
      plan.mark(node, _refusals.marker_text(_refusals.UNFOLLOWED))
      records.append(Record(unit.path, unit.line(node), _refusals.UNFOLLOWED.code, 'refused', '',
                            f'{unit.code(node)}: re-exports every flax.optim name from '
                            f'{unit.module_name or unit.path}, where other files (and its '
                            "users) read them; the analysis does not follow names read "
                            'through it, so it stays, and with it flax.optim'))
      return True
    if id(node) in plan.edits or unit.reads_flax_optim():
      return False
    plan.edits[id(node)] = _rule.Edit(self)
    records.append(Record(unit.path, unit.line(node), self.code, 'rewritten', 'bit-exact',
                          f'{unit.code(node)}: nothing in the file reads flax.optim, so the import '
                          'goes (without this package it fails at import)'))
    return True

  def rewrite(self, updated, data, context):
    return updated   # _engine._rewrite drops the legacy imports no code reads


RULE = UnreadImport()
