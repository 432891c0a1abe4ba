"""The rule FOM006 (_migrate/rules/fom006_annotation.py): its examples, in the folder beside
this file (run both ways by tests/migrate/test_migrate_equivalence.py), and its own tests."""

# Example name -> how closely its legacy and migrated runs agree.
EXAMPLES = {
    'dataclass_field': 'bit-exact',
}

import pytest  # noqa: E402

libcst = pytest.importorskip('libcst')

from flax_optim_compat._migrate import migrate_source  # noqa: E402


def test_the_class_anywhere_in_an_annotation_is_rewritten():
  source = ('from typing import Tuple\n\nimport jax.numpy as jnp\nfrom flax import optim\n\n\n'
            'def step(o, g) -> Tuple[optim.Optimizer, jnp.ndarray]:\n'
            '  return o.apply_gradient(g), g\n\n\n'
            'def run(p, g):\n  return step(optim.Adam(0.1).create(p), g)[0].target\n')
  new, report = migrate_source(source)
  assert report.exit_status() == 1, report.summary(written=False)
  assert '-> Tuple[train_state.TrainState, jnp.ndarray]:' in new
  assert 'optim' not in new.replace('optax', '')
