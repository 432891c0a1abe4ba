"""The whole story on a tiny model: ``flax-optim-compat demo`` (``python -m flax_optim_compat demo``).

1. Old flax 0.5.3 code, unchanged (``from flax import optim``), trains a tiny MLP inside its own
   train-state dataclass (with a model state beside the optimizer), saves a legacy msgpack
   checkpoint, and keeps training: the reference numbers.
2. ``flax-optim-compat inspect`` describes the checkpoint.
3. ``flax-optim-compat convert`` turns it into a flax ``TrainState`` of plain optax.
4. A plain flax/optax script, in a process where this package cannot be imported, loads the
   converted file with ``serialization.from_bytes`` and keeps training: the same numbers.

:func:`train` is a small legacy-API example (``python -m flax_optim_compat._cli._demo`` runs it and
prints the loss going down).
"""
import contextlib
import io
import os
import subprocess
import sys
import tempfile
from typing import Callable, List, Optional, TextIO

import jax
import jax.numpy as jnp
import flax.linen as nn

import flax_optim_compat as optim

_PROG = 'flax-optim-compat'
# The optimizer of the story.
OPTIMIZER = 'Adam(learning_rate=0.03, weight_decay=1e-4)'

# What old code looked like (flax <= 0.5.3); run unchanged on this package.
LEGACY_SCRIPT = '''\
import sys
import jax, jax.numpy as jnp
import flax.linen as nn
from flax import optim, serialization, struct

class MLP(nn.Module):
  @nn.compact
  def __call__(self, x):
    return nn.Dense(1)(nn.tanh(nn.Dense(8)(x)))

@struct.dataclass
class TrainState:
  step: int
  optimizer: optim.Optimizer
  model_state: dict

steps, path = int(sys.argv[1]), sys.argv[2]
kx, kinit = jax.random.split(jax.random.PRNGKey(0))
x = jax.random.uniform(kx, (64, 2), minval=-1.0, maxval=1.0)
y = jnp.sin(3.0 * x[:, :1]) + x[:, 1:]
model = MLP()
optimizer = optim.{optimizer}.create(model.init(kinit, x)['params'])
state = TrainState(step=0, optimizer=optimizer, model_state={{'loss_ema': jnp.zeros(())}})

@jax.jit
def train_step(state):
  loss_fn = lambda params: jnp.mean((model.apply({{'params': params}}, x) - y) ** 2)
  loss, grads = jax.value_and_grad(loss_fn)(state.optimizer.target)
  ema = 0.9 * state.model_state['loss_ema'] + 0.1 * loss
  return state.replace(step=state.step + 1, optimizer=state.optimizer.apply_gradient(grads),
                       model_state={{'loss_ema': ema}}), loss

for _ in range(steps):
  state, loss = train_step(state)
  print(f'legacy step {{int(state.step)}} loss {{float(loss):.7f}}')
with open(path, 'wb') as f:
  f.write(serialization.to_bytes(state))
print(f'saved {{path}}')
for _ in range(steps):
  state, loss = train_step(state)
  print(f'legacy step {{int(state.step)}} loss {{float(loss):.7f}}')
print(f'legacy loss_ema {{float(state.model_state["loss_ema"]):.7f}}')
'''

# Plain flax + optax: what a migrated script writes to load the converted file.
PLAIN_SCRIPT = '''\
import sys
from typing import Any
import jax, jax.numpy as jnp
import flax.linen as nn
import optax
from flax import serialization
from flax.training import train_state

class MLP(nn.Module):
  @nn.compact
  def __call__(self, x):
    return nn.Dense(1)(nn.tanh(nn.Dense(8)(x)))

class TrainState(train_state.TrainState):
  model_state: Any = None   # carried beside params/opt_state by the conversion

steps, path = int(sys.argv[1]), sys.argv[2]
kx, kinit = jax.random.split(jax.random.PRNGKey(0))
x = jax.random.uniform(kx, (64, 2), minval=-1.0, maxval=1.0)
y = jnp.sin(3.0 * x[:, :1]) + x[:, 1:]
model = MLP()
template = TrainState.create(apply_fn=model.apply, params=model.init(kinit, x)['params'],
                             tx={tx}, model_state={{'loss_ema': jnp.zeros(())}})
with open(path, 'rb') as f:
  state = serialization.from_bytes(template, f.read())

@jax.jit
def train_step(state):
  loss_fn = lambda params: jnp.mean((state.apply_fn({{'params': params}}, x) - y) ** 2)
  loss, grads = jax.value_and_grad(loss_fn)(state.params)
  ema = 0.9 * state.model_state['loss_ema'] + 0.1 * loss
  return state.apply_gradients(grads=grads).replace(model_state={{'loss_ema': ema}}), loss

for _ in range(steps):
  state, loss = train_step(state)
  print(f'optax step {{int(state.step)}} loss {{float(loss):.7f}}')
print(f'optax loss_ema {{float(state.model_state["loss_ema"]):.7f}}')
'''

