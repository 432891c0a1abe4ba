"""Which module each of the project's files is, and what its import paths name.

A program's files import each other by paths this interpreter cannot resolve by itself: a
monorepo prefix the copy no longer has, a sub-folder's module by its bare name (the script's
folder is first on ``sys.path``), a clone folder no import can spell. These functions find the
folder whose dotted sub-paths are the module names (:func:`root_of`) and the import prefixes that
name the project's own modules (:func:`aliases`), which :func:`aliased` writes into a parsed
file's qualified names, so ``_program.Program`` resolves every name to the given files; and what
a ``from X import *`` of the project's own module binds (:func:`star_names`, and what its
imports bind, :func:`bind_star_imports`), which LibCST leaves unnamed.
"""
import importlib.util
import os
import re
from typing import Dict, Iterator, List, Optional, Sequence, Set, Tuple

import libcst as cst
from libcst import metadata as meta

from . import _unit
from ._unit import SourceFile


def python_files(paths: Sequence[str]) -> Tuple[List[str], Dict[str, int]]:
  """The ``.py`` files under ``paths`` (files or directories), sorted, absolute; a link to a file
  already found is left out, and a dangling one kept (reading it reports it). Second, the
  folders not read: a folder found in a directory whose name starts with '.' (Jupyter's
  ``.ipynb_checkpoints`` autosaves, ``.git``, a ``.venv``) is not the program, so its files are
  not read; each such outermost folder holding ``.py`` files no path names, with how many."""
  found, hidden = [], {}
  for path in paths:
    if os.path.isdir(path):
      for folder, dirs, files in os.walk(path):
        for d in dirs:
          if d.startswith('.'):
            top = os.path.abspath(os.path.join(folder, d))
            hidden[top] = {os.path.join(f, n) for f, _, ns in os.walk(top) for n in ns
                           if n.endswith('.py')}
        dirs[:] = sorted(d for d in dirs if not d.startswith('.') and d != '__pycache__')
        found.extend(os.path.join(folder, f) for f in sorted(files) if f.endswith('.py'))
    elif os.path.isfile(path):
      found.append(path)
    else:
      raise FileNotFoundError(2, 'No such file or directory', path)
  # A file reached by two paths (a link beside its target) is one file, named by its own path.
  by_file = {}
  for p in sorted({os.path.abspath(p) for p in found}, key=lambda p: (os.path.islink(p), p)):
    by_file.setdefault(os.path.realpath(p), p)
  read = set(by_file) | set(by_file.values())
  not_read = {top: len({f for f in files if f not in read and os.path.realpath(f) not in read})
              for top, files in hidden.items()}
  return sorted(by_file.values()), {top: n for top, n in sorted(not_read.items()) if n}


def root_of(files: Sequence[str], sources: Sequence[str]) -> str:
  """The folder whose dotted sub-paths are the project's module names.

  The common folder of all files, moved up while it is a package (has ``__init__.py`` and a
  name an import can spell: a clone in ``owner+repo@ref/`` is no package of its parent), so
  ``pkg/train.py`` is module ``pkg.train`` and its relative imports resolve, unless the files
  import its sub-folders by their own names (a program run from that folder); then up while the
  files import their own modules by a longer name (``brax/training`` given, its files import
  ``brax.training.normalization``, and ``brax/`` has no ``__init__.py``; ``jax3d/projects/nesf``
  given, its files import ``jax3d.projects.nesf.nerfstatic``: the names before the folder's
  own must be its parents' names, in order).
  """
  root = os.path.commonpath([os.path.dirname(f) for f in files])
  while os.path.isfile(os.path.join(root, '__init__.py')) and os.path.dirname(root) != root and (
      os.path.basename(root).isidentifier() and not _imports_its_folders(root, sources)):
    root = os.path.dirname(root)
  mine = {os.path.relpath(f, root).split(os.sep)[0] for f in files}
  mine |= {m[:-3] for m in mine if m.endswith('.py')}
  for _ in range(4):
    parent, name = os.path.dirname(root), os.path.basename(root)
    imported = {m.group(2) for text in sources for m in re.finditer(
        rf'^\s*(?:from|import)\s+((?:\w+\.)*){re.escape(name)}\.(\w+)', text, re.MULTILINE)
                if _ends_with(parent, m.group(1).split('.')[:-1])}
    # ``from f_net import train_utils``: google-research's layout, the folder given imported by
    # its own name from the repository's top (``python -m f_net.main``), with no __init__.py.
    imported |= {word.split()[0] for text in sources for m in re.finditer(
        rf'^\s*from\s+((?:\w+\.)*){re.escape(name)}\s+import\s+(?:\(([^)]*)\)|([^\n#(]*))',
        text, re.MULTILINE) if _ends_with(parent, m.group(1).split('.')[:-1])
                 for word in (m.group(2) or m.group(3) or '').split(',') if word.split()}
    if parent == root or not imported & mine:
      break
    root, mine = parent, {name}
  return root


