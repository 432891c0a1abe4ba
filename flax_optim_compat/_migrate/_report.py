"""The report: one record per site, one conversion per rewritten optimizer, a summary."""
import dataclasses
import os
from typing import Callable, Dict, Iterable, List, Optional

STATUSES = ('rewritten', 'flagged', 'refused')
# A file that does not parse and can use no flax.optim object: named, left as it was, and no
# reason for exit status 2 (nothing in it is legacy).
SKIPPED = 'skipped'
NOT_READ = ("migrate skips a folder whose name starts with '.' (Jupyter's autosaves, caches, a "
            'virtualenv); name a file on the command line to migrate it')


@dataclasses.dataclass
class Record:
  """One site: where, which rule or refusal code, what happened."""
  path: str
  line: int
  code: str
  status: str            # rewritten / flagged / refused (a failed file: refused / skipped)
  exactness: str         # bit-exact / 1e-6 / not exact / '' (refused)
  message: str

  @classmethod
  def of(cls, site, status, code=None, exact=None, message=''):
    code = code or (site.refusal.code if site.refusal else '')
    if exact is None:
      exact = '' if status == 'refused' else 'bit-exact'
    return cls(site.unit.path, site.line, code, status, exact, message)


@dataclasses.dataclass
class Conversion:
  """A rewritten optimizer: the optax expression emitted and the command for its checkpoints."""
  path: str
  line: int
  expression: str
  exactness: str
  command: str
  notes: List[str]


@dataclasses.dataclass
class Report:
  records: List[Record]
  conversions: List[Conversion]
  changed: List[str]                  # files with a change (proposed or written)
  failed: List[Record]                # files left as they were: unparsable, not compiling
  # folders whose name starts with '.' that the command did not read -> their .py files
  not_read: Dict[str, int] = dataclasses.field(default_factory=dict)

  def relocate(self, shown: Callable[[str], str], paths: Iterable[str]) -> None:
    """Every path of the report as ``shown`` writes it: records, their messages, conversions.

    ``paths``: the project's files, as the analysis named them (absolute).
    """
    renames = sorted(((p, shown(p)) for p in paths), key=lambda pair: -len(pair[0]))

    def text(value: str) -> str:
      for old, new in renames:
        value = value.replace(old, new)
      return value
    for record in self.records + self.failed:
      record.path, record.message = shown(record.path), text(record.message)
    for conversion in self.conversions:
      conversion.path = shown(conversion.path)
      conversion.notes = [text(note) for note in conversion.notes]
    self.changed = [shown(p) for p in self.changed]
    self.not_read = {shown(folder): n for folder, n in self.not_read.items()}

  def exit_status(self) -> int:
    """0 nothing to change, 1 changes proposed or written, 2 anything refused or failed."""
    if any(r.status == 'refused' for r in self.records + self.failed):
      return 2
    return 1 if self.changed else 0

  def as_dict(self) -> dict:
    return {
        'sites': [dataclasses.asdict(r) for r in self.records + self.failed],
        'optimizers': [dataclasses.asdict(c) for c in self.conversions],
        'changed_files': self.changed,
        'exit_status': self.exit_status(),
        'not_read': [{'path': folder, 'py_files': n} for folder, n in self.not_read.items()],
    }

  def summary(self, written: Optional[bool]) -> str:
    counts = {s: sum(r.status == s for r in self.records) for s in STATUSES}
    verb = 'rewrote' if written else 'would rewrite'
    failed = sum(r.status != SKIPPED for r in self.failed)
    lines = [f'{verb} {len(self.changed)} file(s): {counts["rewritten"]} site(s) rewritten, '
             f'{counts["flagged"]} flagged, {counts["refused"]} refused, '
             f'{failed} file(s) failed']
    if failed < len(self.failed):
      lines[0] += (f', {len(self.failed) - failed} not parsed or not compiled (no flax.optim '
                   'in them)')
    if self.not_read:
      lines[0] += (f', {sum(self.not_read.values())} .py file(s) not read (in folders whose '
                   "name starts with '.')")
    for r in self.records + self.failed:
      if r.status != 'rewritten':
        lines.append(f'  {r.path}:{r.line}: {r.code} {r.status}: {r.message}')
    lines += [f'  {folder}{os.sep}: {n} .py file(s) not read: {NOT_READ}'
              for folder, n in self.not_read.items()]
    return '\n'.join(lines)
