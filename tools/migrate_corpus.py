"""Measures `flax-optim-compat migrate` on a corpus of real legacy programs.

    python tools/migrate_corpus.py CORPUS [--programs programs.tsv] [--json out.json]
                                          [--only SUBSTRING] [--timeout SECONDS]

CORPUS holds the programs' sources, one folder each (``CORPUS/<repository@ref>/<dir>``).
``--programs``: a TSV with an ``id`` column (the program's folder, relative to CORPUS) and an
optional ``kind`` column (``linen``, ``flax.nn``, ``subclass``, ``none``), as
tools/corpus/programs.tsv; without it every ``examples/*`` / ``linen_examples/*`` folder of a
``flax@<tag>`` folder, and every other top folder, is one program.

Each program is migrated as `migrate PROGRAM --write` would (in memory: nothing under CORPUS is
written), then migrated again as `migrate --check` would see the result. Per program:

* outcome: **migrated whole** (every legacy site rewritten, no flax.optim import left, no
  FOM299), **optimizers whole, FOM299 left** (so, but a removed jax or flax name no rule
  rewrites is left: the program still needs this package's runtime layer),
  **refused** (codes; FOM198: a file that does not parse and may use flax.optim), **failed**
  (a rewritten file did not compile, FOM199, or the tool raised / timed out),
  **optimizers whole, checkpoint reads flagged** (so, but a raw checkpoint is read by legacy's
  Optimizer keys, FOM014 flagged: the migrated program fails there until the marked read is
  changed by hand), **half-migrated**
  (a defect: one optimizer object with some sites rewritten and others refused, objects as
  migrate's own analysis joins them, since its report names sites, not objects; or a member
  only a legacy optimizer has, ``.target`` / ``.apply_gradient`` / ``.state`` ..., read on a
  value migrate rewrote, in a function of one of its rewritten sites: on the expression that
  held it there, or on a name bound from a call given it, as score_flow's
  ``new_optimizer = optimize_fn(state, grad)`` then ``new_optimizer.target``; ``half_objects``
  and ``legacy_left`` in the JSON rows), **check
  passes, imports flax.optim** (after --write, --check exits 0 yet a file imports flax.optim
  or this package: a defect), **not idempotent** (the second run changes files: a defect),
  or **no flax.optim** (nothing to migrate);
* the jax names the program uses that today's jax lacks, before and after migrate (names
  resolved through the files' imports, checked by importing them here).

Prints a markdown table (one row per program, then counts per kind and outcome) on stdout.
"""
import argparse
import ast
import collections
import csv
import importlib
import json
import os
import signal
import sys
import time
import warnings

import libcst as cst

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# What today's jax lacks is measured on plain jax: the package's runtime layer, which gives the
# removed names back while flax.optim is in use, stays off (its switch is read at start-up).
if os.environ.get('FLAX_OPTIM_COMPAT_LEGACY_JAX') != '0':
  os.execve(sys.executable, [sys.executable, *sys.argv],
            {**os.environ, 'FLAX_OPTIM_COMPAT_LEGACY_JAX': '0'})

from flax_optim_compat._migrate import _command
from flax_optim_compat._migrate import _engine
from flax_optim_compat._migrate import _jax_table
from flax_optim_compat._migrate import _project
from flax_optim_compat._migrate import _sites
from flax_optim_compat._migrate import _unit

LEGACY_MODULES = ('flax.optim', 'flax_optim_compat')
DEFECTS = ('half-migrated', 'check passes, imports flax.optim', 'not idempotent')


def programs_of(corpus, tsv=None):
  """``[(id, kind)]``: from the TSV, or one per example folder / top folder."""
  if tsv:
    with open(tsv, newline='') as f:
      return [(row['id'], row.get('kind', '')) for row in csv.DictReader(f, delimiter='\t')]
  found = []
  for top in sorted(os.listdir(corpus)):
    path = os.path.join(corpus, top)
    if not os.path.isdir(path):
      continue
    if top.startswith('flax@'):
      for group in ('examples', 'linen_examples'):
        folder = os.path.join(path, group)
        if os.path.isdir(folder):
          found += [(f'{top}/{group}/{name}', '') for name in sorted(os.listdir(folder))
                    if os.path.isdir(os.path.join(folder, name))]
    else:
      found.append((top, ''))
  return found


