"""End to end: a flax 0.3-0.5 style training script runs unchanged with `from flax import optim`.

tests/legacy_scripts/train_mlp_legacy.py is run as `python train_mlp_legacy.py WORKDIR STEPS` in
a fresh interpreter with 8 CPU devices: linen MLP, `optim.Momentum(...).create(params)`,
`apply_gradient(grads, learning_rate=lr)` under `jax.jit`, then under `jax.pmap` (with
`jax_utils.replicate` + `lax.pmean`, and with `optimizer.replicate()`), and
`checkpoints.save_checkpoint` / `restore_checkpoint` across a restart.

Where the package is installed (CI: `pip install -e .`), the script runs as is and the installed
`.pth` hook provides `flax.optim`. From a plain checkout, a `sitecustomize.py` importing the same
hook stands in for the `.pth` file (same module, same start-up moment).

The reference trajectory is computed here with plain optax (`optax.sgd` with momentum is the
exact legacy Momentum formula), not with our package.
"""
import json
import os
import pathlib
import subprocess
import sys

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import serialization

from tests import _isolated
from tests import test_import_alias

REPO = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = REPO / 'tests' / 'legacy_scripts' / 'train_mlp_legacy.py'
STEPS = 30


def _env(tmp_path, **extra):
  env = test_import_alias._clean_env(**extra)
  env['XLA_FLAGS'] = ' '.join([env.get('XLA_FLAGS', ''),
                               '--xla_force_host_platform_device_count=8']).strip()
  env['JAX_PLATFORMS'] = 'cpu'
  env.update(_isolated.waited_child_cache())
  if not test_import_alias._installed_here():
    hook_dir = tmp_path / 'site_hook'
    hook_dir.mkdir(exist_ok=True)
    (hook_dir / 'sitecustomize.py').write_text('import _flax_optim_compat_alias\n')
    env['PYTHONPATH'] = os.pathsep.join([str(hook_dir), str(REPO)])
  return env


def _run_script(tmp_path, workdir, steps, env):
  proc = subprocess.run([sys.executable, str(SCRIPT), str(workdir), str(steps)], cwd=tmp_path,
                        env=env, capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, f'STDOUT:\n{proc.stdout}\nSTDERR:\n{proc.stderr}'
  return proc


# --- the independent reference: the same model and data, trained with plain optax -----------

class _MLP(nn.Module):
  hidden: int = 32

  @nn.compact
  def __call__(self, x):
    hidden = nn.Dense(self.hidden)(x)  # created first: Dense_0, as in the script
    return nn.Dense(1)(nn.tanh(hidden))


def _reference_trajectory(steps):
  rng = np.random.RandomState(0)
  x = rng.uniform(-1.0, 1.0, size=(256, 4)).astype(np.float32)
  y = (np.sin(2.0 * x[:, :1]) + x[:, 1:2] * x[:, 2:3] - 0.5 * x[:, 3:]).astype(np.float32)
  params = _MLP().init(jax.random.PRNGKey(0), jnp.ones((1, 4), jnp.float32))['params']
  tx = optax.inject_hyperparams(optax.sgd)(learning_rate=0.1, momentum=0.9)
  opt_state = tx.init(params)

  @jax.jit
  def step_fn(params, opt_state, lr):
    loss, grads = jax.value_and_grad(
        lambda p: jnp.mean((_MLP().apply({'params': p}, x) - y) ** 2))(params)
    opt_state.hyperparams['learning_rate'] = lr
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss

  losses = []
  for step in range(steps):
    lr = 0.1 * min(1.0, (step + 1) / 5.0)  # the script's warm-up schedule
    params, opt_state, loss = step_fn(params, opt_state, lr)
    losses.append(float(loss))
  return params, losses


@pytest.fixture(scope='module')
def reference():
  return _reference_trajectory(STEPS)


def _assert_close_to_reference(target, reference_params):
  # pmap averages per-device mean gradients (8 x 32 examples) where the reference takes one
  # mean over 256: float32 rounding only, amplified a little by 30 momentum steps.
  flat_target = jax.tree_util.tree_leaves_with_path(target)
  flat_ref = jax.tree_util.tree_leaves_with_path(jax.device_get(reference_params))
  assert [jax.tree_util.keystr(p) for p, _ in flat_target] == \
      [jax.tree_util.keystr(p) for p, _ in flat_ref]
  for (path, got), (_, want) in zip(flat_target, flat_ref):
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-5,
                               err_msg=jax.tree_util.keystr(path))


def test_the_script_is_legacy_code():
  imports = [l.strip() for l in SCRIPT.read_text().splitlines()
             if l.startswith(('import ', 'from '))]
  assert 'from flax import optim' in imports
  assert not [l for l in imports if 'flax_optim_compat' in l or 'optax' in l], imports


def test_msgpack_checkpoints_interrupt_and_resume(tmp_path, reference):
  """The legacy checkpoint format (flax's msgpack backend), with a restart at step 15."""
  env = _env(tmp_path, FLAX_USE_ORBAX_CHECKPOINTING='false')
  workdir = tmp_path / 'workdir'
  first = _run_script(tmp_path, workdir, 15, env)
  assert 'starting at step 0 on 8 devices' in first.stdout
  second = _run_script(tmp_path, workdir, STEPS, env)
  assert 'starting at step 15 on 8 devices' in second.stdout
  assert sorted(os.listdir(workdir)) == ['checkpoint_15', 'checkpoint_30', 'metrics.json']

  # A legacy msgpack file with the legacy Optimizer layout ({'target', 'state': {'step', 'param_states'}}).
  state = serialization.msgpack_restore((workdir / 'checkpoint_30').read_bytes())
  assert sorted(state) == ['state', 'target']
  assert sorted(state['state']) == ['param_states', 'step']
  assert int(state['state']['step']) == STEPS
  momenta = jax.tree_util.tree_structure(state['state']['param_states'])
  assert momenta == jax.tree_util.tree_structure(
      jax.tree_util.tree_map(lambda t: {'momentum': t}, state['target']))

  reference_params, reference_losses = reference
  _assert_close_to_reference(state['target'], reference_params)
  losses = json.loads((workdir / 'metrics.json').read_text())
  assert sorted(map(int, losses)) == list(range(STEPS))
  np.testing.assert_allclose([losses[str(i)] for i in range(STEPS)], reference_losses,
                             rtol=1e-4, atol=1e-6)
  # Warnings are shown (the script is __main__) and attributed to the script's own lines.
  assert 'train_mlp_legacy.py:' in first.stderr and 'FlaxOptimDeprecationWarning' in first.stderr


def test_default_orbax_checkpointing(tmp_path, reference):
  """Today's default backend (orbax) saves and restores the legacy Optimizer too."""
  env = _env(tmp_path)
  workdir = tmp_path / 'workdir'
  steps = 12  # jit and pmap+pmean phases; the msgpack test covers the rest
  _run_script(tmp_path, workdir, steps, env)
  again = _run_script(tmp_path, workdir, steps, env)  # restores; nothing left to train
  assert f'starting at step {steps} on 8 devices' in again.stdout
  assert 'nothing to do' in again.stdout
  losses = json.loads((workdir / 'metrics.json').read_text())
  np.testing.assert_allclose([losses[str(i)] for i in range(steps)], reference[1][:steps],
                             rtol=1e-4, atol=1e-6)