# First lines of the plain child: this package, its flax.optim alias and flax.optim cannot be
# imported there, so the child proves the converted file needs none of them.
_BLOCK = '''\
import importlib.abc, sys
class _Blocker(importlib.abc.MetaPathFinder):
  def find_spec(self, name, path=None, target=None):
    if any(name == b or name.startswith(b + '.')
           for b in ('flax_optim_compat', '_flax_optim_compat_alias', 'flax.optim')):
      raise ModuleNotFoundError(f'{name} is not available in this process', name=name)
sys.meta_path.insert(0, _Blocker())
'''


def _child(code: str, args: List[str], *, legacy: bool) -> List[str]:
  """Runs ``code`` in a fresh interpreter; its stdout lines."""
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  env = {k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', 'PYTHONSTARTUP')}
  env.setdefault('JAX_PLATFORMS', 'cpu')
  if legacy:
    # `from flax import optim` through the alias this package installs (imported here too,
    # so the story also runs from a source checkout that was not installed).
    env['PYTHONPATH'] = root
    code = 'import _flax_optim_compat_alias\n' + code
  else:
    env['FLAX_OPTIM_COMPAT_ALIAS'] = '0'
    code = _BLOCK + code
  done = subprocess.run([sys.executable, '-W', 'ignore::DeprecationWarning', '-c', code, *args],
                        env=env, capture_output=True, text=True, check=False)
  if done.returncode:
    raise RuntimeError(f'the {"legacy" if legacy else "plain optax"} script failed:\n'
                       f'{done.stderr[-3000:]}')
  return done.stdout.splitlines()


def _losses(lines: List[str], prefix: str):
  return [(int(line.split()[2]), float(line.split()[4])) for line in lines
          if line.startswith(f'{prefix} step')]


def _indent(text: str) -> str:
  return ''.join(f'   {line}\n' for line in text.rstrip('\n').splitlines())


def story(cli_main: Callable[[List[str]], int], steps: int = 5, out: Optional[TextIO] = None,
          workdir: Optional[str] = None) -> float:
  """Runs the story (see the module docstring), writing it to ``out``.

  Args:
    cli_main: the command line's ``main(argv) -> exit status``, which runs steps 2 and 3.
    steps: training steps before and after the checkpoint.
    out: where the story is written (default stdout).
    workdir: where the files go (default a temporary directory, removed afterwards).

  Returns:
    The largest |loss difference| between the legacy continuation and the plain optax one.
  """
  out = sys.stdout if out is None else out
  with contextlib.ExitStack() as stack:
    if workdir is None:
      workdir = stack.enter_context(tempfile.TemporaryDirectory())
    checkpoint = os.path.join(workdir, f'checkpoint_{steps}')
    converted = os.path.join(workdir, 'train_state.msgpack')
    legacy_code = LEGACY_SCRIPT.format(optimizer=OPTIMIZER)
    out.write('1. Old flax 0.5.3 code, unchanged (`from flax import optim`), trains, saves a '
              'legacy checkpoint, and trains on:\n')
    out.write(_indent('\n'.join(l for l in legacy_code.splitlines()
                                if 'optim' in l and 'import' in l or '.create(' in l)))
    legacy = _child(legacy_code, [str(steps), checkpoint], legacy=True)
    out.write(_indent('\n'.join(legacy[:steps + 1])))

    def command(*argv):
      out.write(f'\n   $ {_PROG} {" ".join(_quote(a) for a in argv)}\n')
      buffer = io.StringIO()
      with contextlib.redirect_stdout(buffer):
        code = cli_main(list(argv))
      out.write(_indent(buffer.getvalue()))
      if code:
        raise RuntimeError(f'{_PROG} {argv[0]} failed with exit status {code}')
      return buffer.getvalue()

    out.write('\n2. Inspect it:')
    command('inspect', checkpoint, '--depth', '2')
    out.write('\n3. Convert it to a flax TrainState of plain optax (the model state comes '
              'along):')
    written = command('convert', checkpoint, '--optimizer', OPTIMIZER, '--to', 'train-state',
                      '--out', converted)
    tx = written.splitlines()[0].split('load it with tx=', 1)[1]
    plain_code = PLAIN_SCRIPT.format(tx=tx)
    out.write('\n4. Load it in plain flax + optax (a process where flax_optim_compat cannot '
              'be imported) and train on:\n')
    out.write(_indent('\n'.join(l for l in plain_code.splitlines() if any(
        key in l for key in ('class TrainState', 'model_state: Any', 'template =', 'tx=',
                             'with open(path', 'from_bytes')))))
    plain = _child(plain_code, [str(steps), converted], legacy=False)

  legacy_after = _losses(legacy, 'legacy')[steps:]
  plain_after = _losses(plain, 'optax')
  out.write(f'\n5. The same numbers:\n   {"step":>4}   {"legacy flax.optim":>17}   '
            f'{"plain optax":>17}\n')
  worst = 0.0
  for (step, a), (_, b) in zip(legacy_after, plain_after):
    worst = max(worst, abs(a - b))
    out.write(f'   {step:4d}   {a:17.7f}   {b:17.7f}\n')
  ema = [line.split()[-1] for line in legacy + plain if 'loss_ema' in line]
  out.write(f'   max |loss difference| {worst:.2g}; model state carried: loss_ema {ema[0]} '
            f'(legacy) vs {ema[1]} (optax)\n')
  return worst


def _quote(arg: str) -> str:
  return f'"{arg}"' if any(c in arg for c in ' ()=,') else arg


class _MLP(nn.Module):

  @nn.compact
  def __call__(self, x):
    return nn.Dense(1)(nn.tanh(nn.Dense(16)(x)))


def train(steps: int = 200, learning_rate: float = 0.05, seed: int = 0, log_every: int = 25):
  """Fits ``y = sin(3 x0) + x1`` with legacy ``optim.Adam``; returns the list of losses.

  Examples:
    >>> losses = train(steps=30, log_every=0)
    >>> bool(losses[-1] < 0.5 * losses[0])
    True
  """
  kx, kinit = jax.random.split(jax.random.PRNGKey(seed))
  x = jax.random.uniform(kx, (256, 2), minval=-1.0, maxval=1.0)
  y = jnp.sin(3.0 * x[:, :1]) + x[:, 1:]
  model = _MLP()
  optimizer = optim.Adam(learning_rate=learning_rate).create(model.init(kinit, x)['params'])

  @jax.jit
  def train_step(optimizer, lr):
    def loss_fn(params):
      return jnp.mean((model.apply({'params': params}, x) - y) ** 2)
    loss, grads = jax.value_and_grad(loss_fn)(optimizer.target)
    return optimizer.apply_gradient(grads, learning_rate=lr), loss

  losses = []
  for step in range(steps):
    # A per-step learning-rate override, the legacy way to run a schedule.
    lr = learning_rate * (1.0 - 0.5 * step / steps)
    optimizer, loss = train_step(optimizer, lr)
    losses.append(float(loss))
    if log_every and (step % log_every == 0 or step == steps - 1):
      print(f'step {step:4d}  loss {float(loss):.5f}')
  return losses


if __name__ == '__main__':
  import warnings
  warnings.simplefilter('ignore', optim.FlaxOptimDeprecationWarning)
  train()
