"""The rule FOM017 (_migrate/rules/fom017_pickle.py): its examples, in the folder beside this
file (run both ways by tests/migrate/test_migrate_equivalence.py), and its own tests."""
import pickle

import pytest

libcst = pytest.importorskip('libcst')

from flax_optim_compat._migrate import migrate_source  # pylint: disable=g-import-not-at-top

# Example name -> how closely its legacy and migrated runs agree (measured: equal trajectories).
# pickle_unreplicated: mobilenerf's shape, an Adam whose rate is given per step, replicated and
# pmapped, unreplicated and pickle.dump'ed every 5 steps, one file loaded back into the same
# variable, its .target read and trained on. pickle_bytes: pickle.dumps / pickle.loads of a
# Momentum trained under jit, trained on from the loaded state. pickle_handed_on: a replicated
# Momentum loaded into a variable of its own that is then replicated, and loaded and replicated
# in one expression. pickle_trainer_field: an Adam in a class's field, pickled by one method and
# loaded by another (the template: the field __init__ binds). pickle_loader: an Adam loaded back
# through the program's own load(path), whose return is pickle.load(f) (the call is the load),
# beside a call of it that loads a pickle of no optimizer (left as it is).
EXAMPLES = {
    'pickle_unreplicated': 'bit-exact',
    'pickle_bytes': 'bit-exact',
    'pickle_handed_on': 'bit-exact',
    'pickle_trainer_field': 'bit-exact',
    'pickle_loader': 'bit-exact',
}

_PRELUDE = ('import pickle\nimport jax.numpy as jnp\nfrom flax import optim\n\n'
            'p = {"w": jnp.ones(3)}\n')


def _migrate(body):
  source = _PRELUDE + body
  new, report = migrate_source(source, 'train.py')
  return source, new, report


def _blockers(report):
  """The refusals that name a limit (not the "not rewritten" records of the object's others)."""
  return [r for r in report.records if r.status == 'refused' and 'not rewritten' not in r.message]


def test_a_train_state_cannot_be_pickled_and_its_state_dict_can():
  """Why the dump writes the state dict: measured on the TrainState the create becomes."""
  optax = pytest.importorskip('optax')
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  from flax import serialization  # pylint: disable=g-import-not-at-top
  from flax.training import train_state  # pylint: disable=g-import-not-at-top
  state = train_state.TrainState.create(apply_fn=None, params={'w': jnp.ones(3)},
                                        tx=optax.adam(0.1))
  with pytest.raises((AttributeError, pickle.PicklingError), match='local object'):
    pickle.dumps(state)
  loaded = serialization.from_state_dict(
      state, pickle.loads(pickle.dumps(serialization.to_state_dict(state))))
  assert loaded.tx is state.tx and loaded.params['w'].tolist() == [1.0, 1.0, 1.0]


def test_the_report_says_what_the_file_holds_and_that_old_pickles_do_not_load():
  _, new, report = _migrate("opt = optim.Adam(0.1).create(p)\n"
                            "pickle.dump(obj=opt, file=open('s.pkl', 'wb'))\n"
                            "opt = pickle.load(open('s.pkl', 'rb'))\n")
  assert "pickle.dump(obj=flax.serialization.to_state_dict(opt), file=" in new, new
  assert "opt = flax.serialization.from_state_dict(opt, pickle.load(open(" in new, new
  dump, load = [r for r in report.records if r.code == 'FOM017']
  assert (dump.line, load.line) == (7, 8)
  assert 'the file holds a dict of the TrainState\'s fields' in dump.message
  assert 'no longer a legacy Optimizer object' in dump.message
  for record in (dump, load):
    assert 'pickles the legacy program wrote hold flax.optim objects' in record.message
    assert "program's load does not take; `flax-optim-compat convert` reads msgpack" in (
        record.message)
  assert 'its optax transform from opt' in load.message


