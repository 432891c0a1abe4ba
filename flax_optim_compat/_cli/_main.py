"""``flax-optim-compat`` / ``python -m flax_optim_compat``: inspect, convert and diff legacy checkpoints.

Exit status: 0 success (``diff``: the checkpoints agree within ``--rtol``/``--atol``), 1 ``diff``
found differences, 2 bad input, an existing output or a full disk (one line on stderr naming
what is wrong; nothing is written), 130 interrupted (Ctrl-C: one line, nothing is left
behind), 141 the reader of stdout went away (e.g. ``| head``: no message). With ``--json``
every outcome is JSON on stdout, a failure ``{"error": "<the line>", "code": <the status>}``.
"""
import argparse
import contextlib
import errno
import json
import logging
import os
import shlex
import signal
import sys
import warnings
from typing import List, Optional

import flax_optim_compat as optim
from .. import _deprecation
from .. import convert
from . import _demo as demo
from . import _install
from ._feedback import Feedback
from .._expr._core import UsageError
from .._expr._core import one_line
from .._expr._optimizer import parse_optimizer
from .._expr._optimizer import path_regexes
from .._expr._tx import canonical_tx
from .._expr._tx import parse_tx

_PROG = 'flax-optim-compat'

_EPILOG = """\
examples:
  %(prog)s demo
  %(prog)s inspect ckpts/checkpoint_1000
  %(prog)s inspect ckpts/ --json --depth 3
  %(prog)s convert ckpts/ --optimizer "Adam(learning_rate=1e-3, weight_decay=1e-4)" \\
      --to train-state --out state.msgpack
  %(prog)s convert ckpts/ --optimizer "Momentum(0.1, beta=0.9)" --to orbax --out orbax_ckpt
  %(prog)s convert orbax_ckpt --optimizer "Momentum(0.1, beta=0.9)" --to legacy --out legacy.msgpack
  %(prog)s convert ckpts/ --optimizer "Adam(1e-3)" --tx "optax.inject_hyperparams(optax.adam)(1e-3)" \\
      --to train-state --out state.msgpack
  %(prog)s convert ckpts/ --optimizer "MultiOptimizer((ModelParamTraversal('kernel$'), Adam(1e-3)), \\
      (ModelParamTraversal('bias$'), Momentum(0.1)))" --to orbax --out orbax_ckpt
  %(prog)s diff run_a/checkpoint_1000 run_b/checkpoint_1000 --rtol 1e-5
  %(prog)s migrate src/ --report migrate.json

exit status: 0 ok (diff: same within --rtol/--atol), 1 diff found differences,
  2 bad input, existing output or full disk (one line on stderr; nothing written),
  130 interrupted (nothing left behind), 141 stdout closed early (e.g. | head).
  with --json, a failure is {"error": "...", "code": N} on stdout instead.
  migrate: 0 nothing to change, 1 changes proposed or written, 2 anything refused or failed.
"""


# ----------------------------------------------------------------------------- output helpers


def _feedback(args) -> Feedback:
  """The step line on stderr: on a terminal only, never with ``--quiet``."""
  return Feedback.for_stream(sys.stderr, args.quiet)


def _read_progress(feedback: Feedback, path, then=None):
  """The read's ``progress`` callback (a bar) for a checkpoint file; for an orbax folder the
  read is one step without a bar (and ``then`` is part of it)."""
  if not feedback.enabled:
    return None
  try:
    return feedback.read_progress(convert.checkpoint_file(path), then)
  except convert.CheckpointError:
    feedback.start(f'reading {path}' + (f', then {then}' if then else ''))
    return None


# ----------------------------------------------------------------------------- commands


def _cmd_inspect(args, out) -> int:
  feedback = _feedback(args)
  with feedback.steps():
    info = convert.inspect(args.path, progress=_read_progress(feedback, args.path))
  if args.json:
    json.dump(info.as_dict(), out, indent=1)
    out.write('\n')
    return 0
  out.write(info.summary() + '\n')
  if os.path.isdir(args.path):
    out.write(f'  read: {info.source}\n')
  if len(info.groups) > 1:
    for name, params in info.groups:
      out.write(f'  group {name}: {", ".join(params)}\n')
  for note in info.notes:
    out.write(f'  note: {note}\n')
  out.write(info.tree(args.depth) + '\n')
  return 0


