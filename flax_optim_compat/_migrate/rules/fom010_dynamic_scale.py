"""FOM010: ``optim.DynamicScale`` -> ``flax.training.dynamic_scale.DynamicScale``, imported as
``dynamic_scale_lib`` (as flax's examples do); ``from flax.optim import dynamic_scale as
dynamic_scale_lib`` keeps its alias and imports flax.training's module.

Not a use of an optimizer object: the names are found where no object's rule covers them.
"""
import libcst as cst

from .. import _edits
from .. import _rule
from .._report import Record

ALIAS = 'dynamic_scale_lib'
IMPORT = _edits.Import('flax.training', 'dynamic_scale', ALIAS)


class DynamicScale(_rule.Rule):
  code = 'FOM010'
  title = ('optim.DynamicScale -> flax.training.dynamic_scale.DynamicScale (imported as '
           'dynamic_scale_lib, as flax\'s examples do)')

  def plan_name(self, unit, node, plan, records):
    if _aliased_import(unit, node):
      plan.edits[id(node)] = _rule.Edit(self)
      records.append(Record(unit.path, unit.line(node), self.code, 'rewritten', 'bit-exact',
                            f'{unit.code(node)} -> from flax.training import ...'))
      return True
    if isinstance(node, (cst.Name, cst.Attribute)) and unit.legacy(node) == 'DynamicScale':
      plan.edits[id(node)] = _rule.Edit(self)
      plan.needs.add(IMPORT)
      said = (f'{unit.code(node)}: unchanged, {ALIAS} now names flax.training.dynamic_scale'
              if unit.code(node) == f'{ALIAS}.DynamicScale' else   # heatx's, already so named
              f'{unit.code(node)} -> {ALIAS}.DynamicScale')
      records.append(Record(unit.path, unit.line(node), self.code, 'rewritten', 'bit-exact',
                            said))
      return True
    return False

  def rewrite(self, updated, data, context):
    if isinstance(updated, cst.ImportFrom):   # the module under the alias the rule writes
      return updated.with_changes(module=cst.parse_expression('flax.training'))
    return cst.parse_expression(f'{ALIAS}.DynamicScale')


def _aliased_import(unit, node) -> bool:
  """``from flax.optim import dynamic_scale as dynamic_scale_lib`` (the alias FOM010 writes)."""
  return (isinstance(node, cst.ImportFrom) and isinstance(node.names, (list, tuple))
          and len(node.names) == 1 and node.names[0].asname is not None
          and unit.code(node.names[0].asname.name) == ALIAS
          and unit.legacy(node.names[0].name) is None
          and node.module is not None and unit.code(node.module) in ('flax.optim',
                                                                      'flax_optim_compat')
          and node.names[0].name.value == 'dynamic_scale')


RULE = DynamicScale()
