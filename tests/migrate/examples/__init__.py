"""Each migrate rule's examples: complete scripts before and after the rule, as files.

``<name>_before.py`` runs on this package (legacy ``flax.optim`` code); ``<name>_after.py`` is
what ``migrate`` writes for it and runs on plain optax. The last line either prints is its
trajectory: tests/migrate/test_migrate_equivalence.py runs both ways and compares them within
``exact``; tests/migrate/test_migrate.py checks that ``migrate`` turns ``before`` into ``after``
exactly. They live here, not in the installed package: only the tests and tools read them.
"""
import pathlib
from typing import Dict, NamedTuple, Tuple

HERE = pathlib.Path(__file__).resolve().parent


class Example(NamedTuple):
  """A complete script before and after a rule, and how closely their numbers agree."""
  name: str
  exact: str      # 'bit-exact' / '1e-6' / 'not exact'

  @property
  def before(self) -> str:
    return (HERE / f'{self.name}_before.py').read_text()

  @property
  def after(self) -> str:
    return (HERE / f'{self.name}_after.py').read_text()


_EXACT = {
    'create_adamw': '1e-6',
    'def_variable_jit': 'bit-exact',
    'replace_target': '1e-6',
    'step_read': '1e-6',
    'lr_schedule_offset': 'bit-exact',
    'lr_injected': 'bit-exact',
    'dataclass_field': 'bit-exact',
    'replicate_pmap': 'bit-exact',
    # The optimizer replicated where it is created, and unreplicated where it is read: each
    # call on a create(...) or on a method's result is rewritten as on a name.
    'replicate_chained': 'bit-exact',
    'multi_optimizer': '1e-6',
    'focus': '1e-6',
    'dynamic_scale': 'bit-exact',
    'compute_gradient': '1e-6',
    'optimize': '1e-6',
    'optimize_injected_lr': 'bit-exact',
    # flax's imagenet idiom: DynamicScale imported from flax.optim under the alias the rule
    # writes, the non-finite selection by tree_map over the optimizer, isinstance, del.
    'dynamic_scale_selection': '1e-6',
}
EXAMPLES = {name: Example(name, exact) for name, exact in _EXACT.items()}

# Rule code -> the examples that show it (an example may show several rules).
BY_RULE: Dict[str, Tuple[Example, ...]] = {
    code: tuple(EXAMPLES[n] for n in names) for code, names in {
        'FOM001': ('create_adamw', 'def_variable_jit'),
        'FOM002': ('replace_target',),
        'FOM003': ('step_read',),
        'FOM004': ('lr_schedule_offset', 'lr_injected'),
        'FOM005': ('replace_target',),
        'FOM006': ('dataclass_field',),
        'FOM007': ('replicate_pmap', 'replicate_chained'),
        'FOM008': ('multi_optimizer', 'focus'),
        'FOM010': ('dynamic_scale', 'dynamic_scale_selection'),
        'FOM011': ('compute_gradient',),
        'FOM012': ('optimize', 'optimize_injected_lr'),
        'FOM013': ('dynamic_scale_selection',),
    }.items()}


def by_rule():
  """``[(rule code, Example)]`` in rule order."""
  return [(code, ex) for code, examples in BY_RULE.items() for ex in examples]