def _target_txs(args, opt_def):
  """``(tx argument, its source text)`` of the ``--tx`` options (``(None, None)``: none given).

  A MultiOptimizer takes ``--tx`` once per group, in order, or once as its own
  ``optax.multi_transform``; anything else takes it once.
  """
  if not args.tx:
    return None, None
  txs = [parse_tx(text) for text in args.tx]
  texts = [canonical_tx(text) for text in args.tx]
  if isinstance(opt_def, optim.MultiOptimizer):
    groups = len(opt_def.sub_optimizers)
    if len(txs) == 1 and texts[0].startswith('optax.multi_transform('):
      return txs[0], texts[0]   # your own: its labels are mapped to the groups by their params
    if len(txs) != groups:
      raise UsageError(f'--tx: the MultiOptimizer has {groups} groups; give --tx once per '
                       f'group, in order, or one optax.multi_transform (got {len(txs)}).')
    return txs, texts
  if len(txs) != 1:
    raise UsageError(f'--tx given {len(txs)} times; {type(opt_def).__name__} takes one (only '
                     'a MultiOptimizer takes one per group).')
  return txs[0], texts[0]


def _labels_text(opt_def) -> Optional[str]:
  """``param_labels`` for a MultiOptimizer of ``ModelParamTraversal('REGEX')`` groups."""
  regexes = path_regexes(opt_def)
  if not regexes:
    return None
  pairs = ', '.join(f'({str(i)!r}, {r.pattern!r})' for i, r in enumerate(regexes))
  return ('param_labels = lambda params: flax.traverse_util.path_aware_map(lambda path, _: '
          f"next((label for label, regex in ({pairs},) if re.search(regex, '/' + "
          "'/'.join(path))), 'unmatched'), params)")


def _cmd_convert(args, out) -> int:
  to = convert.output_format(args.to)
  if args.step is not None and not to.reads_converted:
    raise UsageError('--step applies to ' + ' or '.join(
        f'--to {f.name}' for f in convert.output_formats() if f.reads_converted) +
        ' (the legacy step of a converted file); a legacy input has its own step.')
  opt_def = parse_optimizer(args.optimizer)
  tx, tx_text = _target_txs(args, opt_def)
  feedback = _feedback(args)
  progress = _read_progress(feedback, args.path, then='probing the conversion')
  writing = f'writing {args.out}'
  with warnings.catch_warnings(record=True) as caught, feedback.steps():
    warnings.simplefilter('always', convert.ConversionWarning)
    convert.check_new_output(args.out)
    if to.reads_converted:
      if args.keep_layout or args.replica is not None:
        raise UsageError(f'--keep-layout and --replica apply to a legacy input; --to {to.name} '
                         'restores the layout the converted file has.')
      feedback.start(f'converting {args.path} back to the legacy layout, {writing}')
      back = convert.legacy_from_converted(args.path, opt_def, tx=tx, step=args.step)
      to.write(args.out, back)
      found = convert.inspect(back)
      result = None
    else:
      result = convert.convert_checkpoint(args.path, opt_def, tx=tx,
                                          keep_layout=args.keep_layout, replica=args.replica,
                                          progress=progress,
                                          accept_difference=args.accept_difference,
                                          tx_source=tx_text)
      # Every --to keeps the train state's step: `optax` differs from `train-state` only in
      # the load code printed (a dict template; flax ignores the keys a dict template lacks).
      feedback.start(writing + to.write_steps)
      to.write(args.out, result.state_dict)
  warned = [str(w.message) for w in caught if issubclass(w.category, convert.ConversionWarning)]
  if not args.json:
    for warning in warned:
      sys.stderr.write(f'{_PROG} convert: warning: {warning}\n')
  if result is None:
    if args.json:
      _write_json(out, {'out': args.out, 'to': to.name, 'warnings': warned,
                        'inspect': found.as_dict()})
    else:
      out.write(f'wrote {args.out} ({to.name}): {found.summary()}\n')
    return 0
  load_with = result.load_with or tx_text  # the conversion renders a MultiOptimizer's --tx list
  own_multi = isinstance(opt_def, optim.MultiOptimizer) and isinstance(tx_text, str)
  labels = (_labels_text(opt_def) if isinstance(opt_def, optim.MultiOptimizer) and not own_multi
            else None)
  code = to.load_code(result.state_dict, args.out, tx=load_with, labels=labels)
  step = int(result.train_state.step)
  if args.json:
    _write_json(out, {'out': args.out, 'to': to.name, 'step': step, 'tx': load_with,
                      'param_labels': labels, 'load_code': code, 'notes': list(result.notes),
                      'probe': result.probe.summary(), 'accepted': result.accepted,
                      'warnings': warned})
    return 0
  out.write(f'wrote {args.out} ({to.name}, step {step}): load it with tx={load_with}\n')
  if isinstance(opt_def, optim.MultiOptimizer) and not own_multi:
    out.write('  labels: one per group in order (\'0\', \'1\', ...), \'unmatched\' for the '
              'params no group selects' + (f'; {labels}' if labels else '') + '\n')
  out.write(f'  probe: {result.probe.summary()}\n')
  if result.accepted:
    out.write(f'  accepted (--accept-difference): {result.accepted}\n')
  if code is not None:
    out.write('  load it in plain flax + optax (`params`' + (', and each carried key by its '
              'name,' if to.carried_by_name else '') + ' from your model: for the structure):\n')
    out.write(''.join(f'    {line}\n'.rstrip(' ') if line else '\n'
                      for line in code.splitlines()))
  for note in result.notes:
    out.write(f'  note: {note}\n')
  return 0


