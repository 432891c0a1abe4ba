"""migrate writes the same files and the same report whatever order LibCST's sets come in.

LibCST answers ``scope[name]``, ``Assignment.references`` and ``Access.referents`` with sets,
whose order follows object identities and so changes from run to run; before the analysis sorted
them by file position (``_unit.bindings``, ``_unit.accesses``), the report of
``examples/unseen/trainer_methods`` named "the def at train.py:68" in some runs and ":66" in
others. Here each project is migrated twice, once with those sets iterated in the opposite order
(a ``set`` whose ``__iter__`` is reversed): the files written and the report must be the same.
The projects are those whose output followed the set order before the fix (checked on that code).
"""
import json
import pathlib

import pytest
from libcst import metadata as meta
from libcst.metadata import scope_provider

from flax_optim_compat._migrate import _engine

HERE = pathlib.Path(__file__).resolve().parent
PROJECTS = [
    'examples/branch_defs/override_beside_plain_def',
    'examples/unseen/trainer_methods',
    'rules/fom001_create/def_branches_before.py',
    'rules/fom008_multi/multi_in_branches_before.py',
    'rules/fom015_group_hyper_params/group_overrides_in_branches_before.py',
]


class _Backwards(set):
  def __iter__(self):
    return reversed(list(set.__iter__(self)))


def _sources(where: pathlib.Path) -> dict:
  if where.is_file():
    return {where.name: where.read_text()}
  return {str(p.relative_to(where)): p.read_text() for p in sorted(where.rglob('*.py'))}


def _migrated(where: pathlib.Path):
  changed, report = _engine.migrate_sources(_sources(where))
  return changed, json.dumps(report.as_dict(), sort_keys=True)


@pytest.mark.parametrize('project', PROJECTS)
def test_the_files_and_report_do_not_follow_the_order_of_libcsts_sets(project, monkeypatch):
  where = HERE / project
  assert where.exists(), where
  forwards = _migrated(where)
  assert forwards[0], f'{project}: nothing rewritten, so nothing to compare'
  getitem = meta.Scope.__getitem__
  references = scope_provider.BaseAssignment.references
  referents = scope_provider.Access.referents
  assert isinstance(references, property) and isinstance(referents, property)
  with monkeypatch.context() as patch:
    patch.setattr(meta.Scope, '__getitem__', lambda self, name: _Backwards(getitem(self, name)))
    patch.setattr(scope_provider.BaseAssignment, 'references',
                  property(lambda self: _Backwards(references.fget(self))))
    patch.setattr(scope_provider.Access, 'referents',
                  property(lambda self: _Backwards(referents.fget(self))))
    backwards = _migrated(where)
  assert backwards[1] == forwards[1]
  assert backwards[0] == forwards[0]
