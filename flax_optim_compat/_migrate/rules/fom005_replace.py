"""FOM005: ``optimizer.replace(target=p)`` -> ``state.replace(params=p)``, ``p`` put in the
state's own containers where it may not already be in them.

Legacy's ``apply_gradient`` rebuilt the target from its own tree and flax 0.5.3's ``init``
returned a ``FrozenDict``, so a program that put a ``FrozenDict`` back (KAIR-BAIR/dycheck:
``replace(target=core.FrozenDict({...}))``) never mixed containers. Today ``init`` returns a
``dict``: the state's params, gradients and optax state are ``dict`` s, and a ``FrozenDict`` put
in as params fails in ``apply_gradients`` (pytree structure error). ``FrozenDict`` and ``dict``
flatten to the same leaves in the same (sorted-key) order, so
``tree_unflatten(tree_structure(state.params), tree_leaves(p))`` is ``p``'s very arrays in the
state's containers (a ``p`` with another number of leaves raises there, as legacy's
``apply_gradient`` raised on it).

``optimizer.replace(state=optimizer.state.replace(step=s))`` (vdvae-jax's skipped update that
still counts the step) -> ``state.replace(step=s, opt_state=<every count set to s>)``. Legacy's
one step is read by its bias corrections and by the learning rate a program derives from it;
optax keeps it as the ``count`` of each state that counts updates (the package's state mapping
puts legacy's step in every ``count``), so each is set to ``s``, in its own dtype.
"""
import dataclasses

import libcst as cst

from .. import _edits
from .. import _refusals
from .. import _rule
from .. import _unit
from .._report import Record

TREE_MAPS = ('jax.tree_util.tree_map', 'jax.tree_map', 'jax.tree.map')


@dataclasses.dataclass(frozen=True)
class ReplaceData:
  restructure: bool   # put the new params in the state's own containers
  kept: tuple = ()    # the keywords that pass a field back as it is (``unchanged_field``)
  step: bool = False  # ``state=R.state.replace(step=s)``: the step and every count set to s


def _receiver(node: cst.CSTNode) -> bool:
  """Whether ``node`` is a name or an attribute of one (reading it twice is reading it once)."""
  while isinstance(node, cst.Attribute):
    node = node.value
  return isinstance(node, cst.Name)


def _same_containers(unit, receiver: cst.CSTNode, value: cst.CSTNode) -> bool:
  """Whether ``value`` is ``jax.tree_util.tree_map(f, <receiver>.target, ...)``: the target's
  own tree, so already the state's containers."""
  if not (isinstance(value, cst.Call) and unit.code(value.func) in TREE_MAPS):
    return False
  positional = [a for a in value.args if a.keyword is None and not a.star]
  return (len(positional) >= 2
          and unit.code(positional[1].value) == f'{unit.code(receiver)}.target')


def unchanged_field(unit, read: cst.CSTNode) -> bool:
  """Whether ``read`` is ``R.state`` (or ``R.optimizer_def``) passed as that same keyword to
  ``R.replace(...)``, ``R`` a name or an attribute of one: legacy's replace then keeps the field
  as it was (nerf-object-removal's ``optimizer_.replace(target=latent_codes,
  state=optimizer_.state)``, a new target with the same Adam moments and step), which a
  TrainState's ``replace(params=...)`` does with its own ``step`` and ``opt_state``; the
  keyword goes with the rewrite."""
  if not (isinstance(read, cst.Attribute) and read.attr.value in ('state', 'optimizer_def')
          and _receiver(read.value)):
    return False
  arg = unit.parent(read)
  if not (isinstance(arg, cst.Arg) and arg.keyword is not None
          and arg.keyword.value == read.attr.value):
    return False
  call = unit.parent(arg)
  return (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)
          and call.func.attr.value == 'replace'
          and unit.code(call.func.value) == unit.code(read.value))


def step_set(unit, read: cst.CSTNode) -> bool:
  """Whether ``read`` is ``R.state`` in ``R.replace(state=R.state.replace(step=s))``, ``R`` a
  name or an attribute of one: only the step is set, which FOM005 writes on a TrainState."""
  if not (isinstance(read, cst.Attribute) and read.attr.value == 'state'
          and _receiver(read.value)):
    return False
  member = unit.parent(read)
  inner = unit.parent(member) if isinstance(member, cst.Attribute) else None
  if not (isinstance(member, cst.Attribute) and member.attr.value == 'replace'
          and isinstance(inner, cst.Call)
          and inner.func is member and len(inner.args) == 1
          and inner.args[0].keyword is not None and inner.args[0].keyword.value == 'step'):
    return False
  # ``s`` is written twice (the step and the counts): only a value without calls, which reads
  # the same both times (``optimizer.state.step + 1``), not ``next(counter)``
  if any(isinstance(n, (cst.Call, cst.NamedExpr, cst.Await, cst.Yield))
         for n in _unit.walk(inner.args[0].value)):
    return False
  arg = unit.parent(inner)
  if not (isinstance(arg, cst.Arg) and arg.keyword is not None
          and arg.keyword.value == 'state'):
    return False
  call = unit.parent(arg)
  return (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)
          and call.func.attr.value == 'replace'
          and unit.code(call.func.value) == unit.code(read.value))


