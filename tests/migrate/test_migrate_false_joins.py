"""migrate follows objects, not names: two values that only share a function or a field name are
not one object (uncertainty-baselines' jft, whose every optimizer was refused through them).

* A function that hands back its parameter (``load_checkpoint(tree, path)``: the tree restored
  with ``tree``'s structure, or one built from the file when ``tree`` is None) returns, at each
  call, what that call passes: ``load_checkpoint({'opt': opt}, path)`` holds the optimizer,
  ``load_checkpoint(None, path)`` does not (and so the dict that call returns, flattened by
  ``d.items()``, refused nothing).
* ``opt.target`` of an optimizer is its params: it holds no optimizer, whatever an unknown
  class's field named ``target`` holds elsewhere.
* ``x.optimizer`` of a variable bound to an instance of the project's class is that class's
  field, not a same-named field of another class (jaxfg's two ``CheckpointContents``).
"""
import os
import pathlib

import pytest

pytest.importorskip('libcst')

from flax_optim_compat._migrate import _engine  # pylint: disable=g-import-not-at-top
from flax_optim_compat._migrate import migrate_source  # pylint: disable=g-import-not-at-top
from flax_optim_compat._migrate import migrate_sources  # pylint: disable=g-import-not-at-top

# A helper that hands back its parameter (jft's ``load_checkpoint(tree, path)`` too: the tree
# restored with ``tree``'s structure, or one read from the file where ``tree`` is None), called
# with the optimizer and with a batch that is a plain dict.
PUT = '''import jax
from flax import optim


def maybe_put(tree, device):
  if device is not None:
    tree = jax.device_put(tree, device)
  return tree


def flatten(d):
  return dict(d.items())


def main(p, g, x, device):
  opt = optim.Adam(0.1).create(p)
  opt = maybe_put(opt, device)
  batch = maybe_put({'x': x}, device)
  flat = flatten(batch)
  return opt.apply_gradient(g), flat
'''


def test_a_function_that_returns_its_parameter_returns_what_each_call_passes():
  new, report = migrate_source(PUT)
  assert {r.status for r in report.records} == {'rewritten'}, report.summary(False)
  assert 'tx=optax.adam(' in new and 'from flax import optim' not in new
  assert 'return opt.apply_gradients(grads=g), flat' in new


def test_the_optimizer_a_call_passes_in_a_dict_is_followed_through_its_result():
  """``maybe_put({'opt': opt, 'step': 0}, device)['opt']`` is the optimizer: rewritten; the
  batch's call of the same helper still holds none."""
  source = PUT.replace('  opt = maybe_put(opt, device)\n',
                       "  state = maybe_put({'opt': opt, 'step': 0}, device)\n"
                       "  opt = state['opt']\n")
  new, report = migrate_source(source)
  assert {r.status for r in report.records} == {'rewritten'}, report.summary(False)
  assert 'return opt.apply_gradients(grads=g), flat' in new


def test_a_value_the_function_binds_to_the_parameter_is_what_it_returns_too():
  """``tree = make()`` inside the helper, ``make`` returning an optimizer: every call's result
  holds it (so the batch's too, read by ``.items`` and refused), never fewer objects."""
  source = PUT.replace('    tree = jax.device_put(tree, device)\n',
                       '    tree = make(device)\n').replace(
                           'def flatten(d):', 'def make(p):\n  return optim.Adam(0.2).create(p)'
                           '\n\n\ndef flatten(d):')
  _, report = migrate_source(source)
  assert any(r.status == 'refused' and 'd.items' in r.message for r in report.records), (
      report.summary(False))


# ``self.state.target`` of a class the analysis does not know holds a dict with an optimizer;
# ``evaluate(opt.target)`` passes another optimizer's params.
FIELD = '''import flax
from flax import optim


def evaluate(params, x):
  return flax.core.freeze(params), x


def keep(holder, opt):
  return holder.replace(target={'opt': opt})


def main(p, g, x, holder):
  opt = optim.Adam(0.1).create(p)
  opt = opt.apply_gradient(g)
  return evaluate(opt.target, x)
'''


def test_an_optimizers_target_is_its_params_not_an_unknown_classes_field():
  new, report = migrate_source(FIELD)
  assert [r for r in report.records if 'holds an optimizer' in r.message] == [], (
      report.summary(False))
  assert 'return evaluate(opt.params, x)' in new