def legacy_imports(source):
  """Whether a module imports flax.optim (any spelling) or this package."""
  try:
    tree = ast.parse(source)
  except SyntaxError:
    return False
  for node in ast.walk(tree):
    if isinstance(node, ast.Import) and any(a.name.startswith(LEGACY_MODULES)
                                            for a in node.names):
      return True
    if isinstance(node, ast.ImportFrom) and node.module and (
        node.module.startswith(LEGACY_MODULES) or
        node.module == 'flax' and any(a.name == 'optim' for a in node.names)):
      return True
  return False


_RESOLVED = {}


def _resolves(dotted):
  """Whether ``dotted`` is a module, or an attribute chain of one, in today's jax."""
  if dotted not in _RESOLVED:
    parts = dotted.split('.')
    ok = False
    for i in range(len(parts), 0, -1):
      try:
        with warnings.catch_warnings():
          warnings.simplefilter('ignore')
          obj = importlib.import_module('.'.join(parts[:i]))
      except Exception:  # pylint: disable=broad-except
        continue
      try:
        for part in parts[i:]:
          obj = getattr(obj, part)
        ok = True
      except AttributeError:
        ok = False
      break
    _RESOLVED[dotted] = ok
  return _RESOLVED[dotted]


def _jax_aliases(tree):
  """Local name -> the jax module or name it was imported as (any scope: a measurement)."""
  aliases = {}
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      for a in node.names:
        if a.name == 'jax' or a.name.startswith('jax.'):
          if a.asname:
            aliases[a.asname] = a.name
          else:
            aliases[a.name.split('.')[0]] = a.name.split('.')[0]
    elif isinstance(node, ast.ImportFrom) and node.module and not node.level and (
        node.module == 'jax' or node.module.startswith('jax.')):
      for a in node.names:
        if a.name != '*':
          aliases[a.asname or a.name] = f'{node.module}.{a.name}'
  return aliases


def _chain(node):
  """``['jnp', 'DeviceArray']`` for a pure chain of names and attributes, else None."""
  parts = []
  while isinstance(node, ast.Attribute):
    parts.append(node.attr)
    node = node.value
  if not isinstance(node, ast.Name):
    return None
  return [node.id] + parts[::-1]


def _bound_in(function):
  """The names a function binds itself (its parameters, the targets it assigns, its imports),
  less those it declares global or nonlocal: within it they are not the module's names."""
  args = function.args
  names = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs,
                           *filter(None, [args.vararg, args.kwarg])]}
  free = set()
  stack = list(function.body)
  while stack:
    node = stack.pop()
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
      if not isinstance(node, ast.Lambda):
        names.add(node.name)
      continue      # a nested scope binds its own names
    if isinstance(node, (ast.Global, ast.Nonlocal)):
      free.update(node.names)
    elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
      names.add(node.id)
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
      names.update((a.asname or a.name).split('.')[0] for a in node.names)
    stack.extend(ast.iter_child_nodes(node))
  return names - free


def _with_local_names(tree):
  """Every node of ``tree`` with the names that the functions around it bind locally (a
  parameter ``config`` is not the module's ``from jax.config import config``)."""
  stack = [(tree, frozenset())]
  while stack:
    node, shadowed = stack.pop()
    yield node, shadowed
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
      inner = shadowed | _bound_in(node) if not isinstance(node, ast.Lambda) else (
          shadowed | {a.arg for a in node.args.args})
      for child in ast.iter_child_nodes(node):
        # the parameters' defaults and annotations, the decorators and the return annotation
        # are evaluated outside the function
        outside = (child is node.args or child is getattr(node, 'returns', None)
                   or any(child is d for d in getattr(node, 'decorator_list', ())))
        stack.append((child, shadowed if outside else inner))
    else:
      stack.extend((child, shadowed) for child in ast.iter_child_nodes(node))


