"""Deprecation warnings: where legacy flax.optim warned, with its texts, as one filterable class.

Legacy texts and counts are flax 0.5.3's (checked against the legacy library); they are written
out here, not imported from the package, so a changed constant fails the test.
"""
import inspect
import json
import os
import pathlib
import subprocess
import sys
import textwrap
import warnings

import jax
import jax.numpy as jnp
import pytest
from flax import struct
from flax import traverse_util

import flax_optim_compat as optim
from tests import catalogue

REPO = pathlib.Path(__file__).resolve().parents[1]

LEGACY_USE_OPTAX = ('Use `optax` instead of `flax.optim`. Refer to the update guide '
                    'https://flax.readthedocs.io/en/latest/howtos/optax_update_guide.html for '
                    'detailed instructions.')
# Legacy's text, then the package's own tools for leaving it.
USE_OPTAX = (LEGACY_USE_OPTAX + ' To move off it, `flax-optim-compat migrate PATH` rewrites the '
             'code and `flax-optim-compat convert` the checkpoints (flax-optim-compat --help).')
# Legacy's missing spaces ("value_and_grad()instead", "value_and_grad()and") are kept.
COMPUTE_GRADIENT = ('compute_gradient() will be removed soon. Use jax.grad() or '
                    'jax.value_and_grad()instead.')
OPTIMIZE = ('optimize() will be removed soon. Use jax.grad() or jax.value_and_grad()and '
            'apply_gradient() instead.')
TRAVERSAL_PREFIX = '`flax.traverse_util.Traversal` will be deprecated.'


class _Recorded:
  """The warnings raised inside a `with` block, plus the test line that raised them."""

  def __init__(self):
    self.caught = []
    self.line = None

  def __enter__(self):
    self._cm = warnings.catch_warnings(record=True)
    self.caught = self._cm.__enter__()
    warnings.simplefilter('always')
    # The `with` statement's line: the body starts on the next one.
    self.line = inspect.currentframe().f_back.f_lineno + 1
    return self

  def __exit__(self, *exc):
    return self._cm.__exit__(*exc)

  def ours(self):
    return [w for w in self.caught if w.category is optim.FlaxOptimDeprecationWarning]

  def messages(self):
    return [str(w.message) for w in self.ours()]

  def others(self):
    return [w for w in self.caught if w.category is not optim.FlaxOptimDeprecationWarning]


def _assert_at_this_file(record, line):
  for w in record.ours():
    assert (w.filename, w.lineno) == (__file__, line), (
        f'{str(w.message)[:40]!r} attributed to {w.filename}:{w.lineno}, expected '
        f'{__file__}:{line}')


def test_warning_class_is_a_documented_deprecation_warning():
  assert issubclass(optim.FlaxOptimDeprecationWarning, DeprecationWarning)
  assert 'FlaxOptimDeprecationWarning' in optim.__all__
  assert optim.FlaxOptimDeprecationWarning.__doc__


PARAMS = {'a': {'kernel': jnp.ones((2, 3)), 'bias': jnp.zeros(3)}}

@pytest.mark.parametrize('name', catalogue.BUILTINS)
def test_every_optimizer_constructor_warns_once_at_the_callers_line(name):
  make = lambda: getattr(optim, name)(0.1)
  # The lambda's line is the user's line here (first frame outside the package).
  line = make.__code__.co_firstlineno
  with _Recorded() as rec:
    make()
  assert rec.messages() == [USE_OPTAX]
  assert rec.others() == []
  _assert_at_this_file(rec, line)


def test_weight_norm_warns_twice():
  with _Recorded() as rec:
    optim.WeightNorm(optim.Adam(0.1))
  assert rec.messages() == [USE_OPTAX, USE_OPTAX]  # Adam, then WeightNorm
  _assert_at_this_file(rec, rec.line)