@pytest.mark.parametrize('opt_def, transform', [
    ("getattr(optim, 'Momentum')(0.1)", 'jax.jit'), ("getattr(optim, 'Momentum')(0.1)", 'jax.vmap'),
    ('optim.Momentum(0.1, beta=0.9)', 'jax.pmap')])
def test_a_create_under_a_transform_migrate_does_not_rewrite_is_refused_naming_it(
    opt_def, transform):
  """``jax.jit(opt_def.create)(params)`` of a def the analysis does not trace to its call
  (jft's ``getattr(flax.optim, config.optim_name)(...)``), or under ``jax.pmap`` (no example
  measured it), is refused (FOM107) with its reason, and the file is left as it was. A traced
  def under ``jax.jit`` or ``jax.vmap`` is FOM001's (its examples ``create_jit``,
  ``create_vmap``)."""
  source = ('import jax\nfrom flax import optim\n\n\ndef main(params, g):\n'
            f'  opt_def = {opt_def}\n'
            f'  opt = {transform}(opt_def.create)(params)\n'
            '  return opt.apply_gradient(g)\n')
  new, report = migrate_source(source)
  assert report.exit_status() == 2
  (site,) = [r for r in report.records if f'{transform}(opt_def.create)(params) at' in r.message]
  assert (site.code, site.status, site.line) == ('FOM107', 'refused', 7)
  assert 'a create migrate does not rewrite' in site.message
  assert [l for l in new.splitlines() if 'TODO(flax-optim-compat)' not in l] == (
      source.splitlines())


# jaxfg's ``scripts/kitti/`` and ``scripts/flax_experiments/`` each hold a ``trainer.py`` with
# its own ``CheckpointContents`` class and its ``optimizer`` field, read back as
# ``checkpoint.optimizer`` of a variable bound to a restored instance. ``bad.py``'s optimizer is
# refused on its own (FOM115: a Python number as its target).
HOLDER = '''import dataclasses

import flax
from flax.training import checkpoints


@dataclasses.dataclass
class {cls}:
  optimizer: flax.optim.Optimizer
  note: str


def roundtrip(optimizer):
  template = {cls}(optimizer=optimizer, note='')
  contents: {cls} = checkpoints.restore_checkpoint('ckpt', target=template)
  return contents.optimizer


def roundtrip_again(optimizer):
  template = {cls}(optimizer=optimizer, note='')
  contents: {cls} = checkpoints.restore_checkpoint('ckpt', target=template)
  return contents.optimizer
'''
GOOD = '''import jax.numpy as jnp
import flax
from a import roundtrip

opt = flax.optim.Adam(0.1).create({'w': jnp.ones(2)})
opt = roundtrip(opt)
opt = opt.apply_gradient({'w': jnp.ones(2)})
'''
BAD = '''import flax
from b import roundtrip_again

opt = flax.optim.Adam(0.1).create(target=0.05)
opt = roundtrip_again(opt)
opt = opt.apply_gradient(1.0)
'''


def _good_and_bad(bad):
  _, report = migrate_sources({'a.py': HOLDER.format(cls='A'), 'b.py': HOLDER.format(cls='B'),
                               'good.py': GOOD, 'bad.py': bad})
  refused = {(r.path, r.line): r for r in report.records if r.status == 'refused'}
  assert refused[('bad.py', 4)].code == 'FOM115', report.summary(False)
  return report, {(r.path, r.line): r.status for r in report.records if r.path == 'good.py'}


def test_a_same_named_field_of_another_class_is_not_the_optimizers():
  """``contents.optimizer`` of an instance of ``B`` holds bad.py's optimizer, not good.py's,
  which only ``A``'s instances hold: good.py is rewritten (before, both were one object through
  the field ``optimizer`` of a class the analysis did not know, and good.py was refused)."""
  report, good = _good_and_bad(BAD)
  assert good == {('good.py', 5): 'rewritten', ('good.py', 7): 'rewritten'}, (
      report.summary(False))


def test_the_field_of_the_same_class_still_joins_the_objects_it_holds():
  """Both optimizers stored in ``A``'s field (through two functions, two parameters) are one
  object there: good.py is refused with bad.py's."""
  report, good = _good_and_bad(BAD.replace('from b import', 'from a import'))
  assert set(good.values()) == {'refused'}, report.summary(False)


