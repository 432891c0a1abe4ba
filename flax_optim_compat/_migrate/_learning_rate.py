"""How an optimizer object's learning rate is set when its apply sites override it.

``lr_mode`` picks one of three: ``'none'`` (no site overrides it: the def's own learning
rate), ``'schedule'`` (every site sets it to one expression of the optimizer's own
``state.step``, which becomes an optax schedule of ``count``), or ``'inject'`` (anything else:
``optax.inject_hyperparams`` and the value set in ``opt_state.hyperparams`` at each site).
"""
from typing import List, Optional, Tuple

import libcst as cst
from libcst import metadata as meta


def lr_mode(project, applies, overrides, creates) -> Tuple[str, Optional[str]]:
  """('none' | 'schedule' | 'inject', the schedule's source) of one optimizer object.

  ``applies``: its apply / optimize sites; ``overrides``: ``{id(site): the learning_rate=
  expression or None}``; ``creates``: its create sites (a schedule must only read values
  defined before them).
  """
  if not applies or all(overrides[id(s)] is None for s in applies):
    return 'none', None
  if any(overrides[id(s)] is None for s in applies):
    return 'inject', None
  schedules = set()
  for site in applies:
    text = _schedule(project, site, overrides[id(site)], applies, creates)
    if text is None:
      return 'inject', None
    schedules.add(text)
  if len(schedules) != 1:
    return 'inject', None
  return 'schedule', schedules.pop()


def _schedule(project, site, lr, applies, creates) -> Optional[str]:
  """``lr`` as a function of the receiver's step, or None when it is not provably one.

  A step read into a variable (``step = optimizer.state.step``) is the step of this update only
  where nothing updates the optimizer between the read and this update: the only apply site
  of the object in its function, not in a loop the read is outside of. Otherwise legacy fed
  every update the value read once, which a schedule of optax's ``count`` is not.
  """
  unit, receiver = site.unit, site.node.func.value
  globals_used: List[cst.CSTNode] = []
  reads: List[cst.CSTNode] = []
  body = _step_function(project, unit, lr, receiver, globals_used, 0, reads)
  if body is None:
    return None
  if reads and not _read_for_this_update_only(unit, site, applies, reads):
    return None
  for c in creates:
    if c.unit is not unit:
      return None
    if not _all_defined_before(unit, globals_used, c.node):
      return None
  code = cst.Module([]).code_for_node(body)
  if (isinstance(body, cst.Call) and len(body.args) == 1
      and isinstance(body.args[0].value, cst.Name)
      and body.args[0].value.value == _COUNT and body.args[0].keyword is None
      and not _mentions_count(body.func)):
    return cst.Module([]).code_for_node(body.func)
  return f'lambda {_COUNT}: {code}'


_COUNT = 'count'


def _mentions_count(node) -> bool:
  if isinstance(node, cst.Name) and node.value == _COUNT:
    return True
  return any(_mentions_count(c) for c in node.children)


def _all_defined_before(unit, names, create) -> bool:
  in_function = unit.enclosing(create, (cst.FunctionDef,)) is not None
  if in_function:
    return True
  line = unit.line(create)
  for name in names:
    scope = unit.scopes.get(name)
    for a in scope[name.value]:
      if isinstance(a, meta.Assignment) and unit.line(a.node) >= line:
        return False
  return True


def _is_step_of(node, receiver) -> bool:
  return (isinstance(node, cst.Attribute) and node.attr.value == 'step'
          and isinstance(node.value, cst.Attribute) and node.value.attr.value == 'state'
          and node.value.value.deep_equals(receiver))


def _read_for_this_update_only(unit, site, applies, reads) -> bool:
  """Whether each read of the step into a variable (``reads``: the assigned values) is
  followed by this update and no other: one apply site of the object in the read's function,
  inside every loop the site is in."""
  function = unit.enclosing(site.node, (cst.FunctionDef,))
  others = [s for s in applies if s is not site and s.unit is unit
            and unit.enclosing(s.node, (cst.FunctionDef,)) is function]
  if others:
    return False
  site_loops = _loops(unit, site.node, function)
  for read in reads:
    if unit.enclosing(read, (cst.FunctionDef,)) is not function:
      return False
    if not site_loops <= _loops(unit, read, function):
      return False
  return True


