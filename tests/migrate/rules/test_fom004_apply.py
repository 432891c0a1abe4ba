"""The rule FOM004 (_migrate/rules/fom004_apply.py): its examples, in the folder beside
this file (run both ways by tests/migrate/test_migrate_equivalence.py), and its own tests."""

# Example name -> how closely its legacy and migrated runs agree.
EXAMPLES = {
    'lr_schedule_offset': 'bit-exact',
    'lr_injected': 'bit-exact',
    'step_read_once_two_updates': '1e-6',
}

import pytest  # noqa: E402

libcst = pytest.importorskip('libcst')

from flax_optim_compat._migrate import migrate_source  # noqa: E402

_STEP = ('import jax\nfrom flax import optim\n\n\n'
         'def lr_fn(step):\n  return 0.1 / (1.0 + step)\n\n\n'
         '@jax.jit\ndef train_step(optimizer, g):\n  step = optimizer.state.step\n{body}'
         '  return optimizer\n\n\n'
         'def run(p, g):\n  return train_step(optim.GradientDescent(0.1).create(p), g)\n')
_ONE = '  optimizer = optimizer.apply_gradient(g, learning_rate=lr_fn(step))\n'


@pytest.mark.parametrize('body, form', [
    (_ONE, 'optax.sgd(learning_rate=lr_fn'),      # the step of this update: a schedule
    (_ONE * 2, 'inject_hyperparams'),               # one read, two updates: the value read
    (f'  for _ in range(2):\n  {_ONE}', 'inject_hyperparams'),   # read outside the loop
])
def test_a_step_read_into_a_variable_is_a_schedule_only_for_the_update_it_feeds(body, form):
  new, report = migrate_source(_STEP.format(body=body))
  assert report.exit_status() == 1
  assert form in new


_SCHEDULED = ('import jax\nfrom flax import optim\n\n\n'
              'def lr_fn(step):\n  return 0.1 / (1.0 + step)\n\n\n'
              '@jax.jit\ndef train_step(optimizer, g):\n  step = optimizer.state.step\n'
              '  lr = lr_fn(step)\n{extra}'
              '  return optimizer.apply_gradient(g, learning_rate=lr)\n\n\n'
              'def run(p, g):\n  return train_step(optim.GradientDescent(0.1).create(p), g)\n')


def test_a_learning_rate_variable_only_the_schedule_read_goes_with_what_only_it_read():
  new, report = migrate_source(_SCHEDULED.format(extra=''))
  assert report.exit_status() == 1
  assert 'optax.sgd(learning_rate=lr_fn)' in new
  assert 'lr = ' not in new and 'step = ' not in new


def test_a_learning_rate_variable_read_elsewhere_too_stays():
  new, _ = migrate_source(_SCHEDULED.format(extra='  print(step)\n'))
  assert 'optax.sgd(learning_rate=lr_fn)' in new
  assert '  step = optimizer.step\n' in new and 'lr = ' not in new