def _write_json(out, value) -> None:
  json.dump(value, out, indent=1)
  out.write('\n')


def _cmd_diff(args, out) -> int:
  opt_def = parse_optimizer(args.optimizer) if args.optimizer else None
  if args.tx and opt_def is None:
    raise UsageError('--tx converts the legacy side into that transformation; give '
                     '--optimizer too (the optimizer that wrote the legacy file).')
  tx = _target_txs(args, opt_def)[0] if opt_def is not None else None
  feedback = _feedback(args)
  with feedback.steps():
    feedback.start(f'comparing {args.a} and {args.b}')
    result = convert.diff(args.a, args.b, opt_def, tx=tx)
  same = result.same(args.rtol, args.atol)
  hint = _diff_hint(result, args) if not same else None
  if args.json:
    _write_json(out, dict(result.as_dict(args.rtol, args.atol), hint=hint))
    return 0 if same else 1
  tolerance = f'rtol {args.rtol:g}' + (f', atol {args.atol:g}' if args.atol else '')
  for path in result.only_a:
    out.write(f'only in A: {path}\n')
  for path in result.only_b:
    out.write(f'only in B: {path}\n')
  for path, what in result.mismatched:
    out.write(f'different kind: {path}: {what}\n')
  for path, what in result.differing:
    out.write(f'{path}  {what}\n')
  for path, max_abs, max_rel in result.leaves:
    if not result.leaf_same(max_abs, max_rel, args.rtol, args.atol) or args.all:
      out.write(f'{path}  max abs {max_abs:.3g}  max rel {max_rel:.3g}\n')
  out.write(f'{"same" if same else "different"} ({tolerance}): {result.compared} leaves '
            f'compared, max abs {result.max_abs:.3g}, max rel {result.max_rel:.3g}, '
            f'{len(result.differing)} exact differences, {result.structural} structural '
            'differences\n')
  for name, path in (('A', args.a), ('B', args.b)):
    if os.path.isdir(path):
      with contextlib.suppress(convert.CheckpointError):  # an orbax directory is read whole
        out.write(f'  read {name}: {convert.checkpoint_file(path)}\n')
  if hint:
    out.write(f'  hint: {hint}\n')
  return 0 if same else 1


def _diff_hint(result, args) -> Optional[str]:
  """What would make the two sides comparable, where their layouts differ."""
  if not result.layouts_differ or args.optimizer:
    return None
  legacy, converted = ('A', 'B') if result.legacy_side == 0 else ('B', 'A')
  path = (args.a, args.b)[result.legacy_side]
  return (f'{legacy} is a legacy checkpoint and {converted} a converted one, so their paths '
          f'differ: add --optimizer "<the optimizer that wrote {legacy}>", as given to convert '
          f'(`{_PROG} inspect {shlex.quote(path)}` names its family), to convert {legacy} first and compare '
          'them leaf by leaf')


# ----------------------------------------------------------------------------- demo


def _cmd_demo(args, out) -> int:
  demo.story(main, args.steps, out)
  return 0


