"""The package's layering (ARCHITECTURE.md): imports point one way, public optax only."""
import ast
import pathlib
import re
import subprocess
import sys

import pytest

import flax_optim_compat

PACKAGE_DIR = pathlib.Path(flax_optim_compat.__file__).parent
REPO = PACKAGE_DIR.parent


def _module_name(path: pathlib.Path) -> str:
  """A module's name inside the package: ``base``, ``_checkpoint._codec``, ``_migrate`` (a
  sub-package's ``__init__.py``); the package's own ``__init__.py`` is ``__init__``."""
  parts = list(path.relative_to(PACKAGE_DIR).with_suffix('').parts)
  if parts[-1] == '__init__' and len(parts) > 1:
    parts.pop()
  return '.'.join(parts)


FILES = {_module_name(path): path for path in PACKAGE_DIR.rglob('*.py')}
MODULES = sorted(FILES)


def _tree(module):
  return ast.parse(FILES[module].read_text(encoding='utf-8'))


def _package_of(module):
  """The package a module's relative imports start from, as a list of names."""
  parts = [] if module == '__init__' else module.split('.')
  return parts if FILES[module].name == '__init__.py' else parts[:-1]


def _package_imports(module):
  """Modules of the package that ``module`` imports, at any level of the file
  (``import flax_optim_compat`` counts as importing ``__init__``)."""
  found = set()

  def add(parts):
    name = '.'.join(parts) or '__init__'
    if name in FILES:
      found.add(name)

  for node in ast.walk(_tree(module)):
    if isinstance(node, ast.ImportFrom):
      if node.level:
        package = _package_of(module)
        base = package[:len(package) - node.level + 1]
      elif (node.module or '').split('.')[0] == 'flax_optim_compat':
        base = []
      else:
        continue
      named = (node.module or '').split('.')
      if not node.level:
        named = named[1:]
      parts = base + [part for part in named if part]
      for alias in node.names:                     # from .x import y: y may be a module
        if '.'.join(parts + [alias.name]) in FILES:
          add(parts + [alias.name])
        else:
          add(parts)
    elif isinstance(node, ast.Import):
      for alias in node.names:
        if alias.name.split('.')[0] == 'flax_optim_compat':
          add(alias.name.split('.')[1:])
  found.discard(module)
  return found


def _matching(pattern):
  """The modules whose file, relative to the package, matches ``pattern`` (``_migrate/*.py``:
  every module of that folder, its ``__init__`` too; ``[a-z]*.py``: the public top-level ones).
  A ``*`` does not cross a ``/``."""
  return {m for m, path in FILES.items()
          if pathlib.PurePosixPath(path.relative_to(PACKAGE_DIR).as_posix()).match(pattern)
          and len(path.relative_to(PACKAGE_DIR).parts) == len(pattern.split('/'))}


def _declared_layers():
  """``[(layer, {module, ...}), ...]`` from ARCHITECTURE.md's diagram, lowest layer first.

  In the diagram's code block a line starting in column 0 opens a layer (its name is the text
  before the first run of two spaces); every ``*.py`` word, on that line or on the indented
  lines below it, is a module of that layer (``_checkpoint/_codec.py``), or, with ``*`` or
  ``[...]`` in it, a pattern (:func:`_matching`) naming every matching module that no other
  word names in full.
  """
  text = pathlib.Path(REPO, 'ARCHITECTURE.md').read_text(encoding='utf-8')
  block = text.split('```\n', 2)[1]
  layers, patterns = [], []
  for line in block.splitlines():
    if line and not line[0].isspace():
      layers.append((re.split(r'\s{2,}', line)[0], set()))
    for word in line.split():
      if word.endswith('.py'):
        assert layers, f'ARCHITECTURE.md: {word} comes before any layer name'
        if any(c in word for c in '*['):
          patterns.append((layers[-1][1], word))
        else:
          layers[-1][1].add(_module_name(PACKAGE_DIR / word))
  named = {module for _, modules in layers for module in modules}
  for modules, pattern in patterns:
    modules.update(_matching(pattern) - named)
  return layers[::-1]


LAYERS = _declared_layers()
LAYER_OF = {module: (rank, name) for rank, (name, modules) in enumerate(LAYERS)
            for module in modules}


def test_the_patterns_of_the_diagram():
  assert _matching('_migrate/*.py') == {  # a * does not cross a /: not _migrate/rules/
      m for m, path in FILES.items() if path.parent == PACKAGE_DIR / '_migrate'}
  public = _matching('[a-z]*.py')
  assert {'sgd', 'adam', 'weight_norm', 'dynamic_scale', 'base', 'convert'} <= public
  assert not {m for m in public if m.startswith('_') or '.' in m}
  defs = next(modules for name, modules in LAYERS if name == 'defs')
  assert 'sgd' in defs and 'base' not in defs and 'convert' not in defs  # named elsewhere