def _loops(unit, node, function) -> set:
  """The loops (``for``/``while``, comprehensions) around ``node`` inside ``function``."""
  loops = set()
  node = unit.parent(node)
  while node is not None and node is not function:
    if isinstance(node, (cst.For, cst.While, cst.ListComp, cst.SetComp, cst.DictComp,
                         cst.GeneratorExp, cst.Lambda)):
      loops.add(id(node))
    node = unit.parent(node)
  return loops


def _step_function(project, unit, expr, receiver, globals_used, depth, reads):
  """``expr`` with the receiver's ``state.step`` as ``count``; None if anything else varies.

  ``reads`` collects the assigned values through which a variable holds the step."""
  if depth > 6:
    return None
  if _is_step_of(expr, receiver):
    return cst.Name(_COUNT)
  if isinstance(expr, cst.Name):
    if expr.value == _COUNT:
      return None
    scope = unit.scopes.get(expr)
    if scope is None:
      return None
    assignments = list(scope[expr.value])
    if all(isinstance(a, meta.BuiltinAssignment) for a in assignments) and assignments:
      return expr
    if assignments and all(isinstance(a.scope, meta.GlobalScope) for a in assignments):
      globals_used.append(expr)
      return expr
    values = project.assignment_values(unit, expr)
    if values is None or len(values) != 1:
      return None
    inner = _step_function(project, unit, values[0], receiver, globals_used, depth + 1, reads)
    if inner is None:
      return None
    if _mentions_count(inner):
      reads.append(values[0])
    if isinstance(inner, (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer,
                          cst.Float)) or inner.lpar:
      return inner
    return inner.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
  if isinstance(expr, cst.Attribute):
    base = _step_function(project, unit, expr.value, receiver, globals_used, depth, reads)
    return None if base is None else expr.with_changes(value=base)
  if isinstance(expr, (cst.Lambda, cst.NamedExpr, cst.Await, cst.Yield, cst.GeneratorExp,
                       cst.ListComp, cst.DictComp, cst.SetComp)):
    return None
  if isinstance(expr, (cst.Integer, cst.Float, cst.SimpleString)):
    return expr
  replaced = {}
  for child in _expressions_in(expr):
    new = _step_function(project, unit, child, receiver, globals_used, depth, reads)
    if new is None:
      return None
    replaced[id(child)] = new
  return expr.visit(_Replace(replaced))


def _expressions_in(node):
  """The direct sub-expressions of ``node`` that are evaluated (not keyword names)."""
  found = []
  for child in node.children:
    if isinstance(child, cst.Arg):
      found.append(child.value)
    elif isinstance(child, cst.BaseExpression):
      found.append(child)
    elif isinstance(child, (cst.Arg, cst.Element, cst.SubscriptElement, cst.Index,
                            cst.ComparisonTarget, cst.BaseSlice)):
      found.extend(_expressions_in(child))
    elif isinstance(child, (cst.LeftParen, cst.RightParen, cst.BaseParenthesizableWhitespace,
                            cst.BaseBinaryOp, cst.BaseUnaryOp, cst.BaseCompOp,
                            cst.BaseBooleanOp, cst.Comma, cst.Colon, cst.LeftSquareBracket,
                            cst.RightSquareBracket, cst.AssignEqual, cst.Dot)):
      continue
    elif isinstance(child, cst.Name):
      continue
    else:
      found.extend(_expressions_in(child))
  return found


class _Replace(cst.CSTTransformer):

  def __init__(self, replaced):
    super().__init__()
    self.replaced = replaced

  def on_visit(self, node):
    return id(node) not in self.replaced

  def on_leave(self, original_node, updated_node):
    return self.replaced.get(id(original_node), updated_node)
