"""The package's layering (ARCHITECTURE.md): imports point one way, public optax only."""
import ast
import os

import pytest

import flax_optim_compat

PACKAGE_DIR = os.path.dirname(flax_optim_compat.__file__)
MODULES = sorted(name[:-3] for name in os.listdir(PACKAGE_DIR) if name.endswith('.py'))


def _tree(module):
  with open(os.path.join(PACKAGE_DIR, module + '.py'), encoding='utf-8') as f:
    return ast.parse(f.read())


def _package_imports(module):
  """Modules of the package that ``module`` imports, at any level of the file."""
  found = set()
  for node in ast.walk(_tree(module)):
    if isinstance(node, ast.ImportFrom):
      if node.level == 1 and node.module:          # from .x import y
        found.add(node.module.split('.')[0])
      elif node.level == 1:                        # from . import x
        found.update(alias.name for alias in node.names)
      elif (node.module or '').startswith('flax_optim_compat.'):
        found.add(node.module.split('.')[1])
    elif isinstance(node, ast.Import):
      for alias in node.names:
        if alias.name.startswith('flax_optim_compat.'):
          found.add(alias.name.split('.')[1])
  return found & set(MODULES)


def test_no_import_cycle():
  graph = {module: _package_imports(module) for module in MODULES}
  state = {}

  def visit(module, stack):
    state[module] = 'open'
    for dep in sorted(graph[module]):
      if state.get(dep) == 'open':
        pytest.fail('import cycle: ' + ' -> '.join(stack + [module, dep]))
      if dep not in state:
        visit(dep, stack + [module])
    state[module] = 'done'

  for module in MODULES:
    if module not in state:
      visit(module, [])


@pytest.mark.parametrize('module, forbidden', [
    ('base', {'_adapter', '_from_optax', 'convert', '_cli'}),   # the template knows no defs
    ('_adapter', {'convert', '_cli'}),
    ('_multi', {'base', '_adapter'}),
    ('_tree', set(MODULES) - {'_tree'}),
    ('_layouts', set(MODULES) - {'_layouts'}),
    ('_eager', set(MODULES) - {'_eager'}),   # it runs a def's own step; it knows no module
    # The checkpoint wing: the codec knows only tree helpers; file and directory plumbing
    # knows no optimizer; the CLI reaches the wing through convert's public API only.
    ('_codec', set(MODULES) - {'_codec', '_tree'}),
    ('_outputs', set(MODULES) - {'_outputs', '_codec'}),
    ('_orbax_io', set(MODULES) - {'_orbax_io', '_codec', '_outputs'}),
    ('_sources', set(MODULES) - {'_sources', '_codec', '_orbax_io', '_outputs'}),
    ('_cli', {'_codec', '_outputs', '_orbax_io', '_sources', '_state_dict', '_diff', '_inspect',
              '_restore'}),
])
def test_layers_point_down(module, forbidden):
  assert not _package_imports(module) & forbidden


@pytest.mark.parametrize('module', MODULES)
def test_public_optax_only_and_no_method_identity_checks(module):
  with open(os.path.join(PACKAGE_DIR, module + '.py'), encoding='utf-8') as f:
    source = f.read()
  assert 'optax._src' not in source
  for node in ast.walk(ast.parse(source)):
    if isinstance(node, ast.Compare) and any(isinstance(op, (ast.Is, ast.IsNot))
                                             for op in node.ops):
      sides = [node.left] + node.comparators
      # `type(x).method is Base.method`: behaviour chosen by comparing methods.
      assert not any(isinstance(side, ast.Attribute) and isinstance(side.value, ast.Attribute)
                     and isinstance(side.value.value, ast.Call) for side in sides), (
                         f'{module}.py:{node.lineno} compares a method with a base class\'s')


def test_cli_uses_public_names_of_convert_only():
  for node in ast.walk(_tree('_cli')):
    if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
        and node.value.id == 'convert'):
      assert not node.attr.startswith('_'), f'_cli.py:{node.lineno} uses convert.{node.attr}'
