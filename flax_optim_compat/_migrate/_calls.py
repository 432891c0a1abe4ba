"""What a call hands back, where it is built from what the call is given.

A library call that returns its argument (``jax_utils.replicate(opt)``,
``checkpoints.restore_checkpoint(d, opt)``, a tree map), a call of the project's own helper
that hands back one of its parameters leaf by leaf (brax's ``bcast_local_devices``), the aux of
``jax.grad`` / ``jax.value_and_grad(f, has_aux=True)`` (what ``f`` returns second), and the
carry of ``lax.scan`` / ``fori_loop`` / ``while_loop`` (what the body is given and returns).
``_flows`` joins the slots these connect.
"""
from typing import List, Optional, Tuple

import libcst as cst

from . import _unit
from ._program import COMPILERS
from ._program import Program
from ._unit import SourceFile

# ``jax.grad(f, has_aux=True)(...)`` returns ``(grads, aux)``, ``jax.value_and_grad(f,
# has_aux=True)(...)`` returns ``((value, aux), grads)``: where ``aux`` sits in the result.
DIFFERENTIATORS = {'jax.grad': (1,), 'jax.value_and_grad': (0, 1)}
# Loops whose result is their carry: (position of the body, position of the body's carry
# parameter, position of the initial carry, where the carry sits in the body's return and in
# the loop's result). ``scan(f, init, xs)``: ``f(carry, x) -> (carry, y)``, result ``(carry,
# ys)``; ``fori_loop(lo, hi, body, init)``: ``body(i, val) -> val``; ``while_loop(cond, body,
# init)``: ``body(val) -> val``.
LOOPS = {
    'jax.lax.scan': (0, 0, 1, (0,)),
    'jax.lax.fori_loop': (2, 1, 3, ()),
    'jax.lax.while_loop': (1, 0, 2, ()),
}
# Calls that read an optimizer as a plain pytree (any pytree works, a TrainState too).
SINKS = {
    'flax.serialization.to_bytes': (0, 'target'),
    'flax.serialization.to_state_dict': (0, 'target'),
    'flax.serialization.msgpack_serialize': (0, 'pytree'),
    'flax.training.checkpoints.save_checkpoint': (1, 'target'),
    'jax.tree_util.tree_leaves': (0, 'tree'),
    'jax.tree.leaves': (0, 'tree'),
    'jax.tree_leaves': (0, 'tree'),   # its removed alias, renamed by FOM201 in the same run
    'jax.tree_util.tree_structure': (0, 'tree'),
    'jax.tree.structure': (0, 'tree'),
    'jax.tree_structure': (0, 'tree'),
}
# Calls that return the optimizer they are given (argument position, keyword name).
_PASS_THROUGH = {
    'flax.jax_utils.replicate': (0, 'tree'),
    'flax.jax_utils.unreplicate': (0, 'tree'),
    'flax.training.checkpoints.restore_checkpoint': (1, 'target'),
    'jax.device_get': (0, 'x'),
    'jax.device_put': (0, 'x'),
    'jax.block_until_ready': (0, 'x'),
    # The mean over replicas of every leaf: legacy's per-parameter states and today's optax
    # states hold the same quantities leaf for leaf (renamed fields), so the mean of each is the
    # mean of its legacy twin (vdvae-jax's ``p_synchronize((optimizer, ema))``).
    'jax.lax.pmean': (0, 'x'),
    'flax.serialization.from_bytes': (0, 'target'),
    'flax.serialization.from_state_dict': (0, 'target'),
    'jax.tree_util.tree_map': (1, 'tree'),
    'jax.tree.map': (1, 'tree'),
    'jax.tree_map': (1, 'tree'),            # removed from jax; legacy programs use them
    'jax.tree_multimap': (1, 'tree'),
    'jax.tree_util.tree_multimap': (1, 'tree'),
}
# Of both, the calls that save or restore a tree (``_shared_layout``).
CHECKPOINT_IO = {name: where for name, where in {**SINKS, **_PASS_THROUGH}.items()
                 if name.startswith(('flax.training.checkpoints.', 'flax.serialization.'))}
# Of these, every positional argument after the function is a tree of the same structure.
TREE_MAPS = frozenset({'jax.tree_util.tree_map', 'jax.tree.map', 'jax.tree_map',
                       'jax.tree_multimap', 'jax.tree_util.tree_multimap'})


def library_pass_through(unit: SourceFile, call: cst.Call) -> Optional[cst.BaseExpression]:
  """The argument that a library ``call`` (``jax_utils.replicate(opt)``, ...) returns."""
  for name in unit.names(call.func):
    if name in _PASS_THROUGH:
      return _unit.call_arg(call, *_PASS_THROUGH[name])
  return None