def test_a_load_with_no_template_bound_before_it_is_refused_naming_the_limit():
  source, new, report = _migrate(
      "import os\nif os.path.exists('s.pkl'):\n  opt = pickle.load(open('s.pkl', 'rb'))\n"
      "else:\n  opt = optim.Adam(0.1).create(p)\npickle.dump(opt, open('s.pkl', 'wb'))\n")
  assert 'optax' not in new
  blockers = _blockers(report)
  assert [(r.line, r.code) for r in blockers] == [(8, 'FOM107')], report.records
  assert ('no variable of the same optimizer is bound in the module before this line'
          in blockers[0].message), blockers[0].message


def test_a_field_loaded_in_a_method_takes_the_field_init_binds_and_no_other():
  """``self.opt`` in a method other than ``__init__`` is bound once ``__init__`` ran; a field
  ``__init__`` binds only under an ``if`` may be unbound: the load is refused."""
  cls = ("class T:\n  def __init__(self, fresh):\n{init}\n"
         "  def load(self, path):\n    self.opt = pickle.load(open(path, 'rb'))\n"
         "    return self.opt.target\n\n  def save(self, path):\n"
         "    pickle.dump(self.opt, open(path, 'wb'))\n")
  _, new, _ = _migrate(cls.format(init='    self.opt = optim.Adam(0.1).create(p)'))
  assert 'self.opt = flax.serialization.from_state_dict(self.opt, pickle.load(' in new, new
  _, new, report = _migrate(cls.format(
      init='    if fresh:\n      self.opt = optim.Adam(0.1).create(p)'))
  assert 'optax' not in new
  assert any('no variable of the same optimizer is bound in function load' in r.message
             for r in report.records), report.records


def test_a_load_held_where_no_optimizer_is_and_used_as_one_refuses_the_pickled_object():
  """``restored = pickle.load(f)`` read as ``restored.target``: the analysis holds no optimizer
  in ``restored``, so that read would stay legacy on a state dict."""
  source, new, report = _migrate(
      "opt = optim.Adam(0.1).create(p)\npickle.dump(opt, open('s.pkl', 'wb'))\n"
      "restored = pickle.load(open('s.pkl', 'rb'))\nprint(restored.target)\n")
  assert 'optax' not in new
  blockers = _blockers(report)
  assert [(r.line, r.code) for r in blockers] == [(8, 'FOM107')], report.records
  assert 'used as one (read as restored.target at train.py:9)' in blockers[0].message


def test_a_load_in_a_program_that_pickles_no_optimizer_is_left_as_it_is():
  """The file is none the rewrite writes (a legacy pickle read as it was): no record."""
  _, new, report = _migrate("opt = optim.Adam(0.1).create(p)\n"
                            "old = pickle.load(open('legacy.pkl', 'rb'))\nprint(old.target)\n")
  assert "old = pickle.load(open('legacy.pkl', 'rb'))" in new
  assert [r.code for r in report.records if r.status == 'refused'] == []


def test_an_optimizer_pickled_inside_a_tuple_stays_refused():
  _, new, report = _migrate("opt = optim.Adam(0.1).create(p)\n"
                            "pickle.dump((opt, 3), open('s.pkl', 'wb'))\n")
  assert 'optax' not in new
  assert any(r.code == 'FOM107' and 'is put in (opt, 3)' in r.message
             for r in report.records), report.records


_SAVE = "def save(path, value):\n  with open(path, 'wb') as f:\n    pickle.dump(value, f)\n\n"


def test_a_save_helper_that_also_pickles_other_values_is_refused_naming_the_call():
  """``save(path, value)`` called with the optimizer and with a list: ``to_state_dict`` of the
  list is a dict of its items, so the rewrite would change that file (and the load of it)."""
  _, new, report = _migrate(_SAVE + "opt = optim.Adam(0.1).create(p)\nsave('o.pkl', opt)\n"
                            "save('x.pkl', [1.0, 2.0])\n")
  assert 'optax' not in new and 'to_state_dict' not in new
  blockers = _blockers(report)
  assert [(r.line, r.code) for r in blockers] == [(8, 'FOM107')], report.records
  assert ("save() is also called at train.py:12 with [1.0, 2.0], which holds no optimizer"
          in blockers[0].message)