# A loader in another module builds the holder and returns it (uncertainty-baselines'
# ``checkpoint_utils.maybe_load_checkpoint``); the script that reads the field imports neither
# jax nor flax, and beside it absl's ``FLAGS.optimizer`` is a string.
LOADER = '''import dataclasses
import flax


@dataclasses.dataclass
class CheckpointData:
  step: int
  optimizer: flax.optim.Optimizer


def make(params):
  return CheckpointData(0, flax.optim.Adam(0.1).create(params))


def load(params, fresh):
  if fresh:
    return make(params)
  data = CheckpointData(step=1, optimizer=flax.optim.Adam(0.1).create(params))
  return data
'''
READER = '''import ck


def main(params):
  data = ck.load(params, True)
  return data.optimizer.target
'''
FLAGGED = '''from absl import flags
import jax
import ck

flags.DEFINE_string('optimizer', 'adam', 'which')
FLAGS = flags.FLAGS


def main(params):
  hparams = {'optimizer': FLAGS.optimizer}
  assert hparams['optimizer'] == FLAGS.optimizer
  opt = ck.make(params).optimizer
  return jax.tree_util.tree_leaves(opt.target)
'''


def test_an_instance_a_function_of_another_file_returns_is_its_class():
  """``data = ck.load(p)``, every ``return`` of which is a ``CheckpointData`` (directly, through
  ``make``, through a variable): ``data.optimizer`` is that class's field. Before, the reader
  (no jax, no flax imported) kept ``.target`` with no record: a silent half-migration."""
  changed, report = migrate_sources({'ck.py': LOADER, 'main.py': READER})
  assert {r.status for r in report.records} == {'rewritten'}, report.summary(False)
  assert 'return data.optimizer.params' in changed['main.py']


def test_a_flag_of_a_library_global_is_not_a_field_that_holds_an_optimizer():
  """``FLAGS = flags.FLAGS``: ``FLAGS.optimizer`` is absl's flag (a string); it was joined with
  ``CheckpointData.optimizer`` by its name and the optimizer refused (FOM107 at the assert)."""
  changed, report = migrate_sources({'ck.py': LOADER, 'main.py': FLAGGED})
  assert {r.status for r in report.records} == {'rewritten'}, report.summary(False)
  assert "hparams = {'optimizer': FLAGS.optimizer}" in changed['main.py']
  assert 'tree_leaves(opt.params)' in changed['main.py']


# balloon-learning-environment (2022): two agents derive from a base that has no optimizer;
# one holds a flax.optim optimizer in ``self.optimizer``, the other an optax transformation
# under the same name, handed to a library.
AGENTS = {
    'agent.py': 'import abc\n\n\nclass Agent(abc.ABC):\n\n'
                '  def __init__(self, num_actions):\n    self._num_actions = num_actions\n',
    'dqn_agent.py': 'import optax\nfrom dopamine.jax.agents.dqn import dqn_agent\n\n'
                    'import agent\n\n\nclass DQNAgent(agent.Agent):\n\n'
                    '  def __init__(self, params):\n    super().__init__(3)\n'
                    '    self.optimizer = optax.sgd(0.1)\n'
                    '    self.optimizer_state = self.optimizer.init(params)\n\n'
                    '  def step(self, params, batch):\n'
                    '    return dqn_agent.train(params, self.optimizer, self.optimizer_state, batch)\n',
    'mlp_agent.py': 'from flax import optim\n\nimport agent\n\n\nclass MLPAgent(agent.Agent):\n\n'
                    '  def __init__(self, params):\n    super().__init__(3)\n'
                    '    self.optimizer = optim.GradientDescent(learning_rate=0.1).create(params)\n\n'
                    '  def step(self, grad):\n'
                    '    self.optimizer = self.optimizer.apply_gradient(grad)\n'
                    '    return self.optimizer.target\n',
}


def test_two_subclasses_of_a_base_without_the_field_each_have_their_own():
  """Before, the classes related by inheritance shared every field: DQNAgent's optax
  ``self.optimizer`` refused MLPAgent's (FOM107 'in dqn_agent.py:...') and dqn_agent.py, which
  uses no flax.optim object, got two markers. A base that names the field shares it."""
  changed, report = migrate_sources(AGENTS)
  assert {r.status for r in report.records} == {'rewritten'}, report.summary(False)
  assert sorted(changed) == ['mlp_agent.py'] and 'return self.optimizer.params' in (
      changed['mlp_agent.py'])
  shared = dict(AGENTS, **{'agent.py': AGENTS['agent.py'] + '\n  def lr(self):\n'
                                       '    return self.optimizer\n'})
  _, report = migrate_sources(shared)
  assert 'refused' in {r.status for r in report.records}, report.summary(False)


