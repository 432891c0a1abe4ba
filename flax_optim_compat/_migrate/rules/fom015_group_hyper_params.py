"""FOM015: ``hp = optimizer.optimizer_def.hyper_params``, read only to override a
MultiOptimizer's groups at an apply site, goes; the override itself
(``apply_gradient(g, hyper_params=[hp[0].replace(learning_rate=lr), hp[1]])``) is FOM004's.

Legacy ``MultiOptimizer.update_hyper_params(hyper_params=[...])`` uses the list as the groups'
hyper-parameters for that one step, in group order, and ``learning_rate=lr`` replaces every
group's. The rewrite injects one learning rate per group (``learning_rate_0``, ...) into the
state of the ``multi_transform`` (FOM008) and sets each at every apply site: the override's
value, or the group's own learning rate where the element is ``hp[i]`` itself.
"""
from typing import List, Optional, Union

import libcst as cst

from .._report import Record
from .._rule import Edit, Match, Rule, called_member, member_of
from .. import _unit
from .._unit import SourceFile, accesses

KEY = 'learning_rate_{}'   # the injected learning rate of group i


def key(i: int) -> str:
  return KEY.format(i)


class GroupHyperParams(Rule):
  code = 'FOM015'
  title = ('hp = optimizer.optimizer_def.hyper_params read for apply_gradient(g, '
           'hyper_params=[hp[0].replace(learning_rate=lr), ...]) -> removed; each group\'s '
           'learning rate injected and set at the apply site')
  kind = 'group_hyper_params'
  covers_its_node = True

  def match(self, unit, node):
    read = _hyper_params_read(unit, node)
    if read is None:
      return None
    parent = unit.parent(read)
    if _element_index(unit, read) is not None:   # ``r.optimizer_def.hyper_params[i]`` inline
      return Match(self.kind, read)
    statement = unit.parent(parent) if isinstance(parent, cst.Assign) else None
    variable = _unit.sole_target(parent, value=read)
    if not (isinstance(variable, cst.Name)
            and isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1):
      return None
    block = unit.parent(statement)
    if not isinstance(block, (cst.IndentedBlock, cst.Module)) or len(block.body) < 2:
      return None   # the statement goes: its block must keep one
    uses = accesses(unit, variable)
    if not uses or any(_element_index(unit, u) is None for u in uses):
      return None
    return Match(self.kind, statement)

  def plan(self, site, plan):
    if isinstance(site.node, cst.SimpleStatementLine):
      plan.files[site.unit.path].edits[id(site.node)] = Edit(self)
      message = f'{site.unit.code(site.node.body[0])}: removed, the overrides are injected'
    else:
      message = f'{site.unit.code(site.node)}: read at the apply site that overrides it'
    plan.records.append(Record.of(site, 'rewritten', code=self.code, message=message))

  def rewrite(self, updated, data, context):
    return cst.RemoveFromParent()


RULE = GroupHyperParams()


def _hyper_params_read(unit: SourceFile, node: cst.CSTNode) -> Optional[cst.Attribute]:
  """``node.optimizer_def.hyper_params``, when the parent reads that of the optimizer ``node``."""
  optimizer_def = member_of(unit, node, 'optimizer_def')
  return member_of(unit, optimizer_def, 'hyper_params') if optimizer_def is not None else None


def _element_index(unit: SourceFile, node: cst.CSTNode) -> Optional[int]:
  """i where ``node`` is read only as ``node[i]`` or ``node[i].replace(...)``, element i of
  the ``hyper_params=[...]`` of an ``apply_gradient`` call; else None."""
  subscript = unit.parent(node)
  if not (isinstance(subscript, cst.Subscript) and subscript.value is node):
    return None
  index = _literal_index(subscript)
  value = subscript
  replace = called_member(unit, subscript, 'replace')
  if replace is not None:
    value = replace
  element = unit.parent(value)
  listing = unit.parent(element)
  arg = unit.parent(listing)
  call = unit.parent(arg)
  if not (isinstance(element, cst.Element) and isinstance(listing, (cst.List, cst.Tuple))
          and isinstance(arg, cst.Arg) and arg.keyword is not None
          and arg.keyword.value == 'hyper_params' and isinstance(call, cst.Call)
          and isinstance(call.func, cst.Attribute) and call.func.attr.value == 'apply_gradient'):
    return None
  if index is None or listing.elements[index] is not element:
    return None
  return index