# ----------------------------------------------------------------------------- migrate


def _cmd_migrate(args, out) -> int:
  try:
    # LibCST is an optional extra: imported here, on the migrate path only, so the package and
    # the other commands work without it.
    from flax_optim_compat._migrate import _command  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    if not (e.name or '').startswith('libcst'):
      raise
    sys.stderr.write(f'{_PROG} migrate: needs LibCST: {_install.pip_command("migrate")}\n')
    return 2
  feedback = _feedback(args)
  with feedback.steps():
    return _command.run(args, out, step=feedback.start, steps_done=feedback.finish)


# ----------------------------------------------------------------------------- main


class _ArgumentsRefused(Exception):
  """A usage error found by argparse: ``prog`` (e.g. ``flax-optim-compat convert``) and why."""

  def __init__(self, prog: str, message: str):
    super().__init__(message)
    self.prog = prog


class _Parser(argparse.ArgumentParser):
  """An argument parser whose errors are reported as every other error is (exit status 2)."""

  def error(self, message):
    raise _ArgumentsRefused(self.prog, message)


def _non_negative_int(text: str) -> int:
  try:
    value = int(text)
  except ValueError:
    value = -1
  if value < 0:
    raise argparse.ArgumentTypeError(f'expected a non-negative integer, not {text!r}')
  return value


def _tolerance(text: str) -> float:
  try:
    value = float(text)
  except ValueError:
    value = float('nan')
  if not 0 <= value < float('inf'):
    raise argparse.ArgumentTypeError(f'expected a finite non-negative number, not {text!r}')
  return value


_QUIET_HELP = ('no step line on stderr (on a terminal, each step that lasts over a second - '
               'reading, probing, writing, orbax\'s commit - is shown with its time)')