def _ends_with(folder: str, names: Sequence[str]) -> bool:
  """Whether ``folder``'s last parts are ``names`` (``a/b/c`` ends with ``['b', 'c']``)."""
  for name in reversed(names):
    if os.path.basename(folder) != name:
      return False
    folder = os.path.dirname(folder)
  return True


def _absolute_imports(text: str) -> List[str]:
  """The dotted paths ``text``'s absolute imports name (``from a.b import c``: ``a.b``)."""
  return re.findall(r'^\s*(?:from|import)\s+(\w[\w.]*)', text, re.MULTILINE)


def _imports_its_folders(root: str, sources: Sequence[str]) -> bool:
  """Whether the files import a sub-folder of ``root`` by its own name (``from nerf import
  utils`` with ``root/nerf/``), and no import path names ``root`` or a folder above it up to
  the first that is not a package (``from scenic.projects.baselines import vit``): the program
  runs from ``root`` (on ``sys.path``), so an ``__init__.py`` there makes no package of it."""
  paths = [path.split('.') for text in sources for path in _absolute_imports(text)]
  named = {part for path in paths for part in path}
  folder = root
  while os.path.dirname(folder) != folder:
    if os.path.basename(folder) in named:
      return False
    if not os.path.isfile(os.path.join(folder, '__init__.py')):
      break
    folder = os.path.dirname(folder)
  return any(os.path.isfile(os.path.join(root, path[0], '__init__.py')) for path in paths)


def _module_parts(root: str, f: str) -> List[str]:
  """The names of the dotted path of file ``f``'s module under ``root`` (a package's
  ``__init__.py``: the package's)."""
  parts = os.path.relpath(os.path.splitext(f)[0], root).split(os.sep)
  return parts[:-1] if parts[-1] == '__init__' else parts


def _module_names(root: str, files: Sequence[str]) -> Set[str]:
  """The dotted names of the given files' modules and packages under ``root`` (``a/b/c.py``:
  ``a``, ``a.b``, ``a.b.c``)."""
  own = set()
  for f in files:
    parts = _module_parts(root, f)
    own.update('.'.join(parts[:i]) for i in range(1, len(parts) + 1))
  return own


