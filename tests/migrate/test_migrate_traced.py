"""``jax.make_jaxpr(step)(optimizer, ...)`` is followed as ``jax.jit(step)(optimizer, ...)`` is:
the optimizer reaches ``step``'s parameter, and the result (a jaxpr, not what ``step`` returns)
is no optimizer. The migrated program traces on today's jax where neither this package nor
flax.optim can be imported, and its jitted steps give legacy's numbers."""
import pytest

from tests import _migrate_harness as harness

SOURCE = '''\
import json

import jax
import jax.numpy as jnp
from flax import optim


def main():
  params = {'w': jnp.array([1.0, -2.0, 0.5])}
  optimizer = optim.Momentum(learning_rate=0.1, beta=0.9).create(params)
  batch = jnp.array([0.3, 0.2, -0.4])

  def train_step(optimizer, batch):
    grad = jax.grad(lambda p: jnp.sum((p['w'] * batch - 1.0) ** 2))(optimizer.target)
    new_optimizer = optimizer.apply_gradient(grad)
    return new_optimizer

  jaxpr = jax.make_jaxpr(train_step)(optimizer, batch)
  assert jaxpr.eqns and jaxpr.consts is not None
  traced = jax.make_jaxpr(train_step)
  assert len(traced(optimizer, batch).eqns) == len(jaxpr.eqns)
  step = jax.jit(train_step)
  for _ in range(3):
    optimizer = step(optimizer, batch)
  print(json.dumps([float(v) for v in optimizer.target['w']]))


main()
'''


@pytest.fixture(scope='module')
def migrated(tmp_path_factory):
  pytest.importorskip('libcst')
  from flax_optim_compat._migrate import migrate_source  # pylint: disable=g-import-not-at-top
  root = tmp_path_factory.mktemp('traced')
  new, report = migrate_source(SOURCE)
  return root, new, report


def test_an_optimizer_traced_by_make_jaxpr_is_rewritten_whole(migrated):
  _, new, report = migrated
  assert report.exit_status() == 1, report.summary(written=False)
  assert 'optim.' not in new.replace('optax.', '') and 'TODO' not in new
  # the jaxpr is not an optimizer: its fields are left as they are
  assert 'jaxpr.eqns and jaxpr.consts' in new and "optimizer.params['w']" in new


def test_the_migrated_program_traces_and_runs_as_legacy_did(migrated):
  root, new, _ = migrated
  (root / 'before.py').write_text(SOURCE)
  (root / 'after.py').write_text(new)
  before = harness.run_before(root / 'before.py', cwd=root, env=harness.legacy_env(root))
  after = harness.run_after(root / 'after.py', cwd=root)
  assert after.returncode == 0, after.stderr[-3000:]
  harness.assert_equivalent(harness.trajectory(before.stdout), harness.trajectory(after.stdout),
                            'bit-exact', label='make_jaxpr')
