"""The package's layering (ARCHITECTURE.md): imports point one way, public optax only."""
import ast
import os
import pathlib
import re

import pytest

import flax_optim_compat

PACKAGE_DIR = os.path.dirname(flax_optim_compat.__file__)
REPO = os.path.dirname(PACKAGE_DIR)
MODULES = sorted(name[:-3] for name in os.listdir(PACKAGE_DIR) if name.endswith('.py'))


def _tree(module):
  with open(os.path.join(PACKAGE_DIR, module + '.py'), encoding='utf-8') as f:
    return ast.parse(f.read())


def _package_imports(module):
  """Modules of the package that ``module`` imports, at any level of the file
  (``import flax_optim_compat`` counts as importing ``__init__``)."""
  found = set()
  for node in ast.walk(_tree(module)):
    if isinstance(node, ast.ImportFrom):
      if node.level == 1 and node.module:          # from .x import y
        found.add(node.module.split('.')[0])
      elif node.level == 1:                        # from . import x
        found.update(alias.name for alias in node.names)
      elif (node.module or '').startswith('flax_optim_compat.'):
        found.add(node.module.split('.')[1])
      elif node.module == 'flax_optim_compat':
        found.update(alias.name for alias in node.names)
    elif isinstance(node, ast.Import):
      for alias in node.names:
        if alias.name.startswith('flax_optim_compat.'):
          found.add(alias.name.split('.')[1])
        elif alias.name == 'flax_optim_compat':
          found.add('__init__')
  return found & set(MODULES)


def _declared_layers():
  """``[(layer, {module, ...}), ...]`` from ARCHITECTURE.md's diagram, lowest layer first.

  In the diagram's code block a line starting in column 0 opens a layer (its name is the text
  before the first run of two spaces); every ``*.py`` word, on that line or on the indented
  lines below it, is a module of that layer.
  """
  text = pathlib.Path(REPO, 'ARCHITECTURE.md').read_text(encoding='utf-8')
  block = text.split('```\n', 2)[1]
  layers = []
  for line in block.splitlines():
    if line and not line[0].isspace():
      layers.append((re.split(r'\s{2,}', line)[0], set()))
    for word in line.split():
      if word.endswith('.py'):
        assert layers, f'ARCHITECTURE.md: {word} comes before any layer name'
        layers[-1][1].add(word[:-3])
  return layers[::-1]


LAYERS = _declared_layers()
LAYER_OF = {module: (rank, name) for rank, (name, modules) in enumerate(LAYERS)
            for module in modules}


def test_the_diagram_names_every_module_once():
  declared = [module for _, modules in LAYERS for module in modules]
  assert len(declared) == len(set(declared)), 'ARCHITECTURE.md: a module in two layers'
  missing = sorted(set(MODULES) - set(declared))
  assert not missing, (f'flax_optim_compat/{missing[0]}.py is in no layer of ARCHITECTURE.md\'s '
                       'diagram: add it to the layer it belongs to (it may import only modules '
                       'of that layer and the ones below).')
  stale = sorted(set(declared) - set(MODULES))
  assert not stale, f'ARCHITECTURE.md names {stale[0]}.py, which the package does not have.'


@pytest.mark.parametrize('module', MODULES)
def test_imports_point_to_the_same_or_a_lower_layer(module):
  if module not in LAYER_OF:
    pytest.fail(f'{module}.py is in no layer of ARCHITECTURE.md (see '
                'test_the_diagram_names_every_module_once)')
  rank, name = LAYER_OF[module]
  for dep in sorted(_package_imports(module)):
    dep_rank, dep_name = LAYER_OF.get(dep, (None, None))
    assert dep_rank is not None and dep_rank <= rank, (
        f'{module}.py ({name}) imports {dep}.py ({dep_name}), a higher layer: move the code '
        'or change the layer in ARCHITECTURE.md')


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


# Inside the layers: the codec knows only tree helpers; file and directory plumbing knows no
# optimizer; the CLI reaches the checkpoint wing through convert's public API only.
@pytest.mark.parametrize('module, forbidden', [
    ('_codec', set(MODULES) - {'_codec', '_tree'}),
    ('_outputs', set(MODULES) - {'_outputs', '_codec'}),
    ('_orbax_io', set(MODULES) - {'_orbax_io', '_codec', '_outputs'}),
    ('_sources', set(MODULES) - {'_sources', '_codec', '_orbax_io', '_outputs'}),
    ('_cli', {'_codec', '_outputs', '_orbax_io', '_sources', '_state_dict', '_diff', '_inspect',
              '_restore', '_conversion', '_converted'}),
])
def test_the_checkpoint_wing_keeps_its_own_order(module, forbidden):
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
