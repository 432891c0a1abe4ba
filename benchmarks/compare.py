"""Markdown tables of the performance-target ratios from ``bench.py`` JSON files.

  .venv/bin/python benchmarks/compare.py results/after_subset.json            # one run
  .venv/bin/python benchmarks/compare.py results/before_subset.json results/after_subset.json

Ratios (each row's raw seconds / bytes, recomputed from the JSON, not read from its ``ratios``):

* ``step``, ``lower``, ``compile``: ours / hand-written optax (jitted donated step, cold
  trace+lower, cold XLA compile); targets <= 1.03, <= 1.0, <= 1.0;
* ``eager/legacy``: un-jitted ``Optimizer.apply_gradient``, ours / flax 0.5.3; target <= 1.0;
* ``temp/leaf``: ``memory_analysis()`` temp bytes of our donated step / the largest leaf;
  target <= 1.0;
* ``restore/raw``: ``restore_checkpoint`` of a legacy file / ``msgpack_restore`` of its bytes;
  target <= 1.5;
* ``restore/optax``: the same ``restore_checkpoint`` / ``restore_checkpoint`` of the optax
  layout ``(params, opt_state)`` of the same tree (flax's own per-call cost divided out; no
  target, shown for reading ``restore/raw``; runs from before this column have none).

With two files each cell reads ``before -> after``; a ratio over its target is marked ``*``.
"""
import json
import sys

# (column, target, function of a result row -> ratio or None)


def _pair(metric, num='ours', den='optax'):
  def get(res):
    m = (res.get('ours') or {}).get(metric) or {}
    a, b = m.get(num), m.get(den)
    return a / b if a is not None and b else None
  return get


def _eager_legacy(res):
  ours = ((res.get('ours') or {}).get('eager') or {}).get('ours')
  legacy = (res.get('legacy') or {}).get('eager_s')
  return ours / legacy if ours is not None and legacy else None


def _temp(res):
  mem = ((res.get('ours') or {}).get('memory') or {}).get('ours')
  return mem['temp_over_largest_leaf'] if mem else None


RATIOS = (
    ('step/optax', 1.03, _pair('step')),
    ('lower/optax', 1.0, _pair('lower')),
    ('compile/optax', 1.0, _pair('compile')),
    ('eager/legacy', 1.0, _eager_legacy),
    ('temp/leaf', 1.0, _temp),
    ('restore/raw', 1.5, _pair('restore', 'restore_checkpoint', 'msgpack_restore')),
    ('restore/optax', float('inf'),
     _pair('restore', 'restore_checkpoint', 'restore_checkpoint_optax')),
)


def _fmt(value, target):
  if value is None:
    return ''
  return f'{value:.2f}' + ('*' if value > target else '')


def _header(report, label):
  m = report['meta']
  return (f'{label}: {m["date"]}, {m.get("cpu") or m["machine"]}, {m["cpu_count"]} cores, '
          f'{m["backend"]}, jax {m["jax"]}, optax {m["optax"]}, mode {m["mode"]}, '
          f'git {m.get("git")}')


def _rows(report):
  return {(r['case'], r['optimizer']): r for r in report['results']}


def table(reports):
  keys = list(dict.fromkeys(k for rep in reports for k in _rows(rep)))
  rows = [_rows(rep) for rep in reports]
  lines = ['| case | optimizer | ' + ' | '.join(name for name, _, _ in RATIOS) + ' |',
           '|---|---|' + '---:|' * len(RATIOS)]
  met = {name: [0, 0] for name, _, _ in RATIOS}
  for key in keys:
    cells = []
    for name, target, get in RATIOS:
      values = [get(r[key]) if key in r else None for r in rows]
      if all(v is None for v in values):
        note = next((r[key]['ours'].get('skipped') for r in rows
                     if key in r and 'skipped' in (r[key].get('ours') or {})), None)
        cells.append('n/a' if note else '')
        continue
      cells.append(' -> '.join(_fmt(v, target) or '-' for v in values))
      if values[-1] is not None:
        met[name][0] += values[-1] <= target
        met[name][1] += 1
    lines.append(f'| {key[0]} | {key[1]} | ' + ' | '.join(cells) + ' |')
  summary = 'targets met (last file): ' + ', '.join(
      f'{name} <= {target:g}: {met[name][0]}/{met[name][1]}' for name, target, _ in RATIOS
      if target != float('inf'))
  return '\n'.join(lines), summary


def main(paths):
  if not 1 <= len(paths) <= 2:
    sys.exit(__doc__)
  reports = []
  for path in paths:
    with open(path) as f:
      reports.append(json.load(f))
  labels = ['before', 'after'] if len(reports) == 2 else ['run']
  for label, report in zip(labels, reports):
    print(_header(report, label) + '  ')
  print()
  lines, summary = table(reports)
  print(lines)
  print()
  print(summary + ' (* = over target)')
  for label, report in zip(labels, reports):
    for row in report['results']:
      if 'skipped' in (row.get('ours') or {}):
        print(f'{label}: {row["case"]} {row["optimizer"]} skipped: {row["ours"]["skipped"]}')
      legacy = row.get('legacy') or {}
      if 'timeout_s' in legacy or 'error' in legacy:
        print(f'{label}: legacy {row["case"]} {row["optimizer"]}: '
              + ('timed out' if 'timeout_s' in legacy else legacy['error']))


if __name__ == '__main__':
  main(sys.argv[1:])
