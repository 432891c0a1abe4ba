"""A migrate rule is one unit: its module in ``_migrate/rules/``, found there, nothing else.

A throwaway rule added as a module on the rules package's path is discovered and run by the
unchanged engine; the rule modules import only what lies below the site classification.
"""
import ast
import pathlib
import textwrap

import pytest

libcst = pytest.importorskip('libcst')

from flax_optim_compat._migrate import migrate_source
from flax_optim_compat._migrate import rules

_THROWAWAY = '''
"""FOM098: optimizer.optimizer_def -> state.tx (a rule the package does not have)."""
import libcst as cst

from flax_optim_compat._migrate import _rule
from flax_optim_compat._migrate._report import Record


class OptimizerDef(_rule.Rule):
  code = 'FOM098'
  title = 'optimizer.optimizer_def -> state.tx'
  kind = 'optimizer_def'

  def match(self, unit, node):
    attribute = _rule.member_of(unit, node, 'optimizer_def')
    return _rule.Match(self.kind, attribute) if attribute is not None else None

  def plan(self, site, plan):
    plan.files[site.unit.path].edits[id(site.node)] = _rule.Edit(self)
    plan.records.append(Record.of(site, 'rewritten', code=self.code, message='optimizer_def'))

  def rewrite(self, updated, data, context):
    return updated.with_changes(attr=cst.Name('tx'))


RULE = OptimizerDef()
'''

_PROGRAM = textwrap.dedent('''\
    import jax.numpy as jnp
    from flax import optim


    def run(params, grads):
      optimizer = optim.GradientDescent(learning_rate=0.1).create(params)
      tx = optimizer.optimizer_def
      return optimizer.apply_gradient(grads).target, tx
    ''')


def test_a_throwaway_rule_is_discovered_and_run_without_touching_the_engine(tmp_path,
                                                                            monkeypatch):
  before, report = migrate_source(_PROGRAM)
  # Without the rule: a read the rewrite cannot keep, so the whole object is refused.
  assert {r.code for r in report.records} == {'FOM104'} and report.exit_status() == 2
  assert 'optimizer.optimizer_def' in before and 'optim.GradientDescent' in before
  (tmp_path / 'fom098_optimizer_def.py').write_text(_THROWAWAY)
  monkeypatch.setattr(rules, '__path__', [*rules.__path__, str(tmp_path)])
  monkeypatch.setattr(rules, 'ALL', rules.discover())
  assert rules.ALL[-1].code == 'FOM098'
  new, report = migrate_source(_PROGRAM)
  assert report.exit_status() == 1, report.summary(written=False)
  assert {r.code for r in report.records} == {'FOM001', 'FOM002', 'FOM004', 'FOM098'}
  assert '  tx = optimizer.tx\n' in new
  assert 'optimizer.apply_gradients(grads=grads).params, tx' in new


def test_two_rules_with_one_code_are_refused(tmp_path, monkeypatch):
  (tmp_path / 'fom099_again.py').write_text(_THROWAWAY.replace("'FOM098'", "'FOM002'"))
  monkeypatch.setattr(rules, '__path__', [*rules.__path__, str(tmp_path)])
  with pytest.raises(ValueError, match='two migrate rules share a code'):
    rules.discover()


_BELOW_SITES = {'_rule', '_edits', '_report', '_refusals', '_unit', '_project', '_optax_text',
                '_learning_rate', '_calls', '_flows'}


@pytest.mark.parametrize('path', sorted(pathlib.Path(rules.__file__).parent.glob('fom*.py')),
                         ids=lambda p: p.stem)
def test_a_rule_module_imports_only_what_lies_below_the_sites(path):
  for node in ast.walk(ast.parse(path.read_text())):
    if isinstance(node, ast.ImportFrom) and node.level == 2:
      names = [node.module] if node.module else [a.name for a in node.names]
      assert set(names) <= _BELOW_SITES, (path.name, names)
    if isinstance(node, ast.ImportFrom) and node.level == 1:
      assert node.module.startswith('fom'), (path.name, node.module)