def missing_jax_names(sources):
  """The ``jax.*`` names the files use (resolved through their imports: ``jnp.DeviceArray``
  is ``jax.numpy.DeviceArray``) that today's jax lacks; imports of missing modules included."""
  missing = set()
  for source in sources.values():
    try:
      tree = ast.parse(source)
    except SyntaxError:
      continue
    aliases = _jax_aliases(tree)
    used = set(aliases.values())
    parents = {id(c) for n in ast.walk(tree) if isinstance(n, ast.Attribute)
               for c in [n.value]}
    for node, shadowed in _with_local_names(tree):
      if isinstance(node, (ast.Attribute, ast.Name)) and id(node) not in parents:
        chain = _chain(node)
        if chain and chain[0] in aliases and chain[0] not in shadowed:
          used.add('.'.join([aliases[chain[0]], *chain[1:]]))
    for name in used:
      aliased = _jax_table.aliased(name)   # ``jax.api.X`` is ``jax.X``: what X lacks is named
      parts = (aliased[1] if aliased else name).split('.')
      for i in range(2, len(parts) + 1):   # the shortest missing prefix
        if not _resolves('.'.join(parts[:i])):
          missing.add('.'.join(parts[:i]))
          break
  return sorted(missing)


class _Timeout(Exception):
  pass


# Members only a legacy ``Optimizer`` has: read on a value migrate rewrote into a TrainState
# (``.target`` where it now has ``.params``), they fail at run time.
LEGACY_MEMBERS = frozenset({'target', 'apply_gradient', 'optimizer_def', 'optimize', 'state',
                            'hyper_params', 'state_dict', 'restore_state'})
# Sites whose node is not a use of the object itself: a def, its create, a type.
_NOT_HELD = frozenset({'create', 'def', 'annotation'})
_METHODS = frozenset({'apply_gradient', 'optimize', 'replace', 'restore_state', 'state_dict'})


def _holder(site):
  """The expression that holds the optimizer at ``site`` (``state.optimizer`` of
  ``state.optimizer.target``, ``opt`` of ``opt.apply_gradient(g)`` or ``opt.state.step``), or
  None."""
  if site.kind in _NOT_HELD:
    return None
  node = site.node
  if isinstance(node, cst.Call):
    node = node.func
    if not (isinstance(node, cst.Attribute) and node.attr.value in _METHODS):
      return None
  while (isinstance(node, cst.Attribute) and
         node.attr.value in _METHODS | LEGACY_MEMBERS | {'step'}):
    node = node.value   # ``opt.state.step``: ``opt``
  if not isinstance(node, (cst.Name, cst.Attribute)):
    return None
  text = site.unit.code(node)
  return text if text.replace('.', '').replace('_', '').isalnum() else None


def objects_of(sources):
  """Migrate's own analysis of ``sources``: ``({(path, line): {object}}, {object: {holder
  expressions}})``, an object being the root its flows join (``_project``'s groups), or for a
  site no object covers (a subclass, a legacy name: FOM1xx), the site itself."""
  project = _project.Project(sources)
  at, holders = collections.defaultdict(set), collections.defaultdict(set)
  for site in _sites.sites(project):
    key = (project.groups.find(site.slot) if site.slot is not None
           else ('site', site.unit.path, site.line))
    at[(site.unit.path, site.line)].add(key)
    holder = _holder(site)
    if holder is not None:
      holders[key].add((site.unit.path, site.line, holder))
  return at, holders


def half_objects(records, at):
  """The objects with some sites rewritten and others refused (a program with one refused
  object and another whole one has none)."""
  status = collections.defaultdict(set)
  for r in records:
    for key in at.get((r.path, r.line), {('record', r.path, r.line)}):
      status[key].add('refused' if r.status == 'refused' else 'rewritten')
  return [key for key, seen in status.items() if seen == {'refused', 'rewritten'}], status


def _prefixes(text):
  parts = text.split('.')
  return {'.'.join(parts[:i]) for i in range(1, len(parts) + 1)} - {'self', 'cls'}


def legacy_members_left(sources, records, at, holders, status):
  """``['path:line expr.member']``: a legacy member read on a value migrate rewrote, in the
  function of one of the object's rewritten sites: on the expression that held it there, or on a
  name bound there from a call given that expression (or what holds it: ``new =
  optimize_fn(state, grad)`` then ``new.target``), where no site of the analysis is."""
  site_lines = {(r.path, r.line) for r in records}
  found = []
  for key, seen in status.items():
    if seen != {'rewritten'}:
      continue
    by_path = collections.defaultdict(list)
    for path, line, holder in holders.get(key, ()):
      by_path[path].append((line, holder))
    for path, held in by_path.items():
      tree = ast.parse(sources[path])
      for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
          continue
        inside = {h for line, h in held if fn.lineno <= line <= fn.end_lineno}
        if not inside:
          continue
        values = set().union(*map(_prefixes, inside))
        derived = set()
        for node in ast.walk(fn):
          if (isinstance(node, ast.Assign) and len(node.targets) == 1 and
              isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Call) and
              any(ast.unparse(a) in values for a in
                  [*node.value.args, *(k.value for k in node.value.keywords)])):
            derived.add(node.targets[0].id)
        for node in ast.walk(fn):
          if (isinstance(node, ast.Attribute) and node.attr in LEGACY_MEMBERS and
              (ast.unparse(node.value) in derived | inside) and
              (path, node.lineno) not in site_lines):
            found.append(f'{path}:{node.lineno} {ast.unparse(node)}')
  found += _field_reads_left(sources, site_lines, holders, status)
  return sorted(set(found))