def aliases(root: str, files: Sequence[str],
            sources: Sequence[str]) -> Tuple[Dict[str, str], Dict[str, Dict[str, str]]]:
  """The import paths that name the project's own modules, found in one pass over the imports:
  (for every file, for each file).

  For every file: a prefix no installed module has, dropped (``''``):
  ``google3.experimental.users.daeyun.jaxnerf.nerf`` -> ``jaxnerf.nerf`` where ``jaxnerf/nerf``
  is a package of the given files (code copied out of a monorepo imports itself by its old
  path, which resolves to nothing here). The tail must be at least two names (a folder and a
  module or package of the project) and the prefix's first name no module this interpreter
  finds (``flax.training.checkpoints`` is flax's even beside a ``training/checkpoints.py``).
  And a sub-folder's module imported by its bare name, where the project has one module of that
  name: the folder's dotted path (``_bare_imports``); a package under ``src/`` (the src layout,
  installed from there) by its bare name from any file.

  For each file: the bare names of its imports that are modules (or folders) of its own folder,
  which come first: ``import trainer`` in ``scripts/kitti/train_kitti_cnn.py`` is
  ``scripts/kitti/trainer.py``, as ``python train_kitti_cnn.py`` puts the script's folder first
  on ``sys.path``, even where another folder's script imports a ``trainer.py`` of its own
  (jaxfg's ``scripts/kitti/`` and ``scripts/flax_experiments/``), which the project-wide rule
  cannot tell apart."""
  own = _module_names(root, files)
  tops = {name.split('.')[0] for name in own}
  project: Dict[str, str] = {}
  for text in sources:
    # ``from a.b import c`` names module ``a.b.c`` where that is one of the project's
    for m in re.finditer(r'^\s*(?:from|import)\s+(\w+(?:\.\w+)+)(?:\s+import\s+\(?\s*(\w+))?',
                         text, re.MULTILINE):
      parts = m.group(1).split('.') + ([m.group(2)] if m.group(2) else [])
      if parts[0] in tops or parts[0] in project or m.group(1) in project:
        continue
      tail = next((i for i in range(1, len(parts) - 1) if '.'.join(parts[i:]) in own), None)
      if tail is not None and not _installed(parts[0]):
        project['.'.join(parts[:tail])] = ''
  targets: Dict[str, Set[str]] = {}
  per_file: Dict[str, Dict[str, str]] = {}
  for f, name, found, in_own_folder in _bare_imports(root, files, sources, own, tops):
    if in_own_folder:
      per_file.setdefault(f, {})[name] = found
    if name not in project:  # a monorepo prefix of one name is that prefix
      targets.setdefault(name, set()).add(found)
  for text in sources:   # the src layout: ``import pkg`` anywhere is ``src/pkg`` (setuptools)
    for m in re.finditer(r'^\s*(?:from|import)\s+(\w+)', text, re.MULTILINE):
      name = m.group(1)
      if name not in tops and name not in project and f'src.{name}' in own and (
          not _installed(name)):
        targets.setdefault(name, set()).add(f'src.{name}')
  project.update({name: next(iter(found)) for name, found in sorted(targets.items())
                  if len(found) == 1})
  return project, per_file


