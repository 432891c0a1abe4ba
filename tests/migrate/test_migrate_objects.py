"""migrate follows objects, not names: a same-named attribute of another class, of another
framework's optimizer, in a file that never sees jax or flax, is not a flax.optim object.

The program (tests/migrate/programs/agents/) is a folder as a user passes it: a JAX agent on
``flax.optim.RMSProp`` (its optimizer in ``self.optimizer``) and a TensorFlow agent in another
file whose ``self.optimizer.minimize(...)`` is a ``tf.compat.v1`` optimizer. The JAX agent is
rewritten whole and runs both ways (legacy on this package; migrated where neither this package
nor flax.optim can be imported) to the same numbers; the TensorFlow file is left byte for byte.
"""
import pathlib
import shutil

import pytest

from tests import _migrate_harness as harness

PROGRAM = pathlib.Path(__file__).resolve().parent / 'programs' / 'agents'


@pytest.fixture(scope='module')
def migrated(tmp_path_factory):
  pytest.importorskip('libcst')
  root = tmp_path_factory.mktemp('objects')
  folder = root / 'agents'
  shutil.copytree(PROGRAM, folder)
  migration = harness.migrate_folder(folder)
  return root, folder, migration


def test_a_same_named_attribute_of_another_framework_is_not_followed(migrated):
  _, folder, migration = migrated
  assert (folder / 'tf_agent.py').read_text() == (PROGRAM / 'tf_agent.py').read_text()
  assert migration.report['exit_status'] == 1, migration.stderr
  assert not [r for r in migration.report['sites'] if r['status'] != 'rewritten']
  assert [pathlib.Path(p).name for p in migration.report['changed_files']] == ['jax_agent.py']


def test_the_jax_agent_runs_both_ways_to_the_same_numbers(migrated):
  root, folder, migration = migrated
  before = harness.run_before(PROGRAM / 'jax_agent.py', cwd=root, env=harness.legacy_env(root))
  after = harness.run_after(folder / 'jax_agent.py', cwd=root)
  claim = migration.exactness(folder / 'jax_agent.py')
  harness.assert_equivalent(harness.trajectory(before.stdout), harness.trajectory(after.stdout),
                            claim, label='jax_agent.py')


def test_an_optimizer_bound_by_functools_partial_is_a_parameter_of_the_function():
  from flax_optim_compat._migrate import migrate_source  # pylint: disable=g-import-not-at-top
  source = ('import functools\n\nimport jax\nimport jax.numpy as jnp\nfrom flax import optim\n\n\n'
            'def loss_fn(lagrange, params):\n'
            '  return jnp.sum(params["w"] * lagrange.target["m"])\n\n\n'
            'def run(p):\n  lagrange = optim.Adam(0.1).create({"m": jnp.ones(2)})\n'
            '  return jax.grad(functools.partial(loss_fn, lagrange))(p)\n')
  new, report = migrate_source(source)
  assert report.exit_status() == 1, report.summary(written=False)
  assert 'lagrange.params["m"]' in new and 'optim' not in new.replace('optax', '')