def _field_reads_left(sources, site_lines, holders, status):
  """``x.<field>.target`` (or ``.apply_gradient`` / ``.optimizer_def``) at a line no site of
  the analysis is, in any file, where ``<field>`` is an attribute that held only objects migrate
  rewrote (a runner handed the agent reads ``agent.optimizer.target``): left legacy beside a
  rewritten object. A field that also held a refused object is not counted (its reads stay
  legacy on purpose)."""
  fields = collections.defaultdict(set)
  for key, held in holders.items():
    for _, _, holder in held:
      try:
        expr = ast.parse(holder.strip(), mode='eval').body
      except SyntaxError:
        continue
      if isinstance(expr, ast.Attribute):
        fields[expr.attr] |= status.get(key, set())
  rewritten = {f for f, seen in fields.items() if seen == {'rewritten'}}
  found = []
  for path, source in sources.items():
    try:
      tree = ast.parse(source)
    except SyntaxError:
      continue
    for node in ast.walk(tree):
      if (isinstance(node, ast.Attribute) and node.attr in _unit.OPTIMIZER_ONLY_READS
          and isinstance(node.value, ast.Attribute) and node.value.attr in rewritten
          and (path, node.lineno) not in site_lines):
        found.append(f'{path}:{node.lineno} {ast.unparse(node)}')
  return found


def _alarm(signum, frame):
  raise _Timeout()


def measure(folder, timeout):
  """One program's row (a dict)."""
  sources, _, unreadable, _ = _command.read([folder])
  row = {'files': len(sources), 'optim_files': sum(map(legacy_imports, sources.values())),
         'codes': [], 'jax_names_before': [], 'jax_names_left': [], 'seconds': 0.0}
  start = time.monotonic()
  signal.signal(signal.SIGALRM, _alarm)
  signal.alarm(timeout)
  try:
    changed, report = _engine.migrate_sources(sources, unreadable=unreadable)
    migrated = {**sources, **changed}
    # Nothing changed: the second run would see the same sources, so it is the first one.
    again, second = _engine.migrate_sources(migrated) if changed else ({}, report)
    row['jax_names_before'] = missing_jax_names(sources)
    row['jax_names_left'] = missing_jax_names(migrated)
    # Per object, by migrate's own analysis (the report names sites, not objects).
    half, legacy_left = [], []
    optimizer = [r for r in report.records if r.code[3] in '01']   # FOM0xx / FOM1xx
    if any(r.status != 'refused' for r in optimizer):
      at, holders = objects_of(sources)
      half, status = half_objects(optimizer, at)
      legacy_left = legacy_members_left(sources, optimizer, at, holders, status)
  except _Timeout:
    row.update(outcome='failed', codes=[f'timeout {timeout}s'])
    return row
  except Exception as e:  # pylint: disable=broad-except
    row.update(outcome='failed', codes=[f'{type(e).__name__}: {e}'[:120]])
    return row
  finally:
    signal.alarm(0)
    row['seconds'] = round(time.monotonic() - start, 1)
  rewritten = [r for r in optimizer if r.status != 'refused']
  refused = [r for r in optimizer if r.status == 'refused']
  # A file that does not parse (FOM198) is a refusal where it may use flax.optim, and only
  # named where it can use none (``skipped``); a rewritten file that did not compile (FOM199)
  # is a failure.
  unparsed = [r for r in report.failed if r.code == 'FOM198']
  refused += [r for r in unparsed if r.status == 'refused']
  broken = [r for r in report.failed if r.code != 'FOM198']
  row['not_parsed'] = [f'{os.path.relpath(r.path, folder)}:{r.line}' for r in unparsed]
  row['codes'] = sorted({r.code for r in refused} | {r.code for r in broken})
  row['jax_codes'] = sorted({r.code for r in report.records if r.code[3] == '2'})
  still_legacy = sorted(os.path.relpath(p, folder) for p, s in migrated.items()
                        if legacy_imports(s))
  row['still_imports_flax_optim'] = still_legacy
  row['half_objects'] = len(half)
  row['flagged_reads'] = [f'{os.path.relpath(r.path, folder)}:{r.line}' for r in report.records
                          if r.code == 'FOM014' and r.status == 'flagged']
  row['legacy_left'] = [text.replace(folder + os.sep, '', 1) for text in legacy_left]
  if again:
    outcome = 'not idempotent'
  elif broken:
    outcome = 'failed'
  elif half or legacy_left:
    outcome = 'half-migrated'
  elif refused:
    outcome = 'refused'
  elif still_legacy and second.exit_status() == 0:
    outcome = 'check passes, imports flax.optim'
  elif rewritten and not still_legacy and row['flagged_reads']:
    outcome = 'optimizers whole, checkpoint reads flagged'   # fails there until changed by hand
  elif rewritten and not still_legacy and any(r.code == 'FOM299' for r in report.records):
    outcome = 'optimizers whole, FOM299 left'   # a removed name no rule rewrites: fails today
  elif rewritten and not still_legacy:
    outcome = 'migrated whole'
  elif rewritten or still_legacy:
    outcome = 'refused'   # legacy imports left, --check fails on them
  else:
    outcome = 'no flax.optim'
  row['outcome'] = outcome
  return row