def test_multi_optimizer_counts_match_legacy():
  # Legacy: MultiOptimizer((trav, Adam(...))) -> 3 (traversal, Adam, MultiOptimizer).
  with _Recorded() as rec:
    optim.MultiOptimizer((traverse_util.ModelParamTraversal(lambda p, _: True), optim.Adam(0.1)))
  assert rec.messages() == [USE_OPTAX, USE_OPTAX]
  assert [str(w.message).startswith(TRAVERSAL_PREFIX) for w in rec.others()] == [True]
  assert all(w.category is DeprecationWarning for w in rec.others())
  _assert_at_this_file(rec, rec.line)
  # Legacy: t_identity['a'] builds two traversals -> 4 with GradientDescent and the Multi.
  with _Recorded() as rec:
    optim.MultiOptimizer((traverse_util.t_identity['a'], optim.GradientDescent(1.0)))
  assert len(rec.caught) == 4
  assert rec.messages() == [USE_OPTAX, USE_OPTAX]


def test_create_with_focus_warns_for_the_implicit_multi_optimizer():
  with warnings.catch_warnings():
    warnings.simplefilter('ignore', DeprecationWarning)
    kernels = traverse_util.ModelParamTraversal(lambda p, _: 'kernel' in p)
    opt_def = optim.GradientDescent(0.1)
  with _Recorded() as rec:
    opt_def.create(PARAMS, focus=kernels)
  assert rec.messages() == [USE_OPTAX]
  _assert_at_this_file(rec, rec.line)


def _quiet_optimizer(opt_cls=optim.Momentum):
  with warnings.catch_warnings():
    warnings.simplefilter('ignore', optim.FlaxOptimDeprecationWarning)
    return opt_cls(0.1).create(PARAMS)


def test_the_legacy_silent_calls_do_not_warn():
  optimizer = _quiet_optimizer()
  grads = jax.tree_util.tree_map(jnp.ones_like, PARAMS)
  with _Recorded() as rec:
    optimizer = optimizer.apply_gradient(grads)
    optimizer = optimizer.apply_gradient(grads, learning_rate=0.05)
    state = optimizer.state_dict()
    optimizer = optimizer.restore_state(state)
    optim.Momentum.create  # attribute access, nothing else
  assert rec.caught == []


def test_compute_gradient_and_optimize_warn_like_legacy():
  optimizer = _quiet_optimizer()

  def loss_fn(params):
    return jnp.sum(params['a']['kernel'] ** 2)

  with _Recorded() as rec:
    optimizer.compute_gradient(loss_fn)
  assert rec.messages() == [COMPUTE_GRADIENT]
  _assert_at_this_file(rec, rec.line)

  with _Recorded() as rec:
    optimizer.compute_gradients(loss_fn)
  assert rec.messages() == [COMPUTE_GRADIENT]
  _assert_at_this_file(rec, rec.line)

  with _Recorded() as rec:
    optimizer.optimize(loss_fn, learning_rate=0.1)
  # optimize() warns, then calls compute_gradient(), which warns again.
  assert rec.messages() == [OPTIMIZE, COMPUTE_GRADIENT]
  _assert_at_this_file(rec, rec.line)


def test_replicate_warns_once_and_unreplicate_not():
  optimizer = _quiet_optimizer()
  devices = jax.local_devices()[:2]
  with _Recorded() as rec:
    replicated = optimizer.replicate(devices=devices)
  assert rec.messages() == [USE_OPTAX]  # creating the ReplicatedOptimizer
  _assert_at_this_file(rec, rec.line)
  with _Recorded() as rec:
    replicated.unreplicate()
  assert rec.caught == []


@struct.dataclass
class _SignHyperParams:
  learning_rate: float


class _SignSGD(optim.OptimizerDef):
  """A user's own legacy-style optimizer: its super().__init__ line is user code."""

  def __init__(self, learning_rate):
    super().__init__(_SignHyperParams(learning_rate))  # <- the warning points here

  def init_param_state(self, param):
    return ()

  def apply_param_gradient(self, step, hyper_params, param, state, grad):
    return param - hyper_params.learning_rate * jnp.sign(grad), state


def test_user_subclass_warns_at_its_own_super_call():
  with _Recorded() as rec:
    _SignSGD(0.1)
  assert rec.messages() == [USE_OPTAX]
  source_lines, first = inspect.getsourcelines(_SignSGD.__init__)
  super_line = first + next(i for i, l in enumerate(source_lines) if 'super().__init__' in l)
  _assert_at_this_file(rec, super_line)


