"""The rule FOM004 (_migrate/rules/fom004_apply.py): its examples, in the folder beside
this file (run both ways by tests/migrate/test_migrate_equivalence.py), and its own tests."""

# Example name -> how closely its legacy and migrated runs agree.
EXAMPLES = {
    'lr_schedule_offset': 'bit-exact',
    'lr_injected': 'bit-exact',
    'step_read_once_two_updates': '1e-6',
    'pmap_partial_bound': 'bit-exact',
    'jit_vmap_bound': 'bit-exact',
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


_WRAPPED = ('import functools\nimport jax\nimport jax.numpy as jnp\nfrom flax import optim\n\n\n'
            'def step(scale, optimizer, g):\n'
            '  return optimizer.apply_gradient(g * scale)\n\n\n'
            'def run(p, g):\n  optimizer = optim.GradientDescent(0.1).create(p)\n{body}'
            '  return optimizer\n')


@pytest.mark.parametrize('body, compiled', [
    # flax_nerf's main.py, dycheck's trainer: the partial bound, then pmapped (or jitted)
    ('  fn = functools.partial(step, 2.0)\n  p_step = jax.pmap(fn, axis_name="i")\n'
     '  optimizer = p_step(optimizer, g)\n', True),
    ('  fn = functools.partial(step, 2.0)\n  optimizer = jax.jit(fn)(optimizer, g)\n', True),
    ('  p_step = jax.pmap(functools.partial(step, 2.0), axis_name="i")\n'
     '  optimizer = p_step(optimizer, g)\n', True),
    # FFGB_JAX's solvers: a variable bound to jax.vmap(f), then jitted
    ('  v = jax.vmap(functools.partial(step, 2.0), in_axes=(None, 0))\n'
     '  optimizer = jax.jit(v)(optimizer, g)\n', True),
    # the bound partial (or vmap) also called as it is: the step runs eagerly there
    ('  fn = functools.partial(step, 2.0)\n  optimizer = jax.jit(fn)(optimizer, g)\n'
     '  optimizer = fn(optimizer, g)\n', False),
    ('  fn = functools.partial(step, 2.0)\n  optimizer = fn(optimizer, g)\n', False),
    ('  v = jax.vmap(functools.partial(step, 2.0), in_axes=(None, 0))\n'
     '  optimizer = v(optimizer, g)\n', False),
])
def test_a_step_compiled_through_a_bound_partial_or_vmap_is_claimed_compiled(body, compiled):
  """A step reached by a compiler through a variable bound to ``functools.partial(f, ...)`` or
  ``jax.vmap(f)`` runs compiled (bit-exact, as ``pmap_partial_bound`` and ``jit_vmap_bound``
  measure); one the variable also runs as it is keeps the eager claim and its message."""
  _, report = migrate_source(_WRAPPED.format(body=body))
  [record] = [r for r in report.records if r.code == 'FOM004']
  assert record.status == 'rewritten'
  assert (record.exactness, 'run eagerly' in record.message) == (
      ('bit-exact', False) if compiled else ('1e-6', True)), record.message


_FIELD = ('import functools\nimport jax\nfrom flax import optim\n\n\n'
          'def step(scale, optimizer, g):\n  return optimizer.apply_gradient(g * scale)\n\n\n'
          'class Trainer:\n\n  def __init__(self, scale):\n'
          '    self.step_fn = functools.partial(step, scale)\n\n'
          '  def run(self, p, g):\n    optimizer = optim.GradientDescent(0.1).create(p)\n'
          '    p_step = jax.pmap(self.step_fn, axis_name="i")\n{extra}'
          '    return p_step(optimizer, g)\n')


@pytest.mark.parametrize('extra, exact', [
    ('', 'bit-exact'),                                           # dycheck's Trainer shape
    ('    optimizer = self.step_fn(optimizer, g)\n', '1e-6'),    # the field also run as it is
])
def test_a_step_compiled_through_a_field_bound_to_a_partial(extra, exact):
  _, report = migrate_source(_FIELD.format(extra=extra))
  assert [r.exactness for r in report.records if r.code == 'FOM004'] == [exact]