def table(rows):
  lines = ['| program | kind | files (flax.optim) | outcome | codes | missing jax names: '
           'before | after migrate | s |', '|---|---|---:|---|---|---:|---|---:|']
  for r in rows:
    codes = ', '.join(r['codes'] + [f'not parsed: {n}' for n in r.get('not_parsed', [])] +
                      [f'legacy left: {n}' for n in r.get('legacy_left', [])])
    left = ', '.join(f'`{n}`' for n in r['jax_names_left'])
    lines.append(f"| {r['program']} | {r['kind']} | {r['files']} ({r['optim_files']}) | "
                 f"{r['outcome']} | {codes} | {len(r.get('jax_names_before', []))} | {left} | "
                 f"{r['seconds']} |")
  counts = collections.Counter((r['kind'], r['outcome']) for r in rows)
  kinds = sorted({r['kind'] for r in rows})
  outcomes = sorted({r['outcome'] for r in rows})
  lines += ['', '| kind | ' + ' | '.join(outcomes) + ' | total |',
            '|---|' + '---:|' * (len(outcomes) + 1)]
  for kind in kinds:
    cells = [counts[(kind, o)] for o in outcomes]
    lines.append(f'| {kind or "-"} | ' + ' | '.join(map(str, cells)) + f' | {sum(cells)} |')
  before = sum(not r.get('jax_names_before', ['?']) for r in rows)
  after = sum(not r['jax_names_left'] for r in rows)
  lines.append(f'\nPrograms using no jax name that today\'s jax lacks: {before} of {len(rows)} '
               f'before migrate, {after} after.')
  return '\n'.join(lines)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('corpus')
  parser.add_argument('--programs', help='TSV with id (and kind) columns')
  parser.add_argument('--json', help='write the rows here as JSON')
  parser.add_argument('--only', help='programs whose id contains this')
  parser.add_argument('--timeout', type=int, default=600, help='seconds per program')
  args = parser.parse_args(argv)
  rows = []
  for program, kind in programs_of(args.corpus, args.programs):
    if args.only and args.only not in program:
      continue
    folder = os.path.join(args.corpus, program)
    if not os.path.isdir(folder):
      print(f'{program}: not in {args.corpus}', file=sys.stderr)
      continue
    row = {'program': program, 'kind': kind, **measure(folder, args.timeout)}
    print(f"{program}: {row['outcome']} {' '.join(row['codes'])} ({row['seconds']} s)",
          file=sys.stderr, flush=True)
    rows.append(row)
  if args.json:
    with open(args.json, 'w') as f:
      json.dump(rows, f, indent=1)
      f.write('\n')
  print(table(rows))
  return 1 if any(r['outcome'] in DEFECTS for r in rows) else 0


if __name__ == '__main__':
  sys.exit(main())