def _bare_imports(root: str, files: Sequence[str], sources: Sequence[str], own: Set[str],
                  taken: Set[str]) -> Iterator[Tuple[str, str, str, bool]]:
  """Bare names of the project's modules, as the program run from their folders imports
  them: ``from internal import utils`` in ``mipnerf/train.py`` (or in
  ``mipnerf/internal/models.py``, imported by that script) is ``mipnerf/internal/utils.py``, as
  ``python train.py`` puts ``mipnerf/`` first on ``sys.path``. The name is looked up in the
  importing file's folder, then in each folder above it up to the given root; a name of a
  module this interpreter finds is none, and so is a name in ``taken`` (a top-level module or
  package of the project), unless the file's own folder has it and no file imports that folder
  as a package: then the folder is a program's, run from there, its folder first on
  ``sys.path`` (vqvae_experiments' ``pixelcnn/sample.py`` imports ``pixelcnn/train.py`` as
  ``train`` beside a top-level ``train.py``), where a package's module imported from the top
  (score_sde's ``models/utils.py``, as ``from models import utils``) finds the top-level one.
  A name found neither in the file's folder nor above it is the project's one module of that
  name, wherever it is (a folder the program puts on ``sys.path``), if there is one.
  Yields (file, name, the module's dotted name, whether it is in the file's own folder)."""
  # (the importing file's folder, the dotted path it imports)
  imported = {(os.path.dirname(f), path) for f, text in zip(files, sources)
              for path in _absolute_imports(text)}
  by_last = {}   # a module's last name -> the project's modules of that name
  for module in own:
    by_last.setdefault(module.rpartition('.')[2], []).append(module)
  # a module (a package: its __init__.py) -> its source
  texts = {'.'.join(_module_parts(root, f)): text for f, text in zip(files, sources)}
  elsewhere = []   # (file, name, whether the module found has what the import takes)
  for f, text in zip(files, sources):
    folder = os.path.relpath(os.path.dirname(f), root)
    parents = [] if folder == os.curdir else folder.split(os.sep)
    package = '.'.join(parents)
    # imported as a package: ``package.x`` anywhere, or ``package`` from outside the folder
    # (inside, vqvae_experiments' ``pixelcnn/sample.py``'s ``import pixelcnn`` is its sibling
    # ``pixelcnn/pixelcnn.py``)
    a_package = bool(parents) and any(name.startswith(package + '.') or (
        name == package and where != os.path.dirname(f)) for where, name in imported)
    for m in re.finditer(r'^\s*(?:from\s+(\w+)([\w.]*)\s+import\s+\(?\s*(\w+|\*)|'
                         r'import\s+(\w+)([\w.]*))', text, re.MULTILINE):
      name, rest, first = m.group(1, 2, 3) if m.group(1) else (*m.group(4, 5), None)
      first = None if first == '*' else first
      depth = next((i for i in range(len(parents), 0, -1)
                    if '.'.join(parents[:i] + [name]) in own), None)
      # (a name the file's own top folder takes, ``import pixelcnn`` in ``pixelcnn/train.py``,
      # stays the project's: its own module names start with it)
      if name in taken and (depth != len(parents) or a_package or name == parents[0]):
        continue
      if depth is not None:
        if not _installed(name):
          yield f, name, '.'.join(parents[:depth] + [name]), depth == len(parents)
      elif len(by_last.get(name, ())) == 1:
        elsewhere.append((f, name, _provides(by_last[name][0] + rest, first, own, texts)))
  # Not in the file's folder nor above it: the project's one module of that name, in a folder
  # the program puts on ``sys.path`` (AAIR-lab/saycan's ``train.py`` imports ``from model
  # import train_step`` of ``saycan/model.py``, run with that folder on ``PYTHONPATH``), where
  # every such import's dotted path is the project's and binds the name imported from it
  # (``import t5.data`` beside t5x's ``examples/t5/``, which has no ``data``, is the t5
  # library; so is ``from nerfies import camera`` beside a module ``datasets/nerfies.py`` that
  # binds no ``camera``).
  refuted = {name for _, name, provided in elsewhere if not provided}
  for f, name, _ in elsewhere:
    if name not in refuted and not _installed(name):
      yield f, name, by_last[name][0], False


def _provides(module: str, name: Optional[str], own: Set[str], texts: Dict[str, str]) -> bool:
  """Whether the project's ``module`` exists and has ``name`` (None: anything): a submodule,
  or a name its source binds (or may bind: ``import *``)."""
  if module not in own:
    return False
  if name is None or f'{module}.{name}' in own:
    return True
  text = texts.get(module, '')
  bound = (rf'^\s*(?:(?:async\s+)?def|class)\s+{name}\b', rf'^{name}\s*[:=,]',
           rf'^\s*(?:from\s+\S+\s+)?import\s.*(?:\b{name}\s*(?:,|\)|$)|\bas\s+{name}\b)',
           r'import \*')
  return bool(re.search('|'.join(bound), text, re.MULTILINE))


def _installed(name: str) -> bool:
  """Whether this interpreter finds a top-level module ``name`` (``__main__`` is one)."""
  try:
    return importlib.util.find_spec(name) is not None
  except (ImportError, ValueError):
    return True