# modax's examples: the def and the optimizer made from it in one module variable, handed to a
# function of the same file whose parameter has the same name.
REBOUND = '''import jax
import jax.numpy as jnp
from flax import optim


def train({name}, n):
  for _ in range(n):
    grad = jax.tree_util.tree_map(jnp.ones_like, {name}.target)
    {name} = {name}.apply_gradient(grad)
  return {name}


params = {{'w': jnp.ones(3)}}
optimizer = optim.Adam(learning_rate=2e-3, beta1=0.99, beta2=0.99)
optimizer = optimizer.create(params)
optimizer = train(optimizer, 5)
print(optimizer.target)
'''


@pytest.mark.parametrize('name', ['optimizer', 'opt'])
def test_a_parameter_named_like_a_rebound_def_variable_is_its_own_variable(name):
  """``train``'s parameter ``optimizer`` holds the created optimizer passed to it: its reads
  (lines 8, 9) are not reads of the module's def variable. Before, they were (LibCST lists an
  inner scope's reads of the name among the module binding's references), and the whole object
  was refused FOM112 ("also read at train.py:8"); with the parameter named ``opt`` it migrated
  whole."""
  new, report = migrate_source(REBOUND.format(name=name))
  assert {r.status for r in report.records} == {'rewritten'}, report.summary(False)
  assert 'optimizer = optax.adam(' in new and 'optim.' not in new, new
  assert f'{name} = {name}.apply_gradients(grads=grad)' in new
  assert 'print(optimizer.params)' in new


INHERITED = pathlib.Path(__file__).resolve().parent / 'programs' / 'inherited_method'


def _inherited(extra=''):
  sources = {str(p): p.read_text() for p in sorted(INHERITED.rglob('*.py'))}
  example = str(INHERITED / 'examples' / 'mnist_example.py')
  sources[example] += extra
  _, report = _engine.migrate_sources(sources)
  return {(os.path.relpath(r.path, INHERITED), r.line, r.code): r.message
          for r in report.records}, report


def test_a_method_its_base_declares_too_is_the_nearest_in_the_mro():
  """distml: the user's operator calls ``self.register(optimizer=...)``; its base
  FlaxTrainingOperator defines register (storing the optimizer), and that class's base an
  abstract one. Python runs the nearest; so does the analysis now, following the optimizer into
  the operator, where it is refused for its real limits (FOM104 / FOM107 at
  flax_operator.py:26, ``self.optimizer.optimizer_def.create(...)``) with a record at each use.
  Before (1ebb11e): FOM107 "self.register is not a function or class of the given files (a
  library call ...)", false, and no record at flax_operator.py:21, 23, 26."""
  records, report = _inherited()
  assert {(path, line) for path, line, _ in records} == {
      ('examples/mnist_example.py', 13), ('pkg/operator/flax_operator.py', 21),
      ('pkg/operator/flax_operator.py', 23), ('pkg/operator/flax_operator.py', 26)}, (
          report.summary(False))
  assert ('pkg/operator/flax_operator.py', 26, 'FOM104') in records
  assert not any('library call' in m for m in records.values()), report.summary(False)


def test_a_method_a_subclass_overrides_too_is_refused_naming_the_classes():
  """The same with a subclass of the user's operator overriding register: which one runs
  depends on the instance, so the call is not followed, and the record says so, naming where
  each is defined (before: "not a function or class of the given files")."""
  records, report = _inherited('\n\nclass LoggingOperator(MnistOperator):\n'
                               '  def register(self, **kwargs):\n'
                               '    super().register(**kwargs)\n')
  message = records['examples/mnist_example.py', 14, 'FOM107']
  assert message == (
      'optimizer is passed to self.register(...) as optimizer= at mnist_example.py:14: '
      'register() is defined by 3 classes of the family of MnistOperator (at '
      'mnist_example.py:18, base_operator.py:2, flax_operator.py:12), and which one runs is not '
      "decided (a subclass of the receiver's class overrides it, or the class has several "
      'bases)'), message


