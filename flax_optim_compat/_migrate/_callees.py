"""What a call runs, beyond the parsed program's own resolution (``Program.resolve_callable``).

A call of a function-valued parameter (``optimize_fn(state, grad)``) runs what every call site
of its function binds to it (a function of the project, or a lambda none of whose calls is out
of sight); a call of what a factory returns runs the def nested in it that its every reachable
``return`` hands back (``_flows.reachable_returns``); a call of an instance of the project's
class runs the ``__call__`` the class defines. ``callers_of`` gives every call of a function
where all are in sight. Where none of these resolves a call, ``unresolved_why`` and
``unresolved_value`` say why, for the report.
"""
from typing import Dict, List, Optional, Tuple

import libcst as cst

from . import _calls
from . import _flows
from . import _unit
from ._program import COMPILERS
from ._program import PARTIAL
from ._program import REBINDERS
from ._program import Program
from ._unit import SourceFile
from ._unit import parameter


class Callees(Program):
  """The parsed program, with what its calls of values run."""

  def __init__(self, sources: Dict[str, str]):
    """``sources``: absolute path -> text."""
    super().__init__(sources)
    self._callers: Dict[int, Optional[List[Tuple[SourceFile, cst.Call, list, int]]]] = {}
    # A function passed into a parameter (Param id -> what every call site binds to it).
    self._passed_functions: Dict[int, Optional[tuple]] = {}

  # -------------------------------------------------------------------- what a call runs

  def resolve_callable(self, unit: SourceFile, func: cst.CSTNode, shift: int = 0, depth: int = 0):
    """``Program.resolve_callable``, and also: a call of a function-valued parameter
    (``optimize_fn(state, grad)``) where every call site of its function binds it to the
    same function of the project, and a call of what the project's function returns where
    its every ``return`` hands back one def nested in it (``optimization_manager(config)``
    returning its ``optimize_fn``): a call of either runs that function; so is a call of an
    instance of the project's class, its ``__call__`` (``_instance_call``)."""
    found = super().resolve_callable(unit, func, shift, depth)
    if found is not None or depth > 8 or getattr(self, '_passed_functions', None) is None:
      return found   # (while the parsed program is being built: its own resolution only)
    if isinstance(func, cst.Call):
      return self._returned_def(unit, func, shift, depth) or self._instance_call(
          unit, func, shift, depth)
    if isinstance(func, cst.Name) and parameter(unit, func) is not None:
      passed = self._passed_function(unit, parameter(unit, func), depth)
      if passed is not None:
        return passed[0], passed[1], passed[2] + shift
    alike = self._bound_alike(unit, func) if isinstance(func, cst.Name) else None
    return self.resolve_callable(unit, alike, shift, depth + 1) if alike is not None else None

  def _bound_class(self, unit: SourceFile, name: cst.Name) -> Optional[str]:
    """``Program._bound_class``, and also the class of a parameter (its only binding) that
    every call of its function binds to an instance of one class of the project, the calls all
    in sight (flax_bert's ``train_step(optimizer, state)``, called with ``state =
    State(...)``, then ``state.take_step(optimizer, grad)``: ``State.take_step``)."""
    found = super()._bound_class(unit, name)
    param = parameter(unit, name) if found is None else None
    if param is None or getattr(self, '_passed_functions', None) is None:
      return found
    known = self.__dict__.setdefault('_parameter_classes', {})
    if id(param) in known:
      return known[id(param)]
    known[id(param)] = None   # while it is being decided (a call that passes it on): none
    fdef = unit.enclosing(param, (cst.FunctionDef, cst.Lambda))
    callers = self.callers_of(unit, fdef) if isinstance(fdef, cst.FunctionDef) else None
    classes = set()
    for cunit, _, args, shift in callers or ():
      arg = _flows.bound_argument(unit, fdef, args, shift, param)
      classes.add(self.instance_class(cunit, arg) if isinstance(arg, cst.Call) else (
          self._bound_class(cunit, arg) if isinstance(arg, cst.Name) else None))
    known[id(param)] = classes.pop() if len(classes) == 1 else None
    return known[id(param)]

  def _bound_alike(self, unit: SourceFile, name: cst.Name) -> Optional[cst.BaseExpression]:
    """The expression every one of several ``name = value`` bindings of ``name`` is, itself or
    given to ``jax.jit`` / ``jax.pmap`` / ``jax.vmap`` or to a ``functools.partial`` that binds
    nothing (the same text: the same function with the same arguments bound), else None:
    tonywu95's laint binds ``p_train_step`` to ``jax.vmap(functools.partial(train_step, ...))``
    under ``if config.debug:`` and to ``jax.pmap(`` of the same partial otherwise; whichever
    runs, a call runs ``train_step`` with the same arguments."""
    values = self.assignment_values(unit, name) or []
    inner = []
    for value in values:
      names = unit.names(value.func) if isinstance(value, cst.Call) else set()
      while names and value.args and value.args[0].keyword is None and not value.args[0].star and (
          names & (COMPILERS | REBINDERS - PARTIAL) or names & PARTIAL and len(value.args) == 1):
        value = value.args[0].value   # ``functools.partial(f)`` alone is ``f``
        names = unit.names(value.func) if isinstance(value, cst.Call) else set()
      inner.append(value)
    return inner[0] if len(inner) > 1 and len({unit.code(v) for v in inner}) == 1 else None

  def _instance_call(self, unit: SourceFile, call: cst.Call, shift: int, depth: int):
    """The ``__call__`` that a call of the instance ``call`` makes runs, where ``call`` calls
    the project's class and the class itself defines ``__call__``, undecorated (modax's
    ``check_early_stop = mask_scheduler(patience=...)``, then ``check_early_stop(loss,
    optimizer)``: a dataclass whose ``__call__`` stores the optimizer and returns it); else
    None (one inherited from a base is not looked for)."""
    made = self.resolve_callable(unit, call.func, 0, depth + 1)
    if made is None or not isinstance(made[1], cst.ClassDef) or made[2]:
      return None
    method = next((s for s in made[1].body.body if isinstance(s, cst.FunctionDef) and (
        s.name.value == '__call__') and not s.decorators), None)
    return (made[0], method, shift) if method is not None else None

  def _returned_def(self, unit: SourceFile, call: cst.Call, shift: int, depth: int):
    """The def nested in the project's function called by ``call`` that its every
    ``return`` that call can reach hands back (``_flows.reachable_returns``: a branch its
    literal arguments rule out is not), itself or compiled (``return jax.pmap(update_fn,
    axis_name='batch')``, sezaiacers/diffusion), or partly applied (``return
    jax.jit(partial(step, loss_fn=loss_fn))``, modax), as ``resolve_callable`` gives it; else
    None."""
    target = self.resolve_callable(unit, call.func, 0, depth + 1)
    if target is None or not isinstance(target[1], cst.FunctionDef) or target[2]:
      return None
    cunit, fdef, _ = target
    returns = _flows.reachable_returns(cunit, fdef, unit, call)
    nested = set()
    for r in returns:
      value = r.value if isinstance(r, cst.Return) else None
      if isinstance(value, cst.Call) and value.args and not value.args[0].keyword and (
          cunit.names(value.func) & COMPILERS):   # ``return jax.pmap(update_fn, ...)``
        value = value.args[0].value   # the compiled function: its pmap is read where made
      # A name, or a call ``resolve_callable`` sees through: ``functools.partial(step,
      # loss_fn=loss_fn)`` (modax's ``create_update``), the positional parameters it binds
      # counted in the shift.
      inner = self.resolve_callable(cunit, value, 0, depth + 1) if isinstance(
          value, (cst.Name, cst.Call)) else None
      if inner is None or not isinstance(inner[1], cst.FunctionDef) or (
          cunit.enclosing(cunit.parent(inner[1]), (cst.FunctionDef, cst.ClassDef)) is not fdef):
        return None
      nested.add((id(inner[1]), inner[2]))
    if len(nested) != 1:
      return None
    return cunit, inner[1], shift + inner[2]

  def _passed_function(self, unit: SourceFile, param: cst.Param, depth: int):
    """``(unit, FunctionDef, shift)`` that every call site of the function of ``param``
    binds to it, the same at each; None where one binds something else (the default, a
    ``**kwargs``, a value not resolved to the project's function) or where the function is
    used other than called (its call sites are not all in sight)."""
    if id(param) in self._passed_functions:
      return self._passed_functions[id(param)]
    self._passed_functions[id(param)] = None   # while it is being decided: none
    fdef = unit.enclosing(param, (cst.FunctionDef, cst.Lambda))
    callers = self.callers_of(unit, fdef) if isinstance(fdef, cst.FunctionDef) else None
    if not callers:
      return None
    found = []
    for cunit, _, args, shift in callers:
      arg = _flows.bound_argument(unit, fdef, args, shift, param)
      if arg is None or arg is _flows.UNKNOWN or arg is param.default:
        return None
      callee = self.resolve_callable(cunit, arg, 0, depth + 1)
      lam = self._handed_lambda(cunit, arg, callers, unit, fdef, param) if callee is None else None
      callee = (cunit, lam, 0) if lam is not None else callee
      if callee is None or not isinstance(callee[1], (cst.FunctionDef, cst.Lambda)):
        return None
      found.append(callee)
    if len({(id(c[1]), c[2]) for c in found}) != 1:
      return None
    self._passed_functions[id(param)] = found[0]
    return found[0]

  @staticmethod
  def _handed_lambda(cunit, arg, calls, unit, fdef, param) -> Optional[cst.Lambda]:
    """The lambda ``arg`` is or a variable bound once holds (``_calls.lambda_of``: modax's
    ``val_fn = jit(lambda opt, state: ...)``, then ``train(update_fn, val_fn, ...)``), where
    every read of that variable is the callee of a call or what one of ``calls`` (the calls of
    ``fdef``, of ``unit``) binds to its ``param``: each call of it is then in sight; else
    None."""
    lam = _calls.lambda_of(cunit, arg)
    if lam is None or not isinstance(arg, cst.Name):
      return lam
    bound = {id(_flows.bound_argument(unit, fdef, args, shift, param))
             for _, _, args, shift in calls}
    reads = _unit.accesses(cunit, arg) if _unit.assigned_value(cunit, arg) is not None else None
    if not reads or any(id(r) not in bound and not (isinstance(cunit.parent(r), cst.Call) and (
        cunit.parent(r).func is r)) for r in reads):
      return None
    return lam

  def passed_lambda(self, unit: SourceFile, name: cst.CSTNode, lam: cst.Lambda) -> bool:
    """Whether the variable ``name`` holding ``lam`` is read only as a call's callee or as
    an argument whose parameter ``resolve_callable`` resolves to ``lam`` (the calls of the
    parameter run it, all in sight)."""
    reads = _unit.accesses(unit, name) if isinstance(name, cst.Name) else None
    for r in reads or ():
      parent = unit.parent(r)
      if isinstance(parent, cst.Call) and parent.func is r:
        continue
      call = unit.parent(parent) if isinstance(parent, cst.Arg) else None
      callee = self.resolve_callable(unit, call.func) if isinstance(call, cst.Call) else None
      if callee is None or not isinstance(callee[1], cst.FunctionDef):
        return False
      params = [*callee[1].params.posonly_params, *callee[1].params.params,
                *callee[1].params.kwonly_params]
      param = next((p for p in params if _flows.bound_argument(
          callee[0], callee[1], call.args, callee[2], p) is r), None)
      passed = self._passed_function(callee[0], param, 0) if param is not None else None
      if passed is None or passed[1] is not lam:
        return False
    return bool(reads)

  def unresolved_why(self, unit: SourceFile, name: cst.Name) -> str:
    """Why a call of the function-valued parameter ``name`` runs no one function that the
    analysis knows (``_passed_function`` is None): the call site of its function that binds
    something else, and why; a factory's ``if`` that call does not decide; or the functions
    that differ."""
    param = parameter(unit, name)
    fdef = unit.enclosing(param, (cst.FunctionDef, cst.Lambda)) if param is not None else None
    if not isinstance(fdef, cst.FunctionDef):
      return f'{name.value} is a parameter of a lambda, whose call sites are not followed'
    callers = self.callers_of(unit, fdef)
    if callers is None:
      return (f'{fdef.name.value}() is referred to other than as the callee of a call (or is a '
              'decorated method, or its name is not unique), so not all its call sites are '
              'in sight')
    if not callers:
      return f'no call of {fdef.name.value}() is in sight'
    found = {}
    for cunit, call, args, shift in callers:
      arg = _flows.bound_argument(unit, fdef, args, shift, param)
      at = _unit.at(cunit, call)
      if arg is _flows.UNKNOWN:
        return f'the call at {at} may bind it through a *args or **kwargs'
      if arg is None or arg is param.default:
        return f'the call at {at} passes no function for it'
      callee = self.resolve_callable(cunit, arg)
      lam = self._handed_lambda(cunit, arg, callers, unit, fdef, param) if callee is None else None
      callee = (cunit, lam, 0) if lam is not None else callee
      if callee is None or not isinstance(callee[1], (cst.FunctionDef, cst.Lambda)):
        return f'the call at {at} passes {cunit.code(arg)}, ' + self.unresolved_value(cunit, arg)
      found.setdefault((id(callee[1]), callee[2]), (
          f'{callee[1].name.value}() of {_unit.at(callee[0], callee[1].name)}' if lam is None
          else f'the lambda of {_unit.at(cunit, lam)}', at))
    return 'its call sites pass different functions: ' + ', '.join(
        f'{n} (at {at})' for n, at in found.values())

  def unresolved_value(self, unit: SourceFile, node: cst.CSTNode) -> str:
    """Why ``node`` (an argument) is resolved to no function of the project."""
    value = _unit.value_of(unit, node) if isinstance(node, cst.Name) else node
    inner = _calls.lambda_of(unit, node)
    if inner is not None:   # modax's ``val_fn = jit(lambda opt, state: ...)``
      return (f'a lambda (at {_unit.at(unit, inner)}) whose variable is also read other than as '
              'the callee of a call or the argument of a parameter every call site binds to it, '
              'so not all its calls are in sight')
    target = self.resolve_callable(unit, value.func) if isinstance(value, cst.Call) else None
    if target is None or not isinstance(target[1], cst.FunctionDef):
      return 'which the analysis does not resolve to one function of the given files'
    cunit, factory, _ = target
    returns = _flows.reachable_returns(cunit, factory, unit, value)
    tests = [n for r in returns for n in _ancestors(cunit, r, factory) if isinstance(n, cst.If)]
    what = f'what {unit.code(value)} at {_unit.at(unit, value)} returns'
    if not tests:
      return f'{what}, which is not one function nested in {factory.name.value}()'
    test = tests[0]
    return (f'{what}: {factory.name.value}() returns a different function in each branch of '
            f'`if {cunit.code(test.test)}:` at {_unit.at(cunit, test)}, which that call does not '
            'decide (migrate decides, for a call that names the factory itself, a test of one '
            'parameter, `p`, `not p`, `p == literal` or `p != literal`, that the call binds to '
            'a literal or leaves to its literal default, and that the factory binds nowhere '
            'else)')

  def callers_of(self, unit: SourceFile, fdef: cst.FunctionDef):
    """``[(unit, call, args, shift)]``: every call of the project's function or method
    ``fdef``, with the arguments it passes; None where ``fdef`` is referred to other than as
    the callee of a call (``jax.jit(f)``, ``functools.partial(f, ...)``, ``g = f``), or is a
    decorated method: then not all its call sites are in sight. A method is called as
    ``x.<name>(...)``: its name must be no other method's or function's in the project, and
    every attribute of that name a call."""
    if id(fdef) in self._callers:
      return self._callers[id(fdef)]
    self._callers[id(fdef)] = None
    owner = unit.enclosing(unit.parent(fdef), (cst.ClassDef, cst.FunctionDef))
    found = []
    if isinstance(owner, cst.ClassDef):
      name = fdef.name.value
      same = [n for n in (*self._functions, *self._classes) if n.rsplit('.', 1)[-1] == name]
      if fdef.decorators or len(same) != 1:
        return None
      for u, node in self.attributes(name):
        call = u.parent(node)
        if not (isinstance(call, cst.Call) and call.func is node) or (
            not isinstance(node.value, cst.Call) and u.names(node.value) & set(self._classes)):
          return None   # not a call, or ``Model.method(model, ...)``: self passed too
        found.append((u, call, list(call.args), 0))
    else:   # by its names and the names its package re-exports it by (``pkg.train``)
      qualified = set(unit.names(fdef.name)) | {
          name for name, (_, node) in self._functions.items() if node is fdef}
      for u, node in self.references(qualified):
        if node is fdef.name:
          continue
        parent = u.parent(node)
        if cst.ImportAlias in (type(parent), type(u.parent(parent))) or (
            isinstance(parent, cst.Attribute) and parent.attr is node):
          continue   # the import of it, or the last name of ``module.function``
        if not (isinstance(parent, cst.Call) and parent.func is node):
          return None
        found.append((u, parent, list(parent.args), 0))
    self._callers[id(fdef)] = found
    return found


def _ancestors(unit: SourceFile, node: cst.CSTNode, stop: cst.CSTNode) -> List[cst.CSTNode]:
  """The nodes above ``node`` up to ``stop`` (not included), nearest first."""
  found = []
  node = unit.parent(node)
  while node is not None and node is not stop:
    found.append(node)
    node = unit.parent(node)
  return found
