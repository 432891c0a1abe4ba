"""The isolated child that proves "plain optax/flax only" really cannot reach this package."""
from tests._isolated import run_isolated


def test_isolated_child_cannot_import_the_package_or_its_alias():
  code = '''
import optax
for stmt in ('import flax_optim_compat', 'from flax import optim', 'import flax.optim',
             'import _flax_optim_compat_alias'):
  try:
    exec(stmt)
    print('imported')
  except ImportError:
    print('blocked')
'''
  assert run_isolated(code).stdout.split() == ['blocked'] * 4
