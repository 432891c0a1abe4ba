"""FOM018: init's ``FrozenDict`` methods and ``_dict`` in a migrated project -> ``flax.core``'s.

Importing ``flax.optim`` (this package) sets flax's ``flax_return_frozendict`` to True, as flax
did until 0.7.1: ``model.init(...)`` returned a ``FrozenDict``, and legacy programs call its
methods. Once the program no longer imports it, ``init`` returns a ``dict``. Three calls, each
made the same for either by its ``flax.core`` function (which calls the method on a
``FrozenDict``):

* ``x.unfreeze()`` -> ``flax.core.unfreeze(x)`` (flaxmodels' ``merge_params``): a ``dict`` has
  no ``unfreeze``; for a ``dict`` the function gives the same nested ``dict`` copy.
* ``a, b = x.pop(key)`` -> ``a, b = flax.core.pop(x, key)`` (flax 0.3's imagenet, score_sde:
  ``model_state, params = variables.pop('params')``): a ``FrozenDict``'s ``pop`` returns the
  rest and the value; a ``dict``'s returns the value only, whose keys the two names would then
  unpack. The same for ``apply(..., mutable=[...])``'s variables, and for a key that is a
  variable (slot-attention-video's ``filter_key_from_frozen_dict(frozen_dict, key)``:
  ``frozen_dict, _ = frozen_dict.pop(key)`` on the step's mutable variables). Only a call with
  one key that is not a number written out, unpacked into exactly two names, is rewritten: that
  is the ``FrozenDict``'s in practice (a list's ``pop`` takes a number or nothing, pixelcnn's
  ``down, down_right = stack.pop()``; a list given to ``flax.core.pop`` through a variable key
  raises a ``TypeError``, it is not changed silently), and a single name is as likely a plain
  ``dict``'s; a receiver that is a plain ``dict`` in the legacy program too (a dict display,
  ``dict(...)``, or a variable bound once to one) is left, as its value is unpacked there as
  well.
* ``x.copy({...})`` (a dict literal or comprehension, or ``add_or_replace=``) ->
  ``flax.core.copy(x, {...})`` (flax 0.3's imagenet, efficientnet-jax): a ``dict``'s ``copy``
  takes no argument (``TypeError``); for a ``dict`` the function gives the same entries.

And one attribute: ``x._dict`` read -> ``flax.core.unfreeze(x)`` (fitvid's ``print_model_size``
logs ``jax.tree_map(lambda x: x.size, params)._dict``, the params popped from init's
variables): a ``FrozenDict`` keeps its entries as a nested ``dict`` there, a ``dict`` has no
such attribute (``AttributeError``); the function gives a nested ``dict`` of the same entries
for either (a copy: a write into it would not reach ``x``, as none should into a FrozenDict).
A file that sets an attribute ``_dict`` or defines one, and ``self._dict`` / ``cls._dict``,
are its own class's and are left.

The rewrites are made in every file of a project where a use of flax.optim is rewritten
(``Rule.after_the_project``), whatever rule removed the import (FOM010 alone does, for
flaxmodels' GAN) and whatever file order the rules see. A file that defines a method of the
same name keeps its calls of it (the ``flax.core`` function would not call it).
"""
import libcst as cst

from .. import _edits
from .. import _rule
from .. import _unit
from .._report import Record

_WHY = ('flax.optim made init return a FrozenDict (flax_return_frozendict), today it returns a '
        'dict; ')


def _a_plain_dict(unit, receiver) -> bool:
  """Whether ``receiver`` is a plain ``dict`` in the legacy program too: a dict display or
  comprehension, ``dict(...)``, or a variable whose one binding is one of these
  (``shapes = {'x': (3, 4)}``, then ``h, w = shapes.pop('x')``)."""
  value = _unit.assigned_value(unit, receiver) if isinstance(receiver, cst.Name) else receiver
  return isinstance(value, (cst.Dict, cst.DictComp)) or (
      isinstance(value, cst.Call) and isinstance(value.func, cst.Name)
      and value.func.value == 'dict')


def _a_number(key) -> bool:
  """Whether ``key`` is a number written out (``0``, ``-1``): a list's ``pop``."""
  if isinstance(key, cst.UnaryOperation):
    key = key.expression
  return isinstance(key, (cst.Integer, cst.Float, cst.Imaginary))


def _facts(unit):
  """What the file defines, read once per file (a rule asks for each call it looks at): the
  names of its functions, methods and properties, and whether it sets an attribute ``_dict``
  (``obj._dict = ...``, or ``+=``, or annotated)."""
  facts = unit.__dict__.get('_frozen_dict_facts')
  if facts is None:
    defined, sets_dict = set(), False
    for n in unit.nodes:
      if isinstance(n, cst.FunctionDef):
        defined.add(n.name.value)
      targets = ([t.target for t in n.targets] if isinstance(n, cst.Assign) else
                 [n.target] if isinstance(n, (cst.AugAssign, cst.AnnAssign)) else [])
      sets_dict = sets_dict or any(
          isinstance(t, cst.Attribute) and t.attr.value == '_dict' for t in targets)
    facts = unit.__dict__['_frozen_dict_facts'] = (frozenset(defined), sets_dict)
  return facts