def _sets_step(unit, arg: cst.Arg) -> bool:
  value = arg.value
  return (arg.keyword is not None and arg.keyword.value == 'state'
          and isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)
          and step_set(unit, value.func.value))


class Replace(_rule.Rule):
  code = 'FOM005'
  title = 'optimizer.replace(target=p) -> state.replace(params=p)'
  kind = 'replace'
  returns_optimizer = True

  def match(self, unit, node):
    call = _rule.called_member(unit, node, 'replace')
    if call is None:
      return None
    # Legacy's Optimizer is a dataclass of ``optimizer_def``, ``state`` and ``target``; only the
    # target has a TrainState field to go to (``TrainState.replace(state=...)`` raises).
    internal = [f'{a.keyword.value}=...' if a.keyword is not None else
                f'{a.star}{unit.code(a.value)}' for a in call.args
                if (a.keyword is None or a.keyword.value != 'target')
                and not unchanged_field(unit, a.value) and not _sets_step(unit, a)]
    if internal:
      return _rule.Match(self.kind, call, _refusals.READ,
                         f'replace({", ".join(internal)}) sets legacy internals a TrainState '
                         'does not have')
    return _rule.Match(self.kind, call)

  def plan(self, site, plan):
    unit, call = site.unit, site.node
    receiver = call.func.value
    value = next((a.value for a in call.args
                  if a.keyword is not None and a.keyword.value == 'target'), None)
    kept = tuple(a.keyword.value for a in call.args if unchanged_field(unit, a.value))
    restructure = value is not None and not _same_containers(unit, receiver, value)
    step = any(_sets_step(unit, a) for a in call.args)
    file_plan = plan.files[unit.path]
    if step:
      file_plan.needs.update((_edits.JAX, _edits.JNP))
    status, exact, message = 'rewritten', None, unit.code(call)
    if restructure and not _receiver(receiver):
      # Not read twice (it may be a call): renamed only, flagged with what to write.
      restructure, status, exact = False, 'flagged', 'not exact'
      flag = (f'{_refusals.NOT_EXACT} line {site.line}: the new params keep their own '
              'containers, and a FrozenDict put in a state of dict params fails in '
              'apply_gradients: write replace(params=jax.tree_util.tree_unflatten('
              'jax.tree_util.tree_structure(state.params), '
              f'jax.tree_util.tree_leaves({unit.code(value)}))) with the state bound to a name')
      message = f'{message}: {flag}'
      file_plan.mark(call, f'{_refusals.MARKER} {flag}')
    if restructure:
      file_plan.needs.add(_edits.JAX)
    file_plan.edits[id(call)] = _rule.Edit(self, ReplaceData(restructure, kept, step))
    plan.records.append(Record.of(site, status, code=self.code, exact=exact,
                                  message=message))

  def rewrite(self, updated, data, context):
    receiver = _rule.text_of(updated.func.value)

    def params(value):
      if not data.restructure:
        return value
      return cst.parse_expression(
          f'jax.tree_util.tree_unflatten(jax.tree_util.tree_structure({receiver}.params), '
          f'jax.tree_util.tree_leaves({_rule.text_of(value)}))')
    def step_args(arg):
      # ``step=s`` and the counts set from it (``s`` has no call: ``step_set``), ``s`` bound once
      # for every count by a lambda whose parameter shadows no name of the receiver
      step = _rule.text_of(arg.value.args[0].value)
      name = _rule.unshadowed('step', receiver)
      counts = cst.parse_expression(
          f'(lambda {name}: jax.tree_util.tree_map_with_path(lambda path, v: jnp.asarray({name}, '
          f'v.dtype) if jax.tree_util.keystr(path[-1:]) == ".count" else v, '
          f'{receiver}.opt_state))({step})')
      return [arg.with_changes(keyword=cst.Name('step'), value=arg.value.args[0].value),
              arg.with_changes(keyword=cst.Name('opt_state'), value=counts)]

    args = []
    for a in updated.args:
      if a.keyword is not None and a.keyword.value in data.kept:
        continue
      if a.keyword is not None and a.keyword.value == 'target':
        args.append(a.with_changes(keyword=cst.Name('params'), value=params(a.value)))
      elif data.step and a.keyword is not None and a.keyword.value == 'state':
        args.extend(step_args(a))
      else:
        args.append(a)
    if args and data.kept:
      args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return updated.with_changes(args=args)


RULE = Replace()
