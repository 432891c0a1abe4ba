"""Each migrate rule's test, with the rule's before/after examples beside it.

For the rule module ``flax_optim_compat/_migrate/rules/<name>.py``: its test
``test_<name>.py`` here (``EXAMPLES``: each example's name and how closely its two runs agree,
then the rule's own tests) and the folder ``<name>/``, one ``<example>_before.py`` (legacy
``flax.optim`` code, run on this package) and ``<example>_after.py`` (what ``migrate`` writes
for it, run on plain optax) per example. The last line either prints is its trajectory:
tests/migrate/test_migrate_equivalence.py runs both ways and compares them within the class
the report claims for the example; tests/migrate/test_migrate.py checks that ``migrate`` turns
``before`` into ``after`` exactly and claims no more than ``exact`` (the class measured).
They live here, not in the installed package: only the tests and tools read them.
"""
import importlib
import pathlib
from typing import List, NamedTuple, Tuple

HERE = pathlib.Path(__file__).resolve().parent


EXACTNESS = ('bit-exact', '1e-6', 'not exact')   # strongest first


class Example(NamedTuple):
  """A complete script before and after a rule, and how closely their numbers agree."""
  name: str
  exact: str      # measured: 'bit-exact' / '1e-6' / 'not exact'
  folder: pathlib.Path

  @property
  def before(self) -> str:
    return (self.folder / f'{self.name}_before.py').read_text()

  @property
  def after(self) -> str:
    return (self.folder / f'{self.name}_after.py').read_text()


def claimed(report) -> str:
  """The weakest exactness a migrate report claims over its rewritten sites and optimizers:
  what running the example both ways must prove."""
  classes = [r.exactness for r in report.records if r.status != 'refused']
  classes += [c.exactness for c in report.conversions]
  return max(classes, key=EXACTNESS.index)


def module_name(rule) -> str:
  """``fom004_apply`` for the rule defined in ``_migrate/rules/fom004_apply.py``."""
  return type(rule).__module__.rsplit('.', 1)[1]


def examples_of(rule) -> Tuple[Example, ...]:
  """The rule's examples, as its test module lists them."""
  name = module_name(rule)
  test = importlib.import_module(f'{__name__}.test_{name}')
  return tuple(Example(example, exact, HERE / name) for example, exact in test.EXAMPLES.items())


def by_rule(rules=None) -> List[Tuple[str, Example]]:
  """``[(rule code, Example)]`` in rule order (``rules``: the package's, by default)."""
  if rules is None:
    from flax_optim_compat._migrate import all_rules as rules  # pylint: disable=g-import-not-at-top
  return [(rule.code, example) for rule in rules for example in examples_of(rule)]