def test_one_filter_on_the_class_silences_only_ours():
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter('always')
    warnings.filterwarnings('ignore', category=optim.FlaxOptimDeprecationWarning)
    optim.MultiOptimizer((traverse_util.ModelParamTraversal(lambda p, _: True), optim.Adam(0.1)))
  assert [w.category for w in caught] == [DeprecationWarning]  # flax's traversal warning


def test_plain_deprecation_warning_filters_apply_to_ours():
  with warnings.catch_warnings():
    warnings.simplefilter('error', DeprecationWarning)
    with pytest.raises(optim.FlaxOptimDeprecationWarning, match='Use `optax` instead'):
      optim.Adam(0.1)


def _run_python(code_or_args, cwd, **env_extra):
  env = {k: v for k, v in os.environ.items() if k not in ('PYTHONWARNINGS', 'PYTHONPATH')}
  env['PYTHONPATH'] = str(REPO)
  env.update(env_extra)
  args = code_or_args if isinstance(code_or_args, list) else ['-c', code_or_args]
  proc = subprocess.run([sys.executable] + args, cwd=cwd, env=env, capture_output=True,
                        text=True, timeout=120)
  assert proc.returncode == 0, proc.stderr
  return proc


def test_import_leaves_global_warning_filters_unchanged(tmp_path):
  # Fresh interpreter: this process's filters are pytest's.
  proc = _run_python(textwrap.dedent('''
      import json, warnings
      import jax, flax, optax, flax.training.checkpoints  # their own filters, if any, first
      before = [repr(f) for f in warnings.filters]
      import flax_optim_compat
      import flax_optim_compat.base, flax_optim_compat.adam, flax_optim_compat.dynamic_scale
      for name in ('sgd', 'momentum', 'adabelief', 'adadelta', 'adafactor', 'adagrad',
                   'lamb', 'lars', 'rmsprop', 'weight_norm'):
        __import__('flax_optim_compat.' + name)
      after_package = [repr(f) for f in warnings.filters]
      import _flax_optim_compat_alias
      from flax import optim  # via the import alias, as old code does
      after_alias = [repr(f) for f in warnings.filters]
      print(json.dumps({'package': before == after_package, 'alias': before == after_alias,
                        'alias_is_package': optim is flax_optim_compat}))
      '''), tmp_path)
  assert json.loads(proc.stdout.splitlines()[-1]) == {
      'package': True, 'alias': True, 'alias_is_package': True}


SCRIPT = '''
import jax.numpy as jnp
import flax_optim_compat as optim
import helper_module
for _ in range(3):
  opt_def = optim.Adam(0.1)   # line 6
helper_module.make()          # warns inside an imported module
'''
HELPER = '''
import flax_optim_compat as optim
def make():
  return optim.Momentum(0.1)
'''


def test_default_filters_show_warnings_from_a_script_once_per_line(tmp_path):
  (tmp_path / 'train.py').write_text(SCRIPT)
  (tmp_path / 'helper_module.py').write_text(HELPER)
  proc = _run_python(['train.py'], tmp_path)
  lines = [l for l in proc.stderr.splitlines() if 'FlaxOptimDeprecationWarning' in l]
  # Python's default filters: a DeprecationWarning is shown for code in __main__, once per
  # location, and hidden for imported modules (legacy forced "always" with a global filter;
  # we don't touch the filters).
  assert len(lines) == 1, proc.stderr
  assert 'train.py:6: FlaxOptimDeprecationWarning: Use `optax` instead' in lines[0], lines
  # `-W always::DeprecationWarning` gives legacy's "every time, everywhere".
  proc = _run_python(['-W', 'always::DeprecationWarning', 'train.py'], tmp_path)
  lines = [l for l in proc.stderr.splitlines() if 'FlaxOptimDeprecationWarning' in l]
  assert len(lines) == 4, proc.stderr
  assert 'helper_module.py:4: FlaxOptimDeprecationWarning' in lines[-1], lines
