"""FOM006: ``optim.Optimizer`` annotations and dataclass fields -> ``train_state.TrainState``.

A type names what the rewritten value is, so it is rewritten with it: ``optim.Optimizer``
anywhere in an annotation, as the ``bound=`` of a ``typing.TypeVar`` (jaxfg's
``TypeVar('OptimizerType', bound=flax.optim.Optimizer)``), and bound alone to a module-level
name that its file reads only in annotations (t5x's ``Optimizer = optim.Optimizer``), becomes
``train_state.TrainState``; a def class in an annotation (``-> Tuple[MLP, flax.optim.Adam]``)
becomes the type the rewritten def is, ``optax.GradientTransformation``; in a type alias at
module level or in a class body (``OptimizerType = Union[optim.Optimizer, Optimizer]``)
``OptimizerState`` becomes ``optax.OptState`` and ``OptimizerDef`` ``optax.GradientTransformation``
too. Python evaluates an annotation and a TypeVar's bound when the ``def`` (or the module) runs,
so a name left legacy there would stop the migrated module from importing once ``flax.optim`` is
gone.
"""
import libcst as cst

from .. import _edits
from .. import _rule
from .. import _unit
from .._report import Record
from .._unit import annotation_head

TRANSFORMATION = 'optax.GradientTransformation'   # the type of a rewritten def
# A flax.optim class in a type alias (``OptimizerType = Union[optim.Optimizer, Optimizer]``,
# t5x's "transitional type definitions"): the type the rewritten values have. Outside an alias
# ``OptimizerState`` / ``OptimizerDef`` go with the legacy internals or the def they name.
_ALIASED = {'OptimizerState': 'optax.OptState', 'OptimizerDef': TRANSFORMATION}


class Annotation(_rule.Rule):
  code = 'FOM006'
  title = 'optim.Optimizer annotations and dataclass fields -> train_state.TrainState'
  kind = 'annotation'   # the analysis finds these sites by the annotation's name

  def plan(self, site, plan):
    file_plan = plan.files[site.unit.path]
    file_plan.edits[id(site.node)] = _rule.Edit(self)
    file_plan.needs.add(_edits.TRAIN_STATE)
    plan.records.append(Record.of(site, 'rewritten', code=self.code,
                                  message=site.unit.code(site.node.annotation)))

  def plan_name(self, unit, node, plan, records):
    """``optim.Optimizer`` anywhere else in an annotation (``-> Tuple[optim.Optimizer,
    jnp.ndarray]``) or as a TypeVar's bound, and a def class in an annotation: types the
    rewritten values have too."""
    if not isinstance(node, (cst.Name, cst.Attribute)):
      return False
    name = unit.legacy(node)
    aliased = _in_type_alias(unit, node)
    annotated = aliased or unit.enclosing(node, (cst.Annotation,)) is not None
    if name == 'Optimizer' and (
        annotated or _typevar_bound(unit, node) or _class_alias(unit, node)):
      plan.edits[id(node)] = _rule.Edit(self)
      plan.needs.add(_edits.TRAIN_STATE)
    elif (name in _unit.BUILTIN_DEFS and annotated) or (name in _ALIASED and aliased):
      plan.edits[id(node)] = _rule.Edit(self, _ALIASED.get(name, TRANSFORMATION))
      plan.needs.add(_edits.OPTAX)
    else:
      return False
    records.append(Record(unit.path, unit.line(node), self.code, 'rewritten', 'bit-exact',
                          unit.code(node)))
    return True

  def rewrite(self, updated, data, context):
    new = cst.parse_expression(
        data if isinstance(data, str) else f'{context.train_state}.TrainState')
    if not isinstance(updated, cst.Annotation):   # the class inside an annotation, a bound
      return new
    head = annotation_head(updated.annotation)
    if head is updated.annotation:
      return updated.with_changes(annotation=new)
    return updated.deep_replace(head, new)


def _in_type_alias(unit, node) -> bool:
  """Whether ``node`` is a type inside a ``Name = typing.X[...]`` (``Union``, ``Optional``,
  ``Tuple``...) at module level or in a class body (ethanabrooks/jax-rl's ``class Optimizers:
  T = Union[optim.Adam, optim.Optimizer]``, read as ``critic: T``): a type alias, whose names
  are types only."""
  inner, parent = node, unit.parent(node)
  while isinstance(parent, (cst.Index, cst.SubscriptElement, cst.Subscript, cst.Tuple,
                            cst.List, cst.Element)):
    if isinstance(parent, cst.Subscript) and parent.value is inner:
      return False   # the subscripted thing itself, not a type argument of it
    inner, parent = parent, unit.parent(parent)
  if not (isinstance(inner, cst.Subscript) and isinstance(parent, cst.Assign)
          and parent.value is inner):
    return False
  block = unit.parent(unit.parent(parent))
  return ((block is unit.module or isinstance(unit.parent(block), cst.ClassDef))
          and any(n.startswith('typing.') for n in unit.names(inner.value)))


def _class_alias(unit, node) -> bool:
  """Whether ``node`` is the whole value of a module-level ``Name = optim.Optimizer`` that its
  file reads only in annotations, if at all (unified-io-inference's ``uio/model.py``, from t5x:
  ``Optimizer = optim.Optimizer``, read nowhere). Another file that imports the name reads the
  class the rewritten optimizers are; one that calls it as legacy's constructor
  (``Optimizer(opt_def, state, target)``) fails there with a ``TypeError``."""
  assign = unit.parent(node)
  target = _unit.sole_target(assign, value=node)
  if not (isinstance(target, cst.Name) and unit.parent(unit.parent(assign)) is unit.module):
    return False
  reads = _unit.accesses(unit, target)
  return reads is not None and all(
      unit.enclosing(read, (cst.Annotation,)) is not None for read in reads)


def _typevar_bound(unit, node) -> bool:
  """Whether ``node`` is the ``bound=`` of a ``typing.TypeVar(...)`` call."""
  arg = unit.parent(node)
  call = unit.parent(arg)
  return (isinstance(arg, cst.Arg) and arg.value is node and arg.keyword is not None
          and arg.keyword.value == 'bound' and isinstance(call, cst.Call)
          and 'typing.TypeVar' in unit.names(call.func))


RULE = Annotation()
