#!/usr/bin/env python3
"""Rebuilds a corpus folder from ``programs.tsv`` out of local git clones (stdlib + git only).

For every row, the ``.py`` files under the row's directories at the row's ref are written to
``OUT/<folder>/<their path in the repository>``, where ``<folder>`` is the first component of
the row's id (``<owner>+<name>@<short ref>``, or ``flax@<tag>`` for flax's own examples).
Each repository must be available as a git directory (bare or not) holding the ref:

    python tools/corpus/materialize.py OUT --repos CLONES
        # CLONES/<owner>+<name> (or .../repo, .../repo/.git, .../.git) for each repository

``--seed FILE`` (repository, ref, directories per line, tab-separated) instead builds new rows:
it resolves the ref, writes the files, classifies each program with ``scan.py`` and prints the
resulting ``programs.tsv`` rows.
"""
import argparse
import csv
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scan  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
COLUMNS = ['id', 'repository', 'ref', 'directory', 'kind', 'flax_optim']


def git_dir(repos, repository):
  base = os.path.join(repos, repository.replace('/', '+'))
  for cand in (os.path.join(base, 'repo'), os.path.join(base, 'repo', '.git'),
               os.path.join(base, '.git'), base):
    if os.path.isdir(cand) and os.path.exists(os.path.join(cand, 'HEAD')):
      return cand
  raise SystemExit(f'no git directory for {repository} under {repos}')


def git(gd, *args):
  return subprocess.run(['git', '--git-dir', gd, *args], check=True,
                        capture_output=True).stdout


def folder_name(repository, ref):
  if repository == 'google/flax':
    return f'flax@{ref}'
  return f'{repository.replace("/", "+")}@{ref[:8] if is_commit(ref) else ref}'


def is_commit(ref):
  return len(ref) >= 7 and all(c in '0123456789abcdef' for c in ref)


def extract(gd, ref, directories, dest):
  """Writes the .py files under `directories` at `ref` below dest; returns their count."""
  n = 0
  for d in directories:
    spec = [] if d == '.' else ['--', d]
    names = git(gd, 'ls-tree', '-r', '--name-only', ref, *spec).decode().splitlines()
    for name in names:
      if not name.endswith('.py'):
        continue
      out = os.path.join(dest, name)
      if not os.path.exists(out):
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with open(out, 'wb') as f:
          f.write(git(gd, 'show', f'{ref}:{name}'))
      n += 1
  return n


def program_files(root, row):
  folder = row['id'].split('/')[0]
  files = set()
  for d in row['directory'].split(','):
    base = os.path.join(root, folder, '' if d == '.' else d)
    for dirpath, _, filenames in os.walk(base):
      files.update(os.path.join(dirpath, f) for f in filenames if f.endswith('.py'))
  return sorted(files)


def classify(root, row):
  scans = [fs for fs in map(scan.scan_file, program_files(root, row)) if fs is not None]
  return scan.kind_of(scans), ' '.join(scan.optim_names(scans)) or '-'


def read_tsv(path):
  with open(path, newline='') as f:
    return list(csv.DictReader(f, delimiter='\t'))


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  ap.add_argument('out')
  ap.add_argument('--repos', required=True, help='folder of git clones, <owner>+<name> each')
  ap.add_argument('--programs', default=os.path.join(HERE, 'programs.tsv'))
  ap.add_argument('--seed', help='repository<TAB>ref<TAB>dir[,dir...] lines: build new rows')
  args = ap.parse_args(argv)

  if args.seed:
    w = csv.writer(sys.stdout, delimiter='\t', lineterminator='\n')
    for line in open(args.seed):
      if not line.strip() or line.startswith('#'):
        continue
      repository, ref, dirs = line.rstrip('\n').split('\t')[:3]
      gd = git_dir(args.repos, repository)
      if is_commit(ref):
        ref = git(gd, 'rev-parse', ref).decode().strip()[:12]
      folder = folder_name(repository, ref)
      directories = dirs.split(',')
      extract(gd, ref, directories, os.path.join(args.out, folder))
      pid = folder if directories[0] == '.' else f'{folder}/{directories[0]}'
      row = {'id': pid, 'repository': repository, 'ref': ref, 'directory': dirs}
      w.writerow([pid, repository, ref, dirs, *classify(args.out, row)])
    return 0

  for row in read_tsv(args.programs):
    gd = git_dir(args.repos, row['repository'])
    folder = row['id'].split('/')[0]
    n = extract(gd, row['ref'], row['directory'].split(','), os.path.join(args.out, folder))
    print(f'{row["id"]}\t{n} files', file=sys.stderr)
  return 0


if __name__ == '__main__':
  sys.exit(main())
