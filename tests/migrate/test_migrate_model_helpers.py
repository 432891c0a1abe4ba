"""jaxrl's agents: a ``Model`` dataclass whose ``with_optimizer(optim_def)`` creates the def each
agent passes, its fields defaulting to ``None`` and set to ``None`` once frozen.

``None`` is a value, not a place a value is stored: the ``None`` put in a model's optimizer
field is not the ``None`` passed to ``jax.lax.cond(..., operand=None)`` or to a record's
``temp=None`` elsewhere, so neither refuses the optimizer (the program of
tests/migrate/examples/objects/none_defaults/ is rewritten whole and run both ways by
test_migrate_objects.py). A def whose ``**kwargs`` is a parameter (awac's
``Adam(**actor_optim_kwargs)``, its learner built by a script outside the given files) has
keywords known only at run time: a lambda with legacy's signature binds them there.
"""
import pytest

pytest.importorskip('libcst')

from flax_optim_compat._migrate import migrate_source  # pylint: disable=g-import-not-at-top

_MODEL = '''\
from typing import Any, Optional

import flax
import jax
import jax.numpy as jnp
from flax import optim


@flax.struct.dataclass
class Model:
  params: Any = None
  optimizer: Optional[optim.Optimizer] = None

  def with_optimizer(self, optim_def):
    return self.replace(params=None, optimizer=optim_def.create(self.params))

  def frozen(self):
    return self.replace(params=self.params or self.optimizer.target, optimizer=None)


class Learner:
  def __init__(self, params, actor_optim_kwargs: dict = {{'learning_rate': 3e-4}}):
    self.actor = Model(params).with_optimizer(optim.Adam({actor}))
    self.critic = Model(params).with_optimizer(optim.Adam(learning_rate=3e-4))

  def target(self, step):
    return jax.lax.cond(step % 2 == 0, lambda _: self.critic.optimizer.target,
                        lambda _: self.actor.optimizer.target, operand=None)
'''


def test_none_stored_in_a_field_does_not_join_the_nones_passed_elsewhere():
  new, report = migrate_source(_MODEL.format(actor='learning_rate=1e-3'), 'model.py')
  assert report.records and all(r.status == 'rewritten' for r in report.records), [
      (r.line, r.code, r.message) for r in report.records]
  assert 'operand=None' in new and 'optimizer=None' in new and '.target' not in new, new


def test_keywords_from_a_parameter_are_bound_by_a_lambda_with_the_legacy_signature():
  """No apply site sets a learning rate, so the lambda's has no default (legacy's None failed at
  the first update; optax would read it as no scaling); the program run both ways is
  tests/migrate/examples/objects/kwargs_parameter/."""
  new, report = migrate_source(_MODEL.format(actor='**actor_optim_kwargs'), 'model.py')
  assert report.records and all(r.status == 'rewritten' for r in report.records), [
      (r.line, r.code, r.message) for r in report.records]
  # flax.optim.Adam.__init__(self, learning_rate=None, beta1=0.9, beta2=0.999, eps=1e-8,
  # weight_decay=0.0), each keyword under optax.adamw's name.
  assert ('with_optimizer((lambda learning_rate, beta1=0.9, beta2=0.999, eps=1e-08, '
          'weight_decay=0.0: optax.adamw(learning_rate=learning_rate, b1=beta1, b2=beta2, '
          'eps=eps, weight_decay=weight_decay))(**actor_optim_kwargs))') in new, new