def _own(name: str, aliases: Dict[str, str]) -> str:
  """``name`` with the first of ``aliases``' prefixes it starts with replaced (``aliased``)."""
  for prefix, replacement in aliases.items():
    if name.startswith(prefix + '.'):
      return (replacement + '.' if replacement else '') + name[len(prefix) + 1:]
    if name == prefix and replacement:
      return replacement
  return name


def aliased(unit: SourceFile, aliases: Dict[str, str]) -> None:
  """Names that ``aliases``' prefixes start become the project's own (the prefix replaced by
  its value: dropped for a monorepo path, the sub-folder's path for a bare sibling name)."""
  unit.fqnames = {node: {meta.QualifiedName(name=_own(q.name, aliases), source=q.source)
                         for q in qs} for node, qs in unit.fqnames.items()}


def import_source(unit: SourceFile, stmt: cst.ImportFrom) -> str:
  """The module ``from X import ...`` names, relative imports resolved against the file's
  module (a package's ``__init__.py`` is the package itself)."""
  source = _unit.dotted(stmt.module) if stmt.module is not None else ''
  if not stmt.relative:
    return source
  base = unit.module_name.split('.')
  keep = len(base) - len(stmt.relative) + (os.path.basename(unit.path) == '__init__.py')
  return '.'.join(base[:keep] + ([source] if source else []))


def star_sources(unit: SourceFile, aliases: Dict[str, str]) -> List[str]:
  """The modules the file's module-level ``from X import *`` statements name, in order, as the
  project's module names (``aliases`` as ``aliased``)."""
  return [_own(import_source(unit, stmt), aliases)
          for line in unit.module.body if isinstance(line, cst.SimpleStatementLine)
          for stmt in line.body
          if isinstance(stmt, cst.ImportFrom) and isinstance(stmt.names, cst.ImportStar)]


def star_names(sources: Sequence[str], tables: Sequence[Dict[str, tuple]]) -> Dict[str, str]:
  """{name: the project's function or class it is} for what ``from X import *`` of each of
  ``sources`` binds (its public names; a later import's name wins, as at run time)."""
  found: Dict[str, str] = {}
  for source in sources:
    for table in tables:
      for key in table:
        rest = key[len(source) + 1:]
        if key.startswith(source + '.') and rest and '.' not in rest and rest[0] != '_':
          found[rest] = key
  return found


def import_bindings(unit: SourceFile) -> Dict[str, str]:
  """{name: what it names} for the public names the module's top-level imports bind, which
  ``from <module> import *`` hands on (``import flax`` binds ``flax``; ``from flax import optim``
  binds ``optim``, ``flax.optim``); none where the module sets ``__all__`` (its own names)."""
  found: Dict[str, str] = {}
  for line in unit.module.body:
    for stmt in line.body if isinstance(line, cst.SimpleStatementLine) else ():
      if isinstance(stmt, cst.Assign) and any(
          isinstance(t.target, cst.Name) and t.target.value == '__all__' for t in stmt.targets):
        return {}
      if isinstance(stmt, cst.Import):
        for a in stmt.names:
          full = _unit.dotted(a.name)
          bound = _unit.dotted(a.asname.name) if a.asname else full.split('.')[0]
          found[bound] = full if a.asname else bound
      elif isinstance(stmt, cst.ImportFrom) and not isinstance(stmt.names, cst.ImportStar):
        source = import_source(unit, stmt)
        for a in stmt.names:
          found[_unit.dotted(a.asname.name) if a.asname else _unit.dotted(a.name)] = (
              f'{source}.{_unit.dotted(a.name)}')
  return {k: v for k, v in found.items() if not k.startswith('_')}


