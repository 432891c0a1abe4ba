"""Refusal codes: what ``migrate`` never rewrites, each with a one-line reason.

A refused optimizer object is left exactly as it is; every site that blocks it gets a marker
``# TODO(flax-optim-compat): CODE reason`` (added once) and a report record.
"""
from typing import NamedTuple

GUIDE = 'docs/migrate.md'
MARKER = '# TODO(flax-optim-compat):'


class Refusal(NamedTuple):
  code: str
  reason: str


SUBCLASS = Refusal('FOM101', 'a user subclass of OptimizerDef has no optax equivalent to emit')
GROUP_HYPER_PARAMS = Refusal(
    'FOM102', 'a per-group hyper_params=[...] override migrate does not read: element i must be '
    'hyper_params[i] of the applied MultiOptimizer created in sight, or its '
    '.replace(learning_rate=...)')
WEIGHT_NORM = Refusal('FOM103', 'WeightNorm reparameterises the params; optax has no equivalent')
READ = Refusal('FOM104', 'reads legacy internals (optimizer_def / hyper_params / param_states / '
               'state_dict / state) that a TrainState does not have')
PRE_LINEN = Refusal('FOM105', 'optimizes a pre-Linen flax.nn model, which current flax cannot '
                    'run')
REPLICATE = Refusal('FOM106', 'optimizer.replicate() averages gradients over a pmap axis; no '
                    'visible pmap(axis_name=...) says which')
ESCAPE = Refusal('FOM107', 'the optimizer reaches code the analysis cannot follow, so not all of '
                 'its uses can be rewritten')
# FOM107's other case (not in ALL, one code per entry): a member no legacy Optimizer has
# (SampsonML/score_network_jax's ``optimizer.update(grads, model)``), its marker saying so.
NO_MEMBER = Refusal('FOM107', "uses a method or field that flax 0.5.3's Optimizer does not have "
                    'either: the program fails there as it is (AttributeError), so it is left '
                    'as it is')
LR_NONE = Refusal('FOM108', 'a learning_rate=None optimizer applied without a learning_rate= '
                  'override has no learning rate')
OVERRIDE = Refusal('FOM109', 'an apply_gradient / optimize override of a hyper-parameter other '
                   'than learning_rate, or an argument that is no override')
# The message of a positional argument after the gradients (meta-pde's apply_gradient(grads, hess)).
POSITIONAL = (': a positional argument after the gradients, which is no override: legacy\'s '
              'apply_gradient(grads, **overrides) raised TypeError on it, so this call failed '
              'before migrate too')
# The message of overrides unpacked from a mapping (htn-ml-productivity-workshop's
# apply_gradient(grad, **optimizer_hparams), its keys built by a schedule passed in).
UNPACKED = (': the overrides are unpacked from a mapping, so which hyper-parameters they set is '
            'known only at run time; migrate rewrites a learning_rate= written by name (write '
            'each override by name, e.g. learning_rate=hp[\'learning_rate\'], to migrate it)')
UNKNOWN_DEF = Refusal('FOM110', 'an optimizer def that is not one of the built-in flax.optim '
                      'optimizers')
MULTI = Refusal('FOM111', 'a MultiOptimizer whose traversals or groups are not literal '
                '(ModelParamTraversal(filter) with a built-in optimizer)')
UNFOLLOWED = Refusal('FOM112', 'a flax.optim name is used where the analysis cannot follow it '
                     '(e.g. a def passed to a function), so it was left as it is')
OPTIMIZE = Refusal('FOM113', 'optimizer.optimize(loss_fn) is rewritten only as a statement of its '
                   'own, new, loss[, aux] = opt.optimize(loss_fn[, learning_rate=lr]), on a name '
                   'or attribute')
UNPARSED = Refusal('FOM114', 'a file that does not parse may use this optimizer (it names '
                   'flax.optim, or imports the file that holds it), so not all of its uses can '
                   'be seen')
NUMBER_TARGET = Refusal('FOM115', 'the target is a Python number or a single array, which a '
                       'TrainState cannot hold (its create and apply_gradients read params as a '
                       'container of arrays)')
# Not a refusal: a rewrite that is kept, flagged with a marker because it is not exact.
NOT_EXACT = 'FOM009'
NOT_PARSED = Refusal('FOM198', 'the file does not parse, so it was left as it was')
FAILED = Refusal('FOM199', 'the rewritten file did not compile, so it was left as it was')
# FOM198's other case (one code per entry of ALL): a file LibCST parses and Python refuses.
NOT_COMPILED = Refusal('FOM198', 'the file as given does not compile (Python refuses it before any '
                       'rewrite), so it was left as it was')

# FOM299, of the removed jax names' codemod (``_jax_names``): a name left as it is, and why.
UNREWRITTEN = 'FOM299'
UNREWRITTEN_REASON = ('a removed jax name is used where no rule rewrites it exactly, so it was '
                      'left as it is (the file still needs the runtime layer)')
MISSING_REASON = ("a jax name that today's jax (or jaxlib) does not have and no rule rewrites, "
                  "so it was left as it is (the file fails there on today's jax)")
NN_ANNOTATION = ("a removed flax name annotates a value, evaluated when its def runs: today's "
                 'flax (and this package) has no flax.nn, so the file fails at import, and no '
                 'rule knows the type the value has, so it was left as it is')

ALL = (SUBCLASS, GROUP_HYPER_PARAMS, WEIGHT_NORM, READ, PRE_LINEN, REPLICATE, ESCAPE, LR_NONE,
       OVERRIDE, UNKNOWN_DEF, MULTI, UNFOLLOWED, OPTIMIZE, UNPARSED, NOT_PARSED, FAILED)


def marker_text(refusal: Refusal) -> str:
  """The comment line put above a blocking site."""
  return f'{MARKER} {refusal.code} {refusal.reason} (see {GUIDE})'
