"""A factory that returns one of its nested functions, chosen by an ``if`` on a parameter
(score_flow's ``optimization_manager(config, deq_score_joint=False)``): a call of what it returns
runs the function of the branch the call takes, where the call decides the test (the
parameter bound to a literal, or left to its literal default, and bound nowhere else in the
factory). Otherwise both stay possible, and a result used as the optimizer is refused.

The program of tests/migrate/examples/objects/factory_branch/ (score_flow's step, in two files)
is rewritten whole and run both ways by test_migrate_objects.py; here, which tests a call
decides and what is refused.
"""
import pytest

pytest.importorskip('libcst')

from flax_optim_compat._migrate import migrate_source  # pylint: disable=g-import-not-at-top

# ``{test}``: the factory's ``if``; ``{call}``: how the program calls the factory.
_FACTORY = '''\
import functools

import flax
import jax
import jax.numpy as jnp
from flax import optim


@flax.struct.dataclass
class State:
  optimizer: optim.Optimizer


def optimization_manager(scale, joint=False, mode='plain'):
{rebind}  def optimize_fn(state, grad):
    return state.optimizer.apply_gradient(jax.tree_util.tree_map(lambda g: g * scale, grad))

  def optimize_joint_fn(state, grad):
    return (state.deq_optimizer.apply_gradient(grad['deq']),
            state.score_optimizer.apply_gradient(grad['score']))

  if {test}:
    return optimize_joint_fn
  else:
    return optimize_fn


def get_step_fn(optimize_fn=None):
  def step(state, grad):
    new_optimizer = optimize_fn(state, grad)
    return state.replace(optimizer=new_optimizer), new_optimizer.target
  return step


def main(flag):
  state = State(optimizer=optim.GradientDescent(learning_rate=0.1).create({{'w': jnp.ones(3)}}))
  optimize_fn = {call}
  state, params = get_step_fn(optimize_fn=optimize_fn)(state, {{'w': jnp.ones(3)}})
  print(params['w'].tolist(), state.optimizer.target['w'].tolist())
'''


def _migrate(test, call, rebind=''):
  source = _FACTORY.format(test=test, call=call, rebind=rebind)
  new, report = migrate_source(source, 'train.py')
  return new, report


@pytest.mark.parametrize('test, call', [
    ('joint', 'optimization_manager(1.0)'),                    # the default, no call passes it
    ('joint', 'optimization_manager(1.0, False)'),             # a literal, by position
    ('joint', 'optimization_manager(1.0, joint=0)'),           # a falsy literal
    ('not joint', 'optimization_manager(1.0, joint=True)'),    # negated
    ("mode == 'joint'", 'optimization_manager(1.0)'),          # compared with a literal
    ("mode != 'plain'", "optimization_manager(1.0, mode='plain')"),
])
def test_a_branch_the_call_decides_resolves_to_the_function_it_returns(test, call):
  new, report = _migrate(test, call)
  assert report.records and all(r.status == 'rewritten' for r in report.records), [
      (r.line, r.code, r.message) for r in report.records]
  assert 'new_optimizer.params' in new and 'new_optimizer.target' not in new, new
  assert 'state.optimizer.apply_gradients(grads=' in new, new
  # The branch not taken is left as it was: no optimizer flows there.
  assert "state.deq_optimizer.apply_gradient(grad['deq'])" in new, new


@pytest.mark.parametrize('test, call, rebind', [
    ('joint', 'optimization_manager(1.0, joint=flag)', ''),     # known only at run time
    ('joint', 'optimization_manager(1.0, **{"joint": False})', ''),   # a **kwargs binds it
    ('joint', 'optimization_manager(1.0)', '  joint = not joint\n'),  # bound again
    ('joint or mode', 'optimization_manager(1.0)', ''),         # a test of two parameters
    ('scale > 0', 'optimization_manager(1.0)', ''),             # not ==, !=, not, or itself
    # a partial may bind the parameter: the call's own arguments do not decide it
    ('joint', 'functools.partial(optimization_manager, joint=True)(1.0)', ''),
    ('not joint', 'functools.partial(optimization_manager, joint=True)(1.0)', ''),
])
def test_a_branch_the_call_does_not_decide_refuses_the_result_used_as_an_optimizer(
    test, call, rebind):
  new, report = _migrate(test, call, rebind)
  refused = [r for r in report.records if r.status == 'refused']
  assert refused and report.exit_status() == 2
  assert 'optax' not in new
  blockers = [r for r in refused if 'not rewritten' not in r.message]
  assert [r.code for r in blockers] == ['FOM107'], [(r.line, r.message) for r in refused]
  message = blockers[0].message
  assert 'optimize_fn(state, grad)' in message, message
  # It names the factory, the ``if`` and its line, and what a decided test is.
  line = _FACTORY.format(test=test, call=call, rebind=rebind).splitlines().index(
      f'  if {test}:') + 1
  assert (f'optimization_manager() returns a different function in each branch of `if {test}:` '
          f'at train.py:{line}, which that call does not decide') in message, message