def pass_through_arg(program: Program, unit: SourceFile, call: cst.Call,
                     depth: int = 0) -> Optional[cst.BaseExpression]:
  """The argument that ``call`` returns, leaf by leaf: a library call's
  (``jax_utils.replicate(opt)``), or a call of the project's own function whose every
  ``return`` hands back one parameter through such calls, the parameter read nowhere else
  (``def bcast(value, n): return jax.tree_map(lambda v: put(v, n), value)``)."""
  arg = library_pass_through(unit, call)
  if arg is not None or depth > 4:
    return arg
  callee = program.resolve_callable(unit, call.func)
  if callee is None or not isinstance(callee[1], cst.FunctionDef) or callee[2]:
    return None
  cunit, fdef, _ = callee
  if id(fdef) not in program.leafwise:
    program.leafwise[id(fdef)] = None   # while it is being decided: not one
    program.leafwise[id(fdef)] = _leafwise_param(program, cunit, fdef, depth)
  index = program.leafwise[id(fdef)]
  if index is None:
    return None
  return _unit.call_arg(call, index, fdef.params.params[index].name.value)

def _leafwise_param(program: Program, unit: SourceFile, fdef: cst.FunctionDef,
                    depth: int) -> Optional[int]:
  if isinstance(unit.enclosing(unit.parent(fdef), (cst.ClassDef, cst.FunctionDef)),
                cst.ClassDef) or fdef.decorators:
    return None
  returns = _unit.returns_of(unit, fdef)
  if not returns or any(not isinstance(r, cst.Return) or r.value is None for r in returns):
    return None
  params = [p.name.value for p in fdef.params.params]
  found = set()
  for r in returns:
    value = r.value
    while isinstance(value, cst.Call):
      inner = pass_through_arg(program, unit, value, depth + 1)
      if inner is None:
        return None
      value = inner
    if not isinstance(value, cst.Name) or value.value not in params:
      return None
    found.add(value.value)
  if len(found) != 1:
    return None
  name = found.pop()
  param = fdef.params.params[params.index(name)]
  reads = _unit.accesses(unit, param.name)
  scope = unit.scopes.get(param)
  if reads is None or len(reads) != len(returns) or scope is None or len(scope[name]) != 1:
    return None   # read elsewhere, or bound again (``value = make()``): not the argument
  return params.index(name)

def returned_parameter(program: Program, unit: SourceFile, fdef: cst.FunctionDef
                       ) -> Optional[Tuple[cst.Param, List[cst.BaseExpression]]]:
  """``(param, values)`` where every ``return`` of ``fdef`` hands back the variable of its
  parameter ``param``, which is bound nowhere else but by plain ``name = value`` (``values``,
  none a tuple, list or dict display) and never changed in part (``name[k] = ...``,
  ``name.f = ...``); else None. A call of it returns what that call passes for ``param`` or
  one of ``values`` (jft's ``load_checkpoint(tree, path)``: ``{'opt': opt}`` restored, or a
  tree read from the file where ``tree`` is None), not what every other call passes."""
  if id(fdef) not in program.returned_params:
    program.returned_params[id(fdef)] = _returned_parameter(unit, fdef)
  return program.returned_params[id(fdef)]


def _returned_parameter(unit: SourceFile, fdef: cst.FunctionDef):
  returns = _unit.returns_of(unit, fdef)
  if not returns or any(not isinstance(r, cst.Return) or not isinstance(r.value, cst.Name)
                        for r in returns) or len({r.value.value for r in returns}) != 1:
    return None
  name = returns[0].value.value
  params = [*fdef.params.posonly_params, *fdef.params.params, *fdef.params.kwonly_params]
  param = next((p for p in params if p.name.value == name), None)
  scope = unit.scopes.get(returns[0].value)
  if param is None or scope is None:
    return None
  values = []
  for binding in _unit.bindings(unit, scope, name):
    if binding.node is param:
      continue
    assign = _unit.plain_assignment(unit, binding)
    if assign is None or isinstance(assign.value, (cst.Tuple, cst.List, cst.Dict, cst.Set)):
      return None
    values.append(assign.value)
  for node in _unit.walk(fdef.body):
    targets = ([t.target for t in node.targets] if isinstance(node, cst.Assign) else
               [node.target] if isinstance(node, (cst.AugAssign, cst.AnnAssign)) else [])
    for target in targets:
      while isinstance(target, (cst.Subscript, cst.Attribute)):
        target = target.value
        if isinstance(target, cst.Name) and target.value == name:
          return None
  return param, values


def unwrap(program: Program, unit: SourceFile, value: cst.BaseExpression) -> cst.BaseExpression:
  """``value`` inside the pass-through calls around it (``replicate((a, b))`` -> ``(a, b)``)."""
  for _ in range(8):
    arg = pass_through_arg(program, unit, value) if isinstance(value, cst.Call) else None
    if arg is None:
      return value
    value = arg
  return value