def test_the_diagram_names_every_module_once():
  declared = [module for _, modules in LAYERS for module in modules]
  assert len(declared) == len(set(declared)), 'ARCHITECTURE.md: a module in two layers'
  missing = sorted(set(MODULES) - set(declared))
  assert not missing, (f'flax_optim_compat: {missing[0]} is in no layer of ARCHITECTURE.md\'s '
                       'diagram: add it to the layer it belongs to (it may import only modules '
                       'of that layer and the ones below).')
  stale = sorted(set(declared) - set(MODULES))
  assert not stale, f'ARCHITECTURE.md names {stale[0]}, which the package does not have.'


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
# optimizer (orbax I/O reads orbax's metadata tree by _state_check's rule, as the strict restore
# does); the CLI reaches the checkpoint wing through convert's public API only.
_CK = '_checkpoint.'


@pytest.mark.parametrize('module, forbidden', [
    (_CK + '_codec', set(MODULES) - {_CK + '_codec', '_tree'}),
    (_CK + '_outputs', set(MODULES) - {_CK + '_outputs', _CK + '_codec'}),
    (_CK + '_orbax_io', set(MODULES) - {_CK + '_orbax_io', _CK + '_codec', _CK + '_outputs',
                                         '_state_check'}),
    (_CK + '_sources', set(MODULES) - {_CK + '_sources', _CK + '_codec', _CK + '_orbax_io',
                                        _CK + '_outputs'}),
    ('_cli._main', {m for m in MODULES if m.startswith(_CK)} | {'_restore'}),
])
def test_the_checkpoint_wing_keeps_its_own_order(module, forbidden):
  assert not _package_imports(module) & forbidden


# The migrate wing's inner order: each module imports none of those after it.
_MIGRATE_ORDER = ['_unit', '_import_paths', '_family', '_unparsed', '_program', '_calls', '_flows',
                  '_callees', '_project', '_sites', '_leftovers', '_shared_layout', '_plan', '_engine',
                  '_command']


@pytest.mark.parametrize('position', range(len(_MIGRATE_ORDER)))
def test_the_migrate_wing_keeps_its_own_order(position):
  module = '_migrate.' + _MIGRATE_ORDER[position]
  later = {'_migrate.' + name for name in _MIGRATE_ORDER[position + 1:]}
  assert module in FILES, f'{module} is gone: update _MIGRATE_ORDER and ARCHITECTURE.md'
  wrong = sorted(_package_imports(module) & later)
  assert not wrong, f'{module}.py imports {wrong[0]}.py, which comes after it in the wing'


_TOOL_PACKAGES = ('_checkpoint', '_expr', '_cli', '_migrate')


@pytest.mark.parametrize('statement', ['import flax_optim_compat', 'from flax import optim',
                                       'import flax_optim_compat.base, flax_optim_compat.adam'])
def test_the_legacy_api_loads_nothing_of_the_tool(statement):
  """What every legacy program does loads the core only: no codec, no publisher, no parsers."""
  code = (f'import sys\n{statement}\nimport flax_optim_compat\n'
          'print(sorted(m for m in sys.modules if m.startswith("flax_optim_compat.")))')
  out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True,
                       timeout=300).stdout
  loaded = ast.literal_eval(out)
  assert 'flax_optim_compat.base' in loaded  # the check sees what was imported
  tool = [m for m in loaded if m.split('.')[1] in _TOOL_PACKAGES + ('convert',)]
  assert not tool, f'`{statement}` loads {tool}'


@pytest.mark.parametrize('module', MODULES)
def test_public_optax_only_and_no_method_identity_checks(module):
  source = FILES[module].read_text(encoding='utf-8')
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
  for node in ast.walk(_tree('_cli._main')):
    if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
        and node.value.id == 'convert'):
      assert not node.attr.startswith('_'), f'_cli/_main.py:{node.lineno} uses convert.{node.attr}'


# The house's size limit (ARCHITECTURE.md): a module past it is split along a line of its own.
MAX_LINES = 700


@pytest.mark.parametrize('path', sorted(FILES.values()) + [REPO / '_flax_optim_compat_alias.py'],
                         ids=lambda p: p.name)
def test_no_module_is_over_the_house_size(path):
  lines = len(path.read_text(encoding='utf-8').splitlines())
  assert lines <= MAX_LINES, f'{path.relative_to(REPO)} has {lines} lines (at most {MAX_LINES})'