def test_a_return_after_an_if_the_call_takes_and_that_returns_is_never_reached():
  """``if not joint: return optimize_joint_fn`` then ``return optimize_fn``: a call taking the
  ``if`` (``joint`` left to its default ``False``) returns there, so the last ``return`` is
  never reached and the call runs ``optimize_joint_fn``, rewritten whole. Before, both
  ``return``s counted for it, the call resolved to no function, and it was refused. Where the
  call does not decide the test, both still count, and the result is refused."""
  source = _FACTORY.format(test='not joint', call='optimization_manager(1.0)', rebind='')
  source = source.replace('  else:\n    return optimize_fn\n', '  return optimize_fn\n').replace(
      "(state.deq_optimizer.apply_gradient(grad['deq']),\n"
      "            state.score_optimizer.apply_gradient(grad['score']))",
      'state.optimizer.apply_gradient(grad)')
  new, report = migrate_source(source, 'train.py')
  assert report.exit_status() == 1 and all(r.status == 'rewritten' for r in report.records), (
      report.summary(False))
  assert 'return state.optimizer.apply_gradients(grads=grad)' in new, new
  assert 'new_optimizer.params' in new, new
  _, report = migrate_source(source.replace('(1.0)', '(1.0, joint=flag)'), 'train.py')
  assert report.exit_status() == 2
  assert {r.code for r in report.records if r.status == 'refused'} == {'FOM107'}


# balloon-learning-environment (2021): a gin-configurable factory of the def, created from in
# the agent, and its def read by a test (``.hyper_params``, ``isinstance``).
_DEF_FACTORY = '''import flax
from flax import optim


def create_optimizer(learning_rate=0.001):
  return optim.GradientDescent(learning_rate=learning_rate)


class Agent:
  def __init__(self, params):
    optimizer_def = create_optimizer()
    self.optimizer = optimizer_def.create(params)

  def step(self, grad):
    self.optimizer = self.optimizer.apply_gradient(grad)
    return self.optimizer.target


def other_use():
{use}
'''


@pytest.mark.parametrize('use, how', [
    ('  optim = create_optimizer()\n  return optim.hyper_params.learning_rate',
     'read as optim.hyper_params, which an optax transformation does not have (at agent.py:21)'),
    ('  return create_optimizer().hyper_params',
     'read as create_optimizer().hyper_params, which an optax transformation does not have'),
    ('  opt_def = create_optimizer()\n  assert isinstance(opt_def, flax.optim.sgd.GradientDescent)',
     'checked with isinstance(opt_def, flax.optim.sgd.GradientDesc..., a legacy class an optax '
     'transformation is not (at agent.py:21)'),
])
def test_a_factorys_def_read_elsewhere_keeps_its_optimizers_legacy(use, how):
  """Before, the agent's create and steps were rewritten (3 sites, 0 refused) and the other
  call's read left as it was, with no record: a silent half-migration (AttributeError: no
  ``hyper_params`` on an optax transformation)."""
  new, report = migrate_source(_DEF_FACTORY.format(use=use), 'agent.py')
  assert {r.status for r in report.records} == {'refused'}, report.summary(False)
  (create,) = [r for r in report.records if r.line == 12]
  assert create.message.startswith('create_optimizer() returns this def, and the def its call '
                                   'at agent.py:') and how in create.message, report.summary(False)
  assert 'self.optimizer.target' in new and 'optax' not in new


# StatefulOdeNets (2021): the def a factory returns is bound to a variable that is also handed
# to the experiment's logger (which reads its ``hyper_params``), then created from.
_DEF_PASSED = '''import jax
import jax.numpy as jnp
from flax import optim


def make_optimizer(which, learning_rate):
  if which == 'Adam':
    return optim.Adam(learning_rate=learning_rate)
  return optim.Momentum(learning_rate=learning_rate)


def save_hyper_params(optimizer_def):
  return repr(optimizer_def.hyper_params)


@jax.jit
def step(optimizer, lr):
  grad = jax.grad(lambda p: jnp.sum(p['w'] ** 2))(optimizer.target)
  return optimizer.apply_gradient(grad, learning_rate=lr)


def main(which):
  optimizer_def = {make}
  save_hyper_params(optimizer_def)
  optimizer = optimizer_def.create({{'w': jnp.ones(3)}})
  optimizer = step(optimizer, 0.1)
  return optimizer.target
'''


@pytest.mark.parametrize('make', ["make_optimizer(which, 0.1)", "optim.Adam(learning_rate=0.1)"])
def test_a_def_variable_passed_beside_its_create_keeps_every_site_of_its_optimizer_named(make):
  """Before, the def (or the factory's returns) was refused FOM112 with a reason that was false
  for the factory ("does not resolve the callee"), and the create, the step's ``.target`` and
  ``apply_gradient`` and the last ``.target`` had no record at all (left legacy unnamed)."""
  new, report = migrate_source(_DEF_PASSED.format(make=make), 'train.py')
  assert {r.status for r in report.records} == {'refused'}, report.summary(False)
  lines = {r.line for r in report.records}
  assert {18, 19, 25, 27} <= lines, report.summary(False)   # .target, apply, create, .target
  (create,) = [r for r in report.records if r.line == 25]
  assert create.code == 'FOM112' and 'also read at train.py:24 (save_hyper_params(' in (
      create.message), create.message
  assert not any('does not resolve' in r.message for r in report.records), report.summary(False)
  assert 'optax' not in new and 'optimizer.apply_gradient(grad, learning_rate=lr)' in new


def test_the_class_of_an_isinstance_check_is_named_as_such():
  source = _DEF_FACTORY.format(use='  return isinstance(1, optim.Adam)')
  _, report = migrate_source(source, 'agent.py')
  (check,) = [r for r in report.records if r.line == 20]
  assert check.message == ('optim.Adam: the type of an isinstance(...) check at agent.py:20: an '
                           'optax transformation has no class per optimizer, so the check has '
                           'no optax form'), report.summary(False)
