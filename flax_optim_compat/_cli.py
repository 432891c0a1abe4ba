"""``flax-optim-compat`` / ``python -m flax_optim_compat``: inspect, convert and diff legacy checkpoints.

Exit status: 0 success (``diff``: the checkpoints agree within ``--rtol``), 1 ``diff`` found
differences, 2 bad input (one line on stderr naming what is wrong; nothing is written).
"""
import argparse
import ast
import json
import os
import sys
import tempfile
import warnings
from typing import List, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import serialization

import flax_optim_compat as optim
from . import _deprecation
from . import _layouts
from . import convert

_PROG = 'flax-optim-compat'
_PROGRESS_MIN_BYTES = 100 << 20

# The optimizer names --optimizer accepts (the legacy classes; WeightNorm wraps another).
_OPTIMIZERS = _layouts.optimizer_names()

_EPILOG = """\
examples:
  %(prog)s demo
  %(prog)s inspect ckpts/checkpoint_1000
  %(prog)s inspect ckpts/ --json --depth 3
  %(prog)s convert ckpts/ --optimizer "Adam(learning_rate=1e-3, weight_decay=1e-4)" \\
      --to train-state --out state.msgpack
  %(prog)s convert ckpts/ --optimizer "Momentum(0.1, beta=0.9)" --to orbax --out orbax_ckpt
  %(prog)s convert orbax_ckpt --optimizer "Momentum(0.1, beta=0.9)" --to legacy --out legacy.msgpack
  %(prog)s diff run_a/checkpoint_1000 run_b/checkpoint_1000 --rtol 1e-5

exit status: 0 ok (diff: same within --rtol), 1 diff found differences, 2 bad input.
"""


class UsageError(ValueError):
  """Bad command-line input (reported as one line, exit status 2)."""


# ----------------------------------------------------------------------------- --optimizer


def _literal(node, text):
  try:
    return ast.literal_eval(node)
  except ValueError:
    raise UsageError(f'--optimizer {text!r}: only literal arguments are allowed (numbers, '
                     f'strings, True/False/None), not {ast.unparse(node)!r}.') from None


def _build(node, text):
  if not isinstance(node, ast.Call):
    raise UsageError(f'--optimizer {text!r}: expected a call such as "Adam(learning_rate=1e-3)", '
                     f'got {ast.unparse(node)!r}.')
  func = node.func
  name = func.attr if isinstance(func, ast.Attribute) else getattr(func, 'id', None)
  if isinstance(func, ast.Attribute) and ast.unparse(func.value) not in (
      'optim', 'flax_optim_compat', 'flax.optim'):
    name = None
  if name not in _OPTIMIZERS:
    raise UsageError(f'--optimizer {text!r}: unknown optimizer {ast.unparse(func)!r}; one of '
                     f'{", ".join(_OPTIMIZERS)}.')

  def value(arg):
    if isinstance(arg, ast.Call):
      if name != 'WeightNorm':
        raise UsageError(f'--optimizer {text!r}: only WeightNorm takes an optimizer argument.')
      return _build(arg, text)
    return _literal(arg, text)

  if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None
                                                               for k in node.keywords):
    raise UsageError(f'--optimizer {text!r}: no *args / **kwargs.')
  args = [value(a) for a in node.args]
  kwargs = {k.arg: value(k.value) for k in node.keywords}
  try:
    with warnings.catch_warnings():
      warnings.simplefilter('ignore', _deprecation.FlaxOptimDeprecationWarning)
      return getattr(optim, name)(*args, **kwargs)
  except TypeError as e:
    raise UsageError(f'--optimizer {text!r}: {e}.') from None