def test_a_save_helper_called_only_with_optimizers_is_rewritten():
  _, new, report = _migrate(_SAVE + "opt = optim.Adam(0.1).create(p)\nsave('o.pkl', opt)\n"
                            "save('o2.pkl', optim.Momentum(0.1).create(p))\n")
  assert 'pickle.dump(flax.serialization.to_state_dict(value), f)' in new, new
  assert [r for r in report.records if r.status == 'refused'] == []


def test_a_value_that_holds_the_optimizer_in_a_field_is_refused_where_it_is_pickled():
  """Its TrainState field could not be pickled; a pickled params dict is no such value."""
  _, new, report = _migrate(
      "import flax\n\n@flax.struct.dataclass\nclass State:\n  optimizer: optim.Optimizer\n\n"
      "opt = optim.Adam(0.1).create(p)\nstate = State(optimizer=opt)\n"
      "pickle.dump(state, open('s.pkl', 'wb'))\npickle.dump(opt.target, open('v.pkl', 'wb'))\n")
  assert 'optax' not in new
  blockers = _blockers(report)
  assert [(r.line, r.code) for r in blockers] == [(14, 'FOM107')], report.records
  assert blockers[0].message.startswith('state is pickled by pickle.dump(...) at train.py:14 '
                                        'and holds the optimizer in a field')


def test_a_legacy_pickle_carried_over_by_convert_continues_the_legacy_numbers():
  """The route the report names for the legacy program's pickles: the Optimizer loaded where
  flax.optim imports, its msgpack converted, its state dict loaded as the migrated program
  loads its own pickles; trained on, equal to legacy training on from the same pickle."""
  optax = pytest.importorskip('optax')
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  from flax import serialization  # pylint: disable=g-import-not-at-top
  from flax.training import train_state  # pylint: disable=g-import-not-at-top
  from flax_optim_compat import convert  # pylint: disable=g-import-not-at-top
  from flax_optim_compat import Adam  # pylint: disable=g-import-not-at-top

  def loss_fn(params):
    return jnp.sum((params['w'] - jnp.array([1.0, -2.0, 0.5])) ** 2)

  legacy = Adam(learning_rate=0.1).create({'w': jnp.zeros(3)})
  for _ in range(3):
    legacy = legacy.apply_gradient(jax.grad(loss_fn)(legacy.target))
  old_pickle = pickle.dumps(legacy)
  carried = convert.convert_checkpoint(serialization.to_bytes(pickle.loads(old_pickle)),
                                       Adam(learning_rate=0.1),
                                       tx=optax.adam(learning_rate=0.1, b1=0.9, b2=0.999,
                                                     eps=1e-08))
  new_pickle = pickle.dumps(serialization.to_state_dict(carried.train_state))
  template = train_state.TrainState.create(
      apply_fn=None, params={'w': jnp.zeros(3)},
      tx=optax.adam(learning_rate=0.1, b1=0.9, b2=0.999, eps=1e-08))
  state = serialization.from_state_dict(template, pickle.loads(new_pickle))
  legacy = pickle.loads(old_pickle)
  # Both steps compiled, as training runs them (eager optax rounds an op differently).
  legacy_step = jax.jit(lambda o: o.apply_gradient(jax.grad(loss_fn)(o.target)))
  step = jax.jit(lambda s: s.apply_gradients(grads=jax.grad(loss_fn)(s.params)))
  for _ in range(3):
    legacy, state = legacy_step(legacy), step(state)
  assert int(state.step) == int(legacy.state.step) == 6
  assert jnp.array_equal(state.params['w'], legacy.target['w']), (state.params, legacy.target)
