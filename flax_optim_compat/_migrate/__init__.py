"""``flax-optim-compat migrate``: rewrites legacy ``flax.optim`` code to optax + ``TrainState``.

Needs LibCST (the ``migrate`` extra: ``pip install '.[migrate]'`` in a clone); the rest of the
package does not.
``all_rules`` lists the rewrite rules (one module each in ``rules/``), each with its ``code``
and ``title``; ``all_refusals`` the refusal codes. The rules' before/after examples live
beside their tests.
"""
from ._engine import migrate_source as migrate_source
from ._engine import migrate_sources as migrate_sources
from ._refusals import ALL as all_refusals
from ._rule import Rule as Rule
from .rules import ALL as all_rules

__all__ = ('all_refusals', 'all_rules', 'migrate_source', 'migrate_sources', 'Rule')