def _parser() -> argparse.ArgumentParser:
  parser = _Parser(
      prog=_PROG, formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_EPILOG,
      description='Inspect, convert and diff legacy flax.optim (flax <= 0.5.3) msgpack '
                  'checkpoints: to optax state, a flax TrainState, orbax, and back.')
  parser.add_argument('--version', action='version', version=f'%(prog)s {optim.__version__}',
                      help='the version of flax_optim_compat, and exit')
  sub = parser.add_subparsers(dest='command', required=True, metavar='COMMAND')

  p = sub.add_parser('inspect', help='what is in a checkpoint: optimizer, step, tree')
  p.add_argument('path', help='a msgpack checkpoint file (legacy or converted), a directory of '
                              'checkpoint_<N> files (the newest is read), or an orbax checkpoint '
                              'folder (as convert --to orbax writes)')
  p.add_argument('--json', action='store_true', help='machine-readable output')
  p.add_argument('--quiet', '-q', action='store_true', help=_QUIET_HELP)
  p.add_argument('--depth', type=_non_negative_int, default=None,
                 help='collapse the tree below this depth (0: one line for the whole tree)')
  p.set_defaults(run=_cmd_inspect)

  p = sub.add_parser('convert', help='legacy checkpoint -> optax / TrainState / orbax, and back')
  p.add_argument('path', help='the input checkpoint (for --to legacy: a converted one)')
  p.add_argument('--optimizer', required=True,
                 help='the optimizer that wrote it, e.g. "Adam(learning_rate=1e-3, '
                      'weight_decay=1e-4)" or "WeightNorm(Momentum(0.1))"')
  formats = convert.output_formats()
  p.add_argument('--to', required=True, choices=[f.name for f in formats],
                 help='; '.join(f'{f.name}: {f.help}' for f in formats))
  p.add_argument('--out', required=True, help='the output path (must not exist)')
  p.add_argument('--tx', action='append', default=None, metavar='EXPR',
                 help='the optax transformation to convert into, as optax Python (parsed, never '
                      'evaluated), e.g. "optax.adamw(learning_rate=1e-3, weight_decay=1e-4)" or '
                      '"optax.inject_hyperparams(optax.adam)(learning_rate=1e-3)"; for a '
                      'MultiOptimizer once per group, in order, or once as your own '
                      'optax.multi_transform (labels as a literal tree; mapped to the groups '
                      'by the params they cover). Default: the plain optax '
                      'expression that continues the legacy numbers (the output says which)')
  p.add_argument('--accept-difference', action='store_true',
                 help='write the output even where the probe (legacy and the target run side '
                      'by side for a few updates before anything is written) finds the target '
                      'beyond its class; the output then says what was accepted')
  p.add_argument('--keep-layout', action='store_true',
                 help='keep the file\'s tree and replace only the optimizer node by the '
                      'TrainState fields {step, params, opt_state} (for a dataclass whose '
                      'optimizer field became a TrainState); default: the flat TrainState '
                      'fields with every key beside the optimizer as a field beside them')
  p.add_argument('--replica', type=int, default=None, metavar='N',
                 help='a file saved with a leading device axis on every leaf: convert replica '
                      'N (default: replica 0, after checking that all replicas agree)')
  p.add_argument('--json', action='store_true',
                 help='machine-readable output: the output, step, tx, the code that loads it, '
                      'notes and warnings')
  p.add_argument('--quiet', '-q', action='store_true', help=_QUIET_HELP)
  p.add_argument('--step', type=int, default=None,
                 help='--to legacy: the legacy step, for a converted file whose optax state '
                      'keeps no count (e.g. Momentum); default: the count, else the file\'s step')
  p.set_defaults(run=_cmd_convert)

  p = sub.add_parser('diff', help='per-leaf max abs / rel differences of two checkpoints')
  p.add_argument('a', help='the first checkpoint (A): a msgpack file, a directory of '
                           'checkpoint_<N> files or an orbax folder')
  p.add_argument('b', help='the second checkpoint (B), as A; a legacy file and a converted one '
                           'compare leaf by leaf with --optimizer')
  p.add_argument('--rtol', type=_tolerance, default=0.0,
                 help='float leaves with max|a-b| / max(|a|,|b|) <= RTOL count as the same '
                      '(default 0: equal values; NaN equals NaN and inf equals inf at the '
                      'same place; integer, bool and other leaves always compare exactly)')
  p.add_argument('--atol', type=_tolerance, default=0.0,
                 help='float leaves with max|a-b| <= ATOL count as the same (default 0)')
  p.add_argument('--optimizer', default=None,
                 help='convert legacy sides to the TrainState layout first (compare a legacy '
                      'file with a converted one)')
  p.add_argument('--tx', action='append', default=None, metavar='EXPR',
                 help='with --optimizer: the optax transformation the legacy side converts '
                      'into, as for convert (once per group for a MultiOptimizer, or one '
                      'optax.multi_transform); default: '
                      'the plain optax expression')
  p.add_argument('--all', action='store_true', help='list every leaf, not only differing ones')
  p.add_argument('--json', action='store_true', help='machine-readable output')
  p.add_argument('--quiet', '-q', action='store_true', help=_QUIET_HELP)
  p.set_defaults(run=_cmd_diff)

  p = sub.add_parser('demo', help='the whole story on a tiny model: old code unchanged trains and '
                                  'checkpoints, inspect, convert, plain optax loads it and '
                                  'continues to the same numbers')
  p.add_argument('--steps', type=int, default=5, help='steps before and after the checkpoint')
  p.set_defaults(run=_cmd_demo)

  p = sub.add_parser('migrate', help='rewrite legacy flax.optim code to optax + TrainState '
                                     '(diff by default; needs LibCST, the [migrate] extra)')
  p.add_argument('paths', nargs='+', metavar='PATH',
                 help='files or directories, analysed together as one project')
  mode = p.add_mutually_exclusive_group()
  mode.add_argument('--write', action='store_true', help='rewrite the files in place')
  mode.add_argument('--check', action='store_true',
                    help='write nothing; exit non-zero while legacy uses remain')
  p.add_argument('--report', metavar='FILE.json', default=None,
                 help='one record per site; per rewritten optimizer its optax expression and '
                      'the convert command for its checkpoints')
  p.add_argument('--plain-optax', action='store_true',
                 help='where plain optax is not exact, emit it with a marker naming the '
                      'difference instead of the package\'s exact transform')
  p.add_argument('--quiet', '-q', action='store_true',
                 help='no step line on stderr (on a terminal, each step that lasts over a '
                      'second - reading, analysing, rewriting each file, writing - is shown '
                      'with its time)')
  p.set_defaults(run=_cmd_migrate)
  return parser