def _defines(unit, name) -> bool:
  """Whether the file defines a function, method or property ``name`` (its own class's: the
  ``flax.core`` function would not call it)."""
  return name in _facts(unit)[0]


def _own_dict_attribute(unit) -> bool:
  """Whether the file gives some class of its own a ``_dict``: defines one, or sets one."""
  return _defines(unit, '_dict') or _facts(unit)[1]


def _frozen_dict_entries(unit, node) -> bool:
  """Whether ``node`` reads a ``FrozenDict``'s ``_dict`` as this rule rewrites it."""
  if not (isinstance(node, cst.Attribute) and node.attr.value == '_dict'):
    return False
  receiver = node.value
  if isinstance(receiver, cst.Name) and receiver.value in ('self', 'cls'):
    return False
  parent = unit.parent(node)
  if isinstance(parent, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.Del)):
    return False   # written, not read
  return not _a_plain_dict(unit, receiver) and not _own_dict_attribute(unit)


def _method(unit, node):
  """The FrozenDict method ``node`` calls as this rule rewrites it, or None."""
  if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)):
    return None
  name, args = node.func.attr.value, node.args
  if any(a.star for a in args):
    return None
  if name == 'unfreeze' and not args:
    return name
  if name == 'pop' and len(args) == 1 and args[0].keyword is None and not _a_number(
      args[0].value):
    if _a_plain_dict(unit, node.func.value):
      return None   # its pair of a value is unpacked: legacy gave the same (no FrozenDict)
    assign = unit.parent(node)
    target = _unit.sole_target(assign, value=node)
    if (isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2
        and not any(isinstance(e, cst.StarredElement) for e in target.elements)):
      return name
    return None
  if name == 'copy' and len(args) == 1 and (
      (args[0].keyword is None and isinstance(args[0].value, (cst.Dict, cst.DictComp)))
      or (args[0].keyword is not None and args[0].keyword.value == 'add_or_replace')):
    return name
  return None


_SAME = {
    'unfreeze': 'flax.core.unfreeze gives the same dict for either',
    'pop': ("a dict's pop returns the value only; flax.core.pop returns the rest and the value "
            'for either'),
    'copy': "a dict's copy takes no argument; flax.core.copy gives the same entries for either",
}


class FrozenDictMethod(_rule.Rule):
  code = 'FOM018'
  after_the_project = True
  title = ("init's FrozenDict methods in a project migrated off flax.optim (x.unfreeze(), "
           'a, b = x.pop(k), x.copy({...}), x._dict) -> flax.core.unfreeze/pop/copy (flax.optim '
           'made init return a FrozenDict; today it returns a dict)')

  def plan_name(self, unit, node, plan, records):
    if _frozen_dict_entries(unit, node):
      plan.edits[id(node)] = _rule.Edit(self)
      plan.needs.add(_edits.Import('flax'))
      receiver = unit.code(node.value)
      records.append(Record(unit.path, unit.line(node), self.code, 'rewritten', 'bit-exact',
                            f'{receiver}._dict -> flax.core.unfreeze({receiver}): {_WHY}'
                            "a dict has no _dict; flax.core.unfreeze gives a nested dict of "
                            'the same entries for either'))
      return False   # the receiver is looked at as any code
    name = _method(unit, node)
    if name is None or _defines(unit, name):
      return False
    plan.edits[id(node)] = _rule.Edit(self)
    plan.needs.add(_edits.Import('flax'))
    receiver = unit.code(node.func.value)
    arg = {'unfreeze': '', 'pop': f', {unit.code(node.args[0].value)}' if node.args else '',
           'copy': ', {...}'}[name]
    records.append(Record(unit.path, unit.line(node), self.code, 'rewritten', 'bit-exact',
                          f'{receiver}.{name}({arg[2:]}) -> flax.core.{name}({receiver}{arg}): '
                          f'{_WHY}{_SAME[name]}'))
    return False   # the receiver and the arguments are looked at as any code

  def rewrite(self, updated, data, context):
    if isinstance(updated, cst.Attribute):   # x._dict
      return cst.Call(func=cst.parse_expression('flax.core.unfreeze'),
                      args=[cst.Arg(updated.value)])
    return cst.Call(func=cst.parse_expression(f'flax.core.{updated.func.attr.value}'),
                    args=[cst.Arg(updated.func.value),
                          *[a.with_changes(keyword=None, equal=cst.MaybeSentinel.DEFAULT,
                                           comma=cst.MaybeSentinel.DEFAULT)
                            for a in updated.args]])


RULE = FrozenDictMethod()