def differentiated(program: Program, unit: SourceFile, call: cst.Call):
  """``(callee, aux path or None)`` of ``jax.grad(f, ...)(...)`` / ``value_and_grad``: the
  function ``f`` runs (``resolve_callable``) and where its ``has_aux`` aux sits in the
  result; else None."""
  inner = call.func
  if not isinstance(inner, cst.Call) or not inner.args:
    return None
  kind = next((n for n in unit.names(inner.func) if n in DIFFERENTIATORS), None)
  if kind is None:
    return None
  callee = program.resolve_callable(unit, inner.args[0].value)
  if callee is None or not isinstance(callee[1], cst.FunctionDef):
    return None
  aux = _unit.call_arg(inner, 2, 'has_aux')
  has_aux = isinstance(aux, cst.Name) and aux.value == 'True'
  return callee, (DIFFERENTIATORS[kind] if has_aux else None)

def loop(program: Program, unit: SourceFile, call: cst.Call):
  """``(body callee, its carry parameter's index, initial carry, carry path)`` of a
  ``jax.lax.scan`` / ``fori_loop`` / ``while_loop`` call, else None."""
  kind = next((n for n in unit.names(call.func) if n in LOOPS), None)
  if kind is None:
    return None
  body_at, param_at, init_at, path = LOOPS[kind]
  if any(a.star for a in call.args):
    return None
  body = _unit.call_arg(call, body_at, {0: 'f', 1: 'body_fun', 2: 'body_fun'}[body_at])
  init = _unit.call_arg(call, init_at, {1: 'init', 2: 'init_val', 3: 'init_val'}[init_at])
  callee = program.resolve_callable(unit, body) if body is not None else None
  if init is None or callee is None or not isinstance(callee[1], cst.FunctionDef):
    return None
  return callee, param_at, init, path


def lambda_of(unit: SourceFile, node: cst.CSTNode) -> Optional[cst.Lambda]:
  """The lambda that ``node`` is, or a variable holds (``_unit.value_of``), itself or compiled
  (``val_fn = jax.jit(lambda opt, state: ...)``), else None."""
  value = _unit.value_of(unit, node) if isinstance(node, cst.Name) else node
  inner = value.args[0].value if isinstance(value, cst.Call) and value.args and (
      unit.names(value.func) & COMPILERS) else value
  return inner if isinstance(inner, cst.Lambda) else None


def called_lambda(unit: SourceFile, func: cst.CSTNode) -> Optional[cst.Lambda]:
  """The lambda a call of ``func`` runs where every call of it is in sight, as a function's
  parameters and result are followed: ``func`` is the lambda (``(lambda o: o.target)(opt)``,
  compiled or not), or a variable bound once to one whose every read is the callee of a call
  (``step = jax.jit(lambda o, g: o.apply_gradient(g))``, then ``step(opt, g)``). Else None: a
  lambda also handed on as a value may run where its arguments and result are not seen."""
  if isinstance(func, cst.Name):
    reads = _unit.accesses(unit, func) if _unit.assigned_value(unit, func) is not None else None
    if not reads or any(not isinstance(unit.parent(r), cst.Call) or unit.parent(r).func is not r
                        for r in reads):
      return None
  return lambda_of(unit, func)


def sink_arg(unit: SourceFile, call: cst.Call) -> Optional[cst.BaseExpression]:
  """The argument of ``call`` that one of ``SINKS`` reads as a plain pytree, else None."""
  for name in unit.names(call.func):
    if name in SINKS:
      return _unit.call_arg(call, *SINKS[name])
  return None


def dict_items(unit: SourceFile,
               node: cst.CSTNode) -> Optional[List[Tuple[str, cst.BaseExpression]]]:
  """``[(key, value)]`` of a dict built whole where it is written, its keys all distinct
  strings, else None: a dict literal (``{'optimizer': opt}``) or the builtin's keywords
  (``dict(optimizer=opt, epoch=0)``, the same dict)."""
  if isinstance(node, cst.Call) and unit.names(node.func) == {'builtins.dict'}:
    if not all(a.keyword is not None and not a.star for a in node.args):
      return None
    items = [(a.keyword.value, a.value) for a in node.args]
  elif isinstance(node, cst.Dict):
    items = []
    for element in node.elements:
      if not (isinstance(element, cst.DictElement)
              and isinstance(element.key, cst.SimpleString)):
        return None
      items.append((element.key.evaluated_value, element.value))
  else:
    return None
  return items if len({k for k, _ in items}) == len(items) else None


def accessor(fdef: cst.FunctionDef) -> Optional[str]:
  """``'getter'`` for a method decorated ``@property`` (or ``functools.cached_property``),
  ``'setter'`` for one decorated ``@<name>.setter``, else None."""
  for d in fdef.decorators:
    d = d.decorator
    if isinstance(d, cst.Name) and d.value in ('property', 'cached_property') or (
        isinstance(d, cst.Attribute) and d.attr.value == 'cached_property'):
      return 'getter'
    if isinstance(d, cst.Attribute) and d.attr.value == 'setter' and isinstance(
        d.value, cst.Name) and d.value.value == fdef.name.value:
      return 'setter'
  return None