def parse_optimizer(text: str):
  """The :class:`OptimizerDef` of ``"Adam(learning_rate=1e-3, weight_decay=1e-4)"``, never eval'd.

  The string is parsed with ``ast``: one call of a built-in optimizer class (WeightNorm may
  wrap another call), with literal arguments only.

  Raises:
    UsageError: anything else, naming what is wrong.
  """
  try:
    tree = ast.parse(text.strip(), mode='eval')
  except SyntaxError as e:
    raise UsageError(f'--optimizer {text!r} does not parse ({e.msg}); expected e.g. '
                     '"Adam(learning_rate=1e-3)".') from None
  return _build(tree.body, text)


# ----------------------------------------------------------------------------- output helpers


def _progress_callback(path, stream):
  """A stderr progress line for files over ~100 MB when stderr is a terminal, else None."""
  try:
    size = os.path.getsize(path) if os.path.isfile(path) else 0
  except OSError:
    return None
  if size < _PROGRESS_MIN_BYTES or not stream.isatty():
    return None
  last = [-1]

  def report(done, total):
    percent = int(100 * done / total) if total else 100
    if percent != last[0]:
      last[0] = percent
      bar = '#' * (percent // 4)
      stream.write(f'\rreading {os.path.basename(path)} [{bar:<25}] {percent:3d}% '
                   f'({done / 1e6:,.0f}/{total / 1e6:,.0f} MB)')
      if done >= total:
        stream.write('\n')
      stream.flush()
  return report


def _progress_for(path):
  if isinstance(path, str) and os.path.isdir(path):
    try:
      path = convert._msgpack_file_in(path)  # pylint: disable=protected-access
    except convert.CheckpointError:
      return None
  return _progress_callback(path, sys.stderr)


# ----------------------------------------------------------------------------- commands


def _cmd_inspect(args, out) -> int:
  info = convert.inspect(args.path, progress=_progress_for(args.path))
  if args.json:
    json.dump(info.as_dict(), out, indent=1)
    out.write('\n')
    return 0
  out.write(info.summary() + '\n')
  if len(info.groups) > 1:
    for name, params in info.groups:
      out.write(f'  group {name}: {", ".join(params)}\n')
  for note in info.notes:
    out.write(f'  note: {note}\n')
  out.write(info.tree(args.depth) + '\n')
  return 0


def _read_converted(path, opt_def):
  """``(params, opt_state, step)`` of a ``--to optax|train-state|orbax`` output."""
  tree, where = convert._read_any(path)  # pylint: disable=protected-access
  if convert._find_optimizers(tree):  # pylint: disable=protected-access
    raise UsageError(f'{where} is already a legacy checkpoint; --to legacy converts what '
                     '`convert --to optax|train-state|orbax` wrote.')
  if not isinstance(tree, dict) or not {'params', 'opt_state'} <= set(tree):
    raise UsageError(f'{where} has no {{"params", "opt_state"}}: --to legacy converts what '
                     '`convert --to optax|train-state|orbax` wrote.')
  params = jax.tree_util.tree_map(jax.numpy.asarray, tree['params'])
  template = opt_def.optax_transform().init(params)
  try:
    opt_state = serialization.from_state_dict(template, tree['opt_state'], name='opt_state')
  except (ValueError, KeyError, TypeError) as e:
    raise UsageError(f'{where}: its opt_state does not fit {type(opt_def).__name__} '
                     f'({type(e).__name__}: {e}).') from None
  return params, opt_state, tree.get('step')


def _cmd_convert(args, out) -> int:
  opt_def = parse_optimizer(args.optimizer)
  progress = _progress_for(args.path)
  if args.to == 'legacy':
    params, opt_state, step = _read_converted(args.path, opt_def)
    convert.to_legacy(params, opt_state, opt_def, step=step if args.step is None else args.step,
                      path=args.out)
  elif args.to == 'orbax':
    convert.to_orbax(args.path, opt_def, args.out, progress=progress)
  else:
    convert._check_new_output(args.out)  # pylint: disable=protected-access
    state = convert.to_train_state(args.path, opt_def, progress=progress)
    if args.to == 'optax':
      tree = {'params': state.params, 'opt_state': state.opt_state}
    else:
      tree = state
    convert.write_msgpack(args.out, serialization.to_state_dict(tree))
  out.write(f'wrote {args.out} ({args.to})\n')
  return 0


def _cmd_diff(args, out) -> int:
  opt_def = parse_optimizer(args.optimizer) if args.optimizer else None
  result = convert.diff(args.a, args.b, opt_def)
  same = result.same(args.rtol)
  for path in result.only_a:
    out.write(f'only in A: {path}\n')
  for path in result.only_b:
    out.write(f'only in B: {path}\n')
  for path, what in result.mismatched:
    out.write(f'different kind: {path}: {what}\n')
  for path, max_abs, max_rel in result.leaves:
    if max_rel > args.rtol or args.all:
      out.write(f'{path}  max abs {max_abs:.3g}  max rel {max_rel:.3g}\n')
  out.write(f'{"same" if same else "different"} (rtol {args.rtol:g}): {len(result.leaves)} '
            f'leaves compared, max abs {result.max_abs:.3g}, max rel {result.max_rel:.3g}, '
            f'{len(result.only_a) + len(result.only_b) + len(result.mismatched)} structural '
            'differences\n')
  return 0 if same else 1


# ----------------------------------------------------------------------------- demo


def _cmd_demo(args, out) -> int:
  class MLP(nn.Module):

    @nn.compact
    def __call__(self, x):
      return nn.Dense(1)(nn.tanh(nn.Dense(8)(x)))

  model = MLP()
  kx, kinit = jax.random.split(jax.random.PRNGKey(0))
  x = jax.random.uniform(kx, (64, 2), minval=-1.0, maxval=1.0)
  y = jnp.sin(3.0 * x[:, :1]) + x[:, 1:]

  def loss_fn(params):
    return jnp.mean((model.apply({'params': params}, x) - y) ** 2)

  grad_fn = jax.jit(jax.value_and_grad(loss_fn))
  spec = 'Adam(learning_rate=0.03, weight_decay=1e-4)'
  opt_def = parse_optimizer(spec)

  out.write(f'1. Train a tiny MLP with the legacy API: optim.{spec}.create(params)\n')
  optimizer = opt_def.create(model.init(kinit, x)['params'])
  for _ in range(args.steps):
    loss, grads = grad_fn(optimizer.target)
    optimizer = optimizer.apply_gradient(grads)
    out.write(f'   step {int(optimizer.state.step):3d}  loss {float(loss):.6f}\n')

  with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, f'checkpoint_{args.steps}')
    with open(path, 'wb') as f:
      f.write(serialization.to_bytes(optimizer))
    out.write(f'\n2. Save a legacy msgpack checkpoint (flax.serialization.to_bytes(optimizer)):'
              f'\n   {path}\n')
    out.write(f'\n3. {_PROG} inspect {path} --depth 3\n')
    info = convert.inspect(path)
    out.write('   ' + info.summary() + '\n')
    out.write('\n'.join('   ' + line for line in info.tree(3).splitlines()) + '\n')
    out.write(f'\n4. Convert it to an optax TrainState:\n   convert.to_train_state(path, '
              f'optim.{spec}, apply_fn=model.apply)\n')
    state = convert.to_train_state(path, opt_def, apply_fn=model.apply)
  out.write(f'   TrainState(step={int(state.step)}, tx={spec}.optax_transform())\n')

  out.write(f'\n5. Continue {args.steps} steps both ways:\n')
  out.write('   step   legacy Optimizer   optax TrainState\n')
  worst = 0.0
  for _ in range(args.steps):
    legacy_loss, grads = grad_fn(optimizer.target)
    optimizer = optimizer.apply_gradient(grads)
    loss, grads = grad_fn(state.params)
    state = state.apply_gradients(grads=grads)
    worst = max(worst, abs(float(loss) - float(legacy_loss)))
    out.write(f'   {int(state.step):4d}   {float(legacy_loss):16.6f}   {float(loss):16.6f}\n')
  param_diff = max(float(jnp.max(jnp.abs(a - b))) for a, b in zip(
      jax.tree_util.tree_leaves(optimizer.target), jax.tree_util.tree_leaves(state.params)))
  out.write(f'   max |loss difference| {worst:.2g}, max |param difference| {param_diff:.2g}\n')
  return 0