def bind_star_imports(units: Sequence[SourceFile]) -> Dict[str, Set[str]]:
  """Sets each file's ``star_imports``: what its ``from X import *`` of the project's own
  modules binds from their imports (SayCan's ``from main import *``, then
  ``flax.optim.Adam(...)``: ``flax`` is main.py's ``import flax``). Returns {module: the names
  other files read so}: the rewrite of that module keeps their imports."""
  by_module = {u.module_name: import_bindings(u) for u in units if u.module_name}
  read: Dict[str, Set[str]] = {}
  for unit in units:
    given = {}
    for source in unit.star_sources:   # a later import's name wins, as at run time
      given.update({name: source for name in by_module.get(source, ()) if
                    name not in unit.star_names})
    unit.star_imports = {name: by_module[source][name] for name, source in given.items()}
    for node in unit.nodes if given else ():
      if isinstance(node, cst.Name) and node.value in given and unit.names(node):
        if not unit.fqnames.get(node):   # named through the star import
          read.setdefault(given[node.value], set()).add(node.value)
  return read


def reexports(units: Sequence[SourceFile], classes: Dict[str, tuple],
              functions: Dict[str, tuple]) -> Dict[str, str]:
  """Adds a package's re-exports to the project's ``functions`` and ``classes``: ``from .opt
  import Sign`` (or ``*``) in ``pkg/__init__.py`` makes ``pkg.Sign`` the class ``pkg.opt.Sign``
  (SurVAE's ``survae.Adamax``). Returns {re-exported name: its definition's name}."""
  found: Dict[str, str] = {}
  inits = [u for u in units if os.path.basename(u.path) == '__init__.py' and u.module_name]
  for _ in range(4):   # a package may re-export what a sub-package re-exports
    before = len(found)
    for unit in inits:
      for line in unit.module.body:
        if not isinstance(line, cst.SimpleStatementLine):
          continue
        for stmt in line.body:
          if not isinstance(stmt, cst.ImportFrom):
            continue
          source = import_source(unit, stmt)
          pairs = star_names([source], (classes, functions)).items(
          ) if isinstance(stmt.names, cst.ImportStar) else [
              ((a.asname.name.value if a.asname else _unit.dotted(a.name)),
               f'{source}.{_unit.dotted(a.name)}') for a in stmt.names]
          for bound, target in pairs:
            name = f'{unit.module_name}.{bound}'
            for table in (classes, functions):
              if target in table and name not in table:
                table[name] = table[target]
                found[name] = found.get(target, target)
    if len(found) == before:
      break
  return found


def bound_nowhere(project, unit: SourceFile, func: cst.CSTNode) -> Optional[str]:
  """The name (``func``, or the name ``func``'s attributes are read from: ``checkpoint`` of
  ``checkpoint.restore_checkpoint``) that no scope of its file binds, not even a builtin, where
  no ``import *`` may bind it: each of the file's star imports is of the project's own module,
  which binds no such name at its top level (by a def, a class, an assignment or an import,
  and with no star import of its own); else None."""
  root = func
  while isinstance(root, cst.Attribute):
    root = root.value
  scope = unit.scopes.get(root)
  if not (isinstance(root, cst.Name) and scope is not None and not scope[root.value]):
    return None
  stars = sum(isinstance(n, cst.ImportStar) for n in unit.nodes)
  if stars != len(unit.star_sources) or root.value in unit.star_imports:
    return None
  for source in unit.star_sources:
    holder = project.lacking_module(f'{source}.{root.value}')
    if holder is None or any(isinstance(n, cst.ImportStar) for n in holder.nodes):
      return None
  return root.value


def library_global(program, unit: SourceFile, node: cst.CSTNode) -> bool:
  """Whether ``node`` is a variable bound once to a library module's attribute (``FLAGS =
  flags.FLAGS``, absl's flag values): its ``FLAGS.optimizer`` is a flag, never the field of a
  class that holds an optimizer (uncertainty-baselines' ``FLAGS.optimizer``, a string, was
  joined with its ``CheckpointData.optimizer``)."""
  value = _unit.assigned_value(unit, node) if isinstance(node, cst.Name) else None
  if not (isinstance(value, cst.Attribute) and _unit.is_module_like(unit, value)):
    return False
  own = {u.module_name.split('.')[0] for u in program.units if u.module_name}
  return all(name.split('.')[0] not in own for name in unit.names(value))