def _fail(prefix: str, message: str, code: int, as_json: bool) -> int:
  """Reports a failure: ``{"error": message, "code": code}`` on stdout where ``--json`` was
  given (nothing on stderr), else ``prefix: error: message`` as one line on stderr."""
  if as_json:
    _write_json(sys.stdout, {'error': one_line(message, 'utf-8'), 'code': code})
    sys.stdout.flush()
  else:
    encoding = getattr(sys.stderr, 'encoding', None) or 'utf-8'
    sys.stderr.write(one_line(f'{prefix}: {message}' if code == 130 else
                              f'{prefix}: error: {message}', encoding) + '\n')
  return code


def _without_closed_loop_noise(previous):
  """``sys.unraisablehook`` that drops orbax's shutdown noise and passes on the rest.

  When orbax's save fails (a full disk), it closes its event loop while tensorstore's writes
  still finish in their threads; each then reports ``RuntimeError('Event loop is closed')`` as
  an unraisable exception, a traceback on stderr after the one-line error that said it all.
  """
  def hook(unraisable):
    error = unraisable.exc_value
    if not (isinstance(error, RuntimeError) and str(error) == 'Event loop is closed'):
      previous(unraisable)
  return hook


class _WithoutUnretrievedFutures(logging.Filter):
  """Drops asyncio's reports of futures whose exception nobody read.

  When orbax's save fails (a full disk), the futures of its failed writes are collected
  later, at a moment of the garbage collector's choosing, and asyncio then logs each one
  ('Future exception was never retrieved' with a traceback) after the one line that said it.
  """

  def filter(self, record):
    first_line = record.getMessage().split('\n', 1)[0]   # then 'future: <...>' lines
    return not first_line.endswith('exception was never retrieved')


_QUIET_FUTURES = _WithoutUnretrievedFutures()


def main(argv: Optional[List[str]] = None) -> int:
  """Runs the command line; returns the exit status (see the module docstring).

  As the program (``argv`` None) it keeps stderr to its one line for the rest of the process;
  called with ``argv`` it leaves the interpreter's hooks and asyncio's logger as they were.
  """
  previous_hook = sys.unraisablehook
  sys.unraisablehook = _without_closed_loop_noise(previous_hook)
  logging.getLogger('asyncio').addFilter(_QUIET_FUTURES)  # once, however often main runs
  try:
    return _main(argv)
  finally:
    if argv is not None:
      sys.unraisablehook = previous_hook
      logging.getLogger('asyncio').removeFilter(_QUIET_FUTURES)


def _main(argv: Optional[List[str]]) -> int:
  argv = sys.argv[1:] if argv is None else list(argv)
  # Whether the answer is JSON is known before the arguments are: a usage error is reported
  # in the format asked for too.
  as_json = '--json' in argv[:argv.index('--')] if '--' in argv else '--json' in argv
  try:
    args = _parser().parse_args(argv)
  except _ArgumentsRefused as e:
    return _fail(e.prog, str(e), 2, as_json)
  prefix = f'{_PROG} {args.command}'
  as_json = bool(getattr(args, 'json', False))
  try:
    with warnings.catch_warnings():
      # Constructing a legacy optimizer def warns; this tool exists to leave them behind.
      warnings.simplefilter('ignore', _deprecation.FlaxOptimDeprecationWarning)
      code = args.run(args, sys.stdout)
      sys.stdout.flush()
      return code
  except (convert.CheckpointError, UsageError) as e:
    return _fail(prefix, str(e), 2, as_json)
  except (ValueError, TypeError) as e:
    # What the optimizer def, the tx or jax refuse (overlapping traversals, a tx whose init
    # cannot be traced, ...): their first line names the problem; nothing was written.
    first = (str(e).splitlines() or [''])[0]
    return _fail(prefix, f'{type(e).__name__}: {first}', 2, as_json)
  except KeyboardInterrupt:
    return _fail(prefix, 'interrupted', 130, as_json)
  except BrokenPipeError:
    # The reader (e.g. `| head`) has gone: stop quietly, as a program killed by SIGPIPE.
    with contextlib.suppress(OSError):
      devnull = os.open(os.devnull, os.O_WRONLY)
      os.dup2(devnull, sys.stdout.fileno())
    return 128 + signal.SIGPIPE
  except OSError as e:
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
      return _fail(prefix, f'no space left on device: {e.filename or ""}', 2, as_json)
    return _fail(prefix, f'{e.strerror or e}: {e.filename or ""}'.rstrip(': '), 2, as_json)