def _literal_index(subscript: cst.Subscript) -> Optional[int]:
  if len(subscript.slice) != 1 or not isinstance(subscript.slice[0].slice, cst.Index):
    return None
  value = subscript.slice[0].slice.value
  return int(value.value) if isinstance(value, cst.Integer) else None


def group_overrides(unit: SourceFile, receiver: cst.BaseExpression, listing: cst.CSTNode
                    ) -> Union[List[Optional[cst.BaseExpression]], str]:
  """Per group, the learning rate an apply site's ``hyper_params=[...]`` sets (None: the
  group's own), or why the list is not one migrate rewrites.

  Element i must be ``H[i]`` or ``H[i].replace(learning_rate=X)``, ``H`` the hyper-parameters
  of the optimizer applied (``receiver.optimizer_def.hyper_params``, or a variable assigned
  that once).
  """
  if not isinstance(listing, (cst.List, cst.Tuple)):
    return f'hyper_params={unit.code(listing)} is not a list written at the call'
  found = []
  for i, element in enumerate(listing.elements):
    value = element.value
    lr = None
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and (
        value.func.attr.value == 'replace'):
      if any(a.keyword is None or a.keyword.value != 'learning_rate' for a in value.args):
        return (f'group {i}: {unit.code(value)} overrides a hyper-parameter other than '
                'learning_rate')
      lr = value.args[0].value if value.args else None
      value = value.func.value
    if not (isinstance(value, cst.Subscript) and _literal_index(value) == i
            and _is_hyper_params_of(unit, value.value, receiver)):
      return (f'group {i}: {unit.code(element.value)} is not hyper_params[{i}] of '
              f'{unit.code(receiver)}.optimizer_def, or its .replace(learning_rate=...)')
    found.append(lr)
  return found


def _is_hyper_params_of(unit: SourceFile, node: cst.CSTNode, receiver) -> bool:
  if isinstance(node, cst.Name):
    values = _unit.assigned_value(unit, node)
    if values is None:
      return False
    node = values
  return (isinstance(node, cst.Attribute) and node.attr.value == 'hyper_params'
          and isinstance(node.value, cst.Attribute) and node.value.attr.value == 'optimizer_def'
          and node.value.value.deep_equals(receiver))


def without_groups(plan) -> bool:
  """Whether the object may also be created from a def without groups (one branch's
  ``optim.Adam(...)``), beside its MultiOptimizers: its transform injects ``learning_rate``
  alone, so a ``learning_rate=`` site sets every injected learning rate there is, and a
  ``hyper_params=[...]`` site raises TypeError on it, where legacy raised at ``hp[i]``."""
  return any(id(c) in plan.calls or any(not isinstance(call, list)
                                        for _, _, call in c.branches or ())
             for c in plan.creates)


def lr_texts(updated: cst.Call, defaults) -> Optional[List[str]]:
  """Per group, the learning-rate text a (rewritten) apply call's ``hyper_params=[...]`` sets;
  ``defaults``: each group's own; None when the call has no such list."""
  listing = next((a.value for a in updated.args
                  if a.keyword is not None and a.keyword.value == 'hyper_params'), None)
  if listing is None:
    return None
  texts = []
  for element, default in zip(listing.elements, defaults):
    value = element.value
    if isinstance(value, cst.Call) and value.args:
      texts.append(cst.Module([]).code_for_node(value.args[0].value))
    else:
      texts.append(default)
  return texts
