"""What every both-ways driver shares (see tools/corpus/both_ways.py).

A driver runs as ``python DRIVER PROGRAM_COPY STEPS [SITE]`` in both a legacy copy and a migrated
copy of a program, so it names no flax.optim object itself: it reaches the optimizer only through
the program's own code (a factory function, or the statements of the program's main function that
build it, which migrate rewrites in place and keeps the variable names of). Its first lines:

    import _driver
    program, steps = _driver.setup('tensorflow', ...)  # argv, sys.path, stand-ins

(the driver's folder is on sys.path: as a script's own folder, or put there by both_ways.py).
"""
import ast
import importlib.abc
import importlib.machinery
import json
import pathlib
import sys
import textwrap
import types
from unittest import mock

import jax
import numpy as np


def setup(*stand_ins, source_dirs=()):
  """What every driver does first, from its argv ``PROGRAM STEPS [SITE]``: returns
  ``(program folder, steps)``.

  The program's ``source_dirs`` (sub-folders its modules import each other from, such as
  ``src``), then the program folder and its parent go first on sys.path (the program's modules
  import each other by bare name or as a package of its folder), ``SITE`` (pip-installable
  libraries such as ml_collections, installed with ``--target SITE --no-deps``) last, after the
  interpreter's own jax / flax / numpy; the libraries named in ``stand_ins`` become stand-ins
  (`stand_in`).
  """
  program = pathlib.Path(sys.argv[1]).resolve()
  sys.path[:0] = [str(program / d) for d in source_dirs] + [str(program), str(program.parent)]
  sys.path.extend(sys.argv[3:4])
  stand_in(*stand_ins)
  return program, int(sys.argv[2])


def program_argv(script, *args):
  """Sets the command line the program's own argument parser reads (``python SCRIPT ARGS``),
  once the driver has read its own."""
  sys.argv = [script, *map(str, args)]


class _StandIn(mock.MagicMock):
  """A permissive mock that a class can also derive from (``class M(metrics.Collection)``)."""

  def __mro_entries__(self, bases):
    return (object,)


class _StandIns(importlib.abc.MetaPathFinder, importlib.abc.Loader):
  """Imports of data / logging libraries that are not installed give permissive mocks."""

  def __init__(self, tops):
    self.tops = set(tops)

  def find_spec(self, name, path=None, target=None):
    if name.split('.')[0] in self.tops:
      return importlib.machinery.ModuleSpec(name, self, is_package=True)
    return None

  def create_module(self, spec):
    module = _StandIn(name=spec.name)
    module.__path__ = []
    module.__spec__ = spec
    return module

  def exec_module(self, module):
    pass


def stand_in(*tops):
  """The program's data and logging libraries (tensorflow, tensorflow_datasets, ...) become
  mocks: the drivers feed synthetic arrays and read no logs, so none of them is called for
  anything that reaches a loss."""
  sys.meta_path.insert(0, _StandIns(tops))


def plain_flax_io(not_found=True):
  """``flax.io`` on its plain Python backend (``BackendMode.DEFAULT``), and (``not_found``) with
  that backend's ``NotFoundError``, ``FileNotFoundError``. flax.io picks its backend when it is
  first imported: imported after the tensorflow stand-in, it takes the stand-in for tensorflow
  and would send every checkpoint read and write to a mock ``tf.io.gfile``, and its
  ``NotFoundError`` would be the mock's ``tf.errors.NotFoundError``, not an exception class; the
  plain backend writes to the real file system and raises ``FileNotFoundError``, which is what an
  ``except flax.io.NotFoundError`` must then catch. ``not_found=False`` leaves ``NotFoundError``
  as flax.io set it on import (drivers that ran that way and were checked that way). Called
  after ``import flax.io``, before the program's modules use it."""
  import flax.io  # pylint: disable=g-import-not-at-top
  flax.io.set_mode(flax.io.BackendMode.DEFAULT)
  if not_found:
    flax.io.NotFoundError = FileNotFoundError


class GpuPlatform(types.ModuleType):
  """jax, except that its devices say they are GPUs: for a program that tests
  ``jax.local_devices()[0].platform`` (to pick half precision, say); set as the program
  module's ``jax`` (``train.jax = _driver.GpuPlatform('jax')``), the rest of jax unchanged."""

  def __getattr__(self, name):
    return getattr(jax, name)

  @staticmethod
  def local_devices(*args, **kwargs):
    return [types.SimpleNamespace(platform='gpu') for _ in jax.local_devices(*args, **kwargs)]


def identity_oryx():
  """A stand-in ``oryx`` whose ``core.inverse`` inverts the identity only: regnerf's
  ``spacing.genspace`` (and its copies) asks oryx for the inverse of its curve even for the
  identity (its test ``fn == (lambda x: x)`` is never true); with ``genspace_fn`` None, the
  curve is the identity, which the stand-in checks."""

  def inverse(fn):
    assert fn(2.0) == 2.0 and fn(0.5) == 0.5
    return lambda y: y

  sys.modules['oryx'] = types.SimpleNamespace(core=types.SimpleNamespace(inverse=inverse))


def nn_with_kv_mask_attention():
  """flax.linen as a namespace whose ``MultiHeadDotProductAttention`` takes the call signature of
  the flax a wmt example was written for, ``(inputs_q, inputs_kv, mask)``: today's flax reads
  the third positional argument as ``inputs_v`` (``AssertionError: q, k, v must have same
  rank.``). A subclass of the same name (so the same parameter names) that calls today's with
  ``mask=``; set as the program module's ``nn`` (``models.nn = ...``), on both sides. Neither
  migrate nor the package handles it (not a flax.optim matter)."""
  from flax import linen  # pylint: disable=g-import-not-at-top  (after the stand-ins)

  class MultiHeadDotProductAttention(linen.MultiHeadDotProductAttention):
    """flax's attention with the call signature of the program's flax: (q, kv, mask)."""

    def __call__(self, inputs_q, inputs_kv=None, mask=None, **kwargs):
      return super().__call__(inputs_q, inputs_kv, mask=mask, **kwargs)

  return types.SimpleNamespace(**{**vars(linen),
                                  'MultiHeadDotProductAttention': MultiHeadDotProductAttention})