# ----------------------------------------------------------------------------- main


def _parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(
      prog=_PROG, formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_EPILOG,
      description='Inspect, convert and diff legacy flax.optim (flax <= 0.5.3) msgpack '
                  'checkpoints: to optax state, a flax TrainState, orbax, and back.')
  sub = parser.add_subparsers(dest='command', required=True, metavar='COMMAND')

  p = sub.add_parser('inspect', help='what is in a checkpoint: optimizer, step, tree')
  p.add_argument('path', help='a msgpack checkpoint file, or a directory of checkpoint_<N> files')
  p.add_argument('--json', action='store_true', help='machine-readable output')
  p.add_argument('--depth', type=int, default=None, help='collapse the tree below this depth')
  p.set_defaults(run=_cmd_inspect)

  p = sub.add_parser('convert', help='legacy checkpoint -> optax / TrainState / orbax, and back')
  p.add_argument('path', help='the input checkpoint (for --to legacy: a converted one)')
  p.add_argument('--optimizer', required=True,
                 help='the optimizer that wrote it, e.g. "Adam(learning_rate=1e-3, '
                      'weight_decay=1e-4)" or "WeightNorm(Momentum(0.1))"')
  p.add_argument('--to', required=True, choices=('optax', 'train-state', 'orbax', 'legacy'),
                 help='optax: msgpack {params, opt_state}; train-state: msgpack of a flax '
                      'TrainState {step, params, opt_state}; orbax: an orbax checkpoint '
                      'directory of that TrainState; legacy: back to a legacy msgpack file')
  p.add_argument('--out', required=True, help='the output path (must not exist)')
  p.add_argument('--step', type=int, default=None,
                 help='--to legacy: the legacy step, for an --to optax file whose optax state '
                      'keeps no count (e.g. Momentum); default: the file\'s step or count')
  p.set_defaults(run=_cmd_convert)

  p = sub.add_parser('diff', help='per-leaf max abs / rel differences of two checkpoints')
  p.add_argument('a')
  p.add_argument('b')
  p.add_argument('--rtol', type=float, default=0.0,
                 help='leaves with max|a-b| / max(|a|,|b|) <= RTOL count as the same '
                      '(default 0: equal values)')
  p.add_argument('--optimizer', default=None,
                 help='convert legacy sides to the TrainState layout first (compare a legacy '
                      'file with a converted one)')
  p.add_argument('--all', action='store_true', help='list every leaf, not only differing ones')
  p.set_defaults(run=_cmd_diff)

  p = sub.add_parser('demo', help='the whole story on a tiny model: legacy training, checkpoint, '
                                  'inspect, convert to an optax TrainState, continue both ways')
  p.add_argument('--steps', type=int, default=5, help='steps before and after the checkpoint')
  p.set_defaults(run=_cmd_demo)
  return parser


def main(argv: Optional[List[str]] = None) -> int:
  """Runs the command line; returns the exit status (see the module docstring)."""
  args = _parser().parse_args(argv)
  try:
    with warnings.catch_warnings():
      # Constructing a legacy optimizer def warns; this tool exists to leave them behind.
      warnings.simplefilter('ignore', _deprecation.FlaxOptimDeprecationWarning)
      return args.run(args, sys.stdout)
  except (convert.CheckpointError, UsageError) as e:
    sys.stderr.write(f'{_PROG} {args.command}: error: {e}\n')
    return 2
  except OSError as e:
    sys.stderr.write(f'{_PROG} {args.command}: error: {e.strerror or e}: '
                     f'{e.filename or ""}\n'.replace(': \n', '\n'))
    return 2