def test_a_property_with_a_setter_holds_no_optimizer_until_one_reaches_it():
  """A property's setter joins its field and its parameter only where one of them holds an
  optimizer (netket's ``MCMixedState.sampler_diag`` setter of a sampler: before, every such
  pair was taken for an optimizer's, and the samplers' uses in files with no flax.optim, such
  as ``sa.sample_shape``, were refused FOM107 and marked 'a member flax 0.5.3's Optimizer does
  not have')."""
  state = ('class State:\n  def __init__(self, sampler):\n    self._sampler = sampler\n\n'
           '  @property\n  def sampler(self):\n    return self._sampler\n\n'
           '  @sampler.setter\n  def sampler(self, sampler):\n    self._sampler = sampler\n')
  bench = ('import state\n\n\ndef run(build):\n  sa = build()\n  s = state.State(sa)\n'
           '  s.sampler = sa\n  return sa.sample_shape, s.sampler.samples(3)\n')
  train = ('import jax\nfrom flax import optim\n\n\n'
           'def make(p):\n  return optim.Adam(0.1).create(p)\n')
  sources = {'state.py': state, 'bench.py': bench, 'train.py': train}
  new, report = migrate_sources(sources)
  assert new.get('bench.py', bench) == bench and new.get('state.py', state) == state
  assert {r.path for r in report.records} == {'train.py'}, report.summary(written=False)
  assert report.exit_status() == 1, report.summary(written=False)


def test_what_a_checkpoint_saves_is_what_its_tree_is_built_of():
  """The optimizers that share checkpoint files take one state layout (``_shared_layout``):
  one held in a dict through ``unreplicate(replicate(...))`` and one in a field of the user's
  train state are among them; one whose params alone are saved (``opt.target``) is not, and
  keeps its plain form."""
  common = ('import flax\nfrom typing import Any\n\n\n@flax.struct.dataclass\nclass State:\n'
            '  optimizer: Any\n  epoch: int\n')
  train = ('import jax\nfrom flax import jax_utils, optim\nfrom flax.training import checkpoints\n'
           '\n\ndef main(lr, g):\n  opt = optim.Adam(learning_rate=1.).create({"w": 1.})\n'
           '  opt = opt.apply_gradient(g, learning_rate=lr)\n'
           '  tree = {"opt": jax_utils.unreplicate(jax_utils.replicate(opt))}\n'
           '  checkpoints.save_checkpoint("ckpt", tree, 1)\n')
  evaluate = ('from flax import optim\nfrom flax.training import checkpoints\n\nimport common\n'
              '\n\ndef main():\n  opt = optim.Adam(learning_rate=1.).create({"w": 0.})\n'
              '  return checkpoints.restore_checkpoint("ckpt", common.State(opt, 0))\n\n\n'
              'def other():\n  opt = optim.Momentum(learning_rate=1.).create({"w": 0.})\n'
              '  checkpoints.save_checkpoint("x", opt.target, 1)\n')
  new, report = migrate_sources({'common.py': common, 'train.py': train, 'evaluate.py': evaluate})
  assert report.exit_status() == 1, report.summary(written=False)
  assert 'tx=optax.inject_hyperparams(optax.adam, ' in new['evaluate.py'], new['evaluate.py']
  assert 'tx=optax.sgd(learning_rate=1., momentum=0.9' in new['evaluate.py'], new['evaluate.py']


def test_an_optimizer_that_cannot_set_its_rate_at_each_update_keeps_its_mode():
  """A restored optimizer updated without a learning rate, its def's a variable: injected, its
  updates could not set the def's, so it keeps its plain form and is rewritten (before, it was
  refused FOM108, and a second run of migrate on the output rewrote it: shayan-kousha/SurVAE)."""
  train = ('from flax import optim\nfrom flax.training import checkpoints\n\n\n'
           'def main(lr, g):\n  opt = optim.Adam(learning_rate=1.).create({"w": 1.})\n'
           '  opt = opt.apply_gradient(g, learning_rate=lr)\n'
           '  checkpoints.save_checkpoint("ckpt", opt, 1)\n')
  resume = ('from flax import optim\nfrom flax.training import checkpoints\n\n\n'
            'def main(lr, g):\n  opt = optim.Adam(learning_rate=lr).create({"w": 0.})\n'
            '  opt = checkpoints.restore_checkpoint("ckpt", opt)\n'
            '  return opt.apply_gradient(g)\n')
  new, report = migrate_sources({'train.py': train, 'resume.py': resume})
  assert report.exit_status() == 1, report.summary(written=False)
  assert 'tx=optax.adam(learning_rate=lr, ' in new['resume.py'], new['resume.py']
