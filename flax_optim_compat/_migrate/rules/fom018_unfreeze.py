"""FOM018: ``x.unfreeze()`` in a project migrated off flax.optim -> ``flax.core.unfreeze(x)``.

Importing ``flax.optim`` (this package) sets flax's ``flax_return_frozendict`` to True, as flax
did until 0.7.1: ``model.init(...)`` returned a ``FrozenDict``, and legacy programs call its
``unfreeze()`` (flaxmodels' ``merge_params``: ``params.unfreeze()``). Once the program no longer
imports it, ``init`` returns a ``dict``, which has no such method. ``flax.core.unfreeze(x)`` is
``x.unfreeze()`` for a ``FrozenDict`` (the method calls it) and the same nested ``dict`` copy for
a ``dict``, so the rewrite keeps what legacy computed whichever ``init`` returns: it is made in
every file of a project where a use of flax.optim is rewritten (``Rule.after_the_project``),
whatever rule removed the import (FOM010 alone does, for flaxmodels' GAN) and whatever file
order the rules see. A file that
defines a method ``unfreeze`` of its own keeps its calls (``flax.core.unfreeze`` would hand its
objects back as they are).
"""
import libcst as cst

from .. import _edits
from .. import _rule
from .._report import Record



class Unfreeze(_rule.Rule):
  code = 'FOM018'
  after_the_project = True
  title = ('x.unfreeze() in a project migrated off flax.optim -> flax.core.unfreeze(x) (flax.optim '
           'made init return a FrozenDict; today it returns a dict)')

  def plan_name(self, unit, node, plan, records):
    if not (isinstance(node, cst.Call) and not node.args and isinstance(node.func, cst.Attribute)
            and node.func.attr.value == 'unfreeze'):
      return False
    if any(isinstance(n, cst.FunctionDef) and n.name.value == 'unfreeze' for n in unit.nodes):
      return False
    plan.edits[id(node)] = _rule.Edit(self)
    plan.needs.add(_edits.Import('flax'))
    receiver = unit.code(node.func.value)
    records.append(Record(unit.path, unit.line(node), self.code, 'rewritten', 'bit-exact',
                          f'{receiver}.unfreeze() -> flax.core.unfreeze({receiver}): flax.optim '
                          'made init return a FrozenDict (flax_return_frozendict), today it '
                          'returns a dict; flax.core.unfreeze gives the same dict for either'))
    return False   # the receiver is looked at as any code

  def rewrite(self, updated, data, context):
    return cst.Call(func=cst.parse_expression('flax.core.unfreeze'),
                    args=[cst.Arg(updated.func.value)])


RULE = Unfreeze()
