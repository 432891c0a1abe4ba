"""The rewrite rules, one module each, found here: ``ALL``, in code order.

Every module of this folder whose name does not start with ``_`` defines ``RULE``, an instance
of its ``_rule.Rule`` subclass (what it matches, what it decides, what it writes, its code and
title), as a LibCST codemod command is one file. Adding a rule is adding its module (and its
test, with its before/after examples beside it); the engine reads ``ALL`` when it runs.
"""
import importlib
import pkgutil
from typing import Tuple

from .._rule import Rule


def discover() -> Tuple[Rule, ...]:
  """The ``RULE`` of every module on this package's path, sorted by code (codes unique)."""
  found = []
  for info in pkgutil.iter_modules(__path__):
    if not info.name.startswith('_'):
      found.append(importlib.import_module(f'{__name__}.{info.name}').RULE)
  codes = [rule.code for rule in found]
  if len(set(codes)) != len(codes):
    raise ValueError(f'two migrate rules share a code: {sorted(codes)}')
  return tuple(sorted(found, key=lambda rule: rule.code))


ALL = discover()
# The rules that plan a legacy name no optimizer object covers (each overrides
# ``Rule.plan_name``; the others' answer is always False): the leftover walk asks them of every
# node of a file.
NAMING = tuple(rule for rule in ALL if type(rule).plan_name is not Rule.plan_name)


def matches(unit, node):
  """The sites every rule matches for the use of the optimizer value ``node``."""
  return [(rule, m) for rule in ALL for m in [rule.match(unit, node)] if m is not None]


def claiming(site, plan):
  """The rule that plans ``site``: the one that matched it, else the first that claims it."""
  if site.rule is not None:
    return site.rule
  return next((rule for rule in ALL if rule.claims(site, plan)), None)