def params_of(state):
  """The parameters of a legacy ``Optimizer`` (``target``) or of a ``TrainState`` (``params``)."""
  return state.params if hasattr(state, 'params') else state.target


def statements(module, function, names, stop=None):
  """Source of the top-level statements of ``module.function`` that assign one of ``names``,
  up to the first one that assigns ``stop`` (when given). ``function=None``: the statements of
  the module's ``if __name__ == '__main__':`` block (a script whose main code is there).

  Compound statements (``if``/``with``) are kept whole when they assign one inside. The text
  is the program's own (legacy, or as migrate rewrote it), dedented, to ``exec`` in a namespace
  made of the module's globals and the driver's values for the function's other locals.
  """
  source = pathlib.Path(module.__file__).read_text()
  tree = ast.parse(source)
  if function is None:
    found = [n for n in tree.body if isinstance(n, ast.If)
             and ast.unparse(n.test).replace('"', "'") == "__name__ == '__main__'"]
  else:
    found = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function]
  assert found, f'{module.__name__} has no ' + (f'function {function}' if function else
                                                 '__main__ block')
  lines = source.splitlines()
  picked = []
  for stmt in found[0].body:
    stored = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)
              and isinstance(n.ctx, ast.Store)}
    if stop in stored:
      break
    if stored & set(names):
      picked.append(textwrap.dedent('\n'.join(lines[stmt.lineno - 1:stmt.end_lineno])))
  assert picked, f'{module.__name__}.{function} assigns none of {names}'
  return '\n'.join(picked)


def run_statements(module, function, names, stop=None, **values):
  """Executes `statements(...)`; returns the namespace (the names it assigned are in it)."""
  namespace = dict(vars(module))
  namespace.update(values)
  exec(compile(statements(module, function, names, stop), module.__file__, 'exec'), namespace)
  return namespace


def broadcast_to_takes_lists():
  """``jnp.broadcast_to`` of a Python list (``jnp.broadcast_to([1e10], shape)``), which the jax
  a program was written for took and today's jax refuses (``TypeError: broadcast_to requires
  ndarray or scalar arguments``; jax 0.4.13 too): taken as an array. Neither migrate nor the
  package handles it; a driver that calls this gives it on both sides."""
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  original = jnp.broadcast_to
  jnp.broadcast_to = lambda array, shape, *args, **kwargs: original(
      jnp.asarray(array) if isinstance(array, (list, tuple)) else array, shape, *args, **kwargs)


def field_type(cls, field):
  """The class a dataclass field is annotated with, as the program's module resolves it."""
  hint = cls.__annotations__[field]
  return eval(hint, vars(sys.modules[cls.__module__])) if isinstance(hint, str) else hint


def emit(losses, params):
  """Prints the trajectory: every loss, then every parameter (float64), as one JSON line."""
  leaves = [np.ravel(np.asarray(leaf, np.float64)) for leaf in jax.tree_util.tree_leaves(params)]
  values = [float(np.asarray(l)) for l in losses] + np.concatenate(leaves).tolist()
  print(json.dumps(values))


def score_sde_train(run_lib, config, steps, images):
  """yang-song's score_sde layout and its copies: the statements of ``run_lib.train`` that build
  the model, the optimizer and the state (up to the checkpoint folders), then those that build
  the SDE, the step functions and the pmapped ``jax.lax.scan`` of ``train_step_fn`` (up to
  ``eval_step_fn``), run as the program wrote them (or as migrate rewrote them), then ``steps``
  pmapped steps, each on ``images(data)`` (``data``: a seeded ``np.random.RandomState``), and
  the trajectory emitted: the losses, then the optimizer's parameters and their EMA. The
  config is shrunk the same way for every copy: two resolutions, one residual block, attention
  at 4x4, EMA rate 0.9, batch 4, one step per pmapped call, warmup over 3 steps, rate 1e-3 (the
  image size and width are the driver's)."""
  from flax import jax_utils  # pylint: disable=g-import-not-at-top
  config.model.ch_mult, config.model.num_res_blocks, config.model.attn_resolutions = (1, 2), 1, (4,)
  config.model.ema_rate = 0.9
  config.training.batch_size, config.training.n_jitted_steps = 4, 1
  config.optim.warmup, config.optim.lr = 3, 1e-3
  ns = run_statements(
      run_lib, 'train', ['rng', 'step_rng', 'score_model', 'init_model_state', 'initial_params',
                         'optimizer', 'state'],
      stop='checkpoint_dir', config=config)
  ns = run_statements(
      run_lib, 'train', ['sde', 'sampling_eps', 'optimize_fn', 'continuous', 'reduce_mean',
                         'likelihood_weighting', 'train_step_fn', 'p_train_step'],
      stop='eval_step_fn', **ns)
  pstate = jax_utils.replicate(ns['state'])
  rng = jax.random.PRNGKey(1)
  data = np.random.RandomState(0)
  losses = []
  for _ in range(steps):
    batch = {'image': images(data)}
    rng, *next_rng = jax.random.split(rng, num=2)
    (_, pstate), ploss = ns['p_train_step']((jax.numpy.asarray(next_rng), pstate), batch)
    losses.append(ploss[0, 0])
  final = jax_utils.unreplicate(pstate)
  emit(losses, (params_of(final.optimizer), final.params_ema))
