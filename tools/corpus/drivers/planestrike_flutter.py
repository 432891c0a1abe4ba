"""windmaple's planestrike_flutter at a5b45ba7 (``training/planestrike.py``: a REINFORCE policy
gradient agent for the Plane Strike board game, a Linen MLP): the script's own definitions and
its ``train`` loop. The script trains at import (its top level calls ``train`` for 500000
games, then converts the policy with jax2tf / ``jax.xla_computation``), so the driver executes
the script's top-level statements as the program wrote them (or as migrate rewrote them) up to
``summary_writer = ...`` (the imports, the constants, ``PolicyGradient``,
``get_initial_params``, ``create_optimizer`` (``optim.GradientDescent(learning_rate)
.create(params)``, migrated ``optax.sgd`` in a ``TrainState``), the jitted
``train_iteration`` that takes the optimizer as an argument (``apply_gradient``), the jitted
``run_inference``, ``train``, ``rewards_calculator``, ``play_game``, ``init_game``), in a
namespace of its own, then runs the script's ``train(summary_writer)`` with ``ITERATIONS`` =
STEPS (the script's ``LR`` 1e-2).

Each game is played by the program's ``play_game`` on the current policy (``run_inference``
on ``optimizer.target``, migrated ``.params``), with ``np.random.choice`` on its
probabilities, so a difference in the parameters changes the games. Seeds: ``random`` (the
plane's position, ``init_game``) and ``np.random`` (the strikes) seeded with 0 before
``train``.

The trajectory: after every ``train_iteration`` (the driver wraps the program's function in
the script's namespace, calling it unchanged) the policy's probabilities on four fixed boards;
then ``train``'s game lengths and the final parameters it returns. Stand-ins: tensorflow,
tensorboard (``flax.metrics.tensorboard`` imports it) and ``jax.experimental.jax2tf`` (used
only by the export after ``train``; today's jax2tf refuses to import on a stand-in
tensorflow). The summary writer is the driver's, which records nothing.

One change on both sides, not a flax.optim matter: ``play_game`` gets the policy's
probabilities (``run_inference``, unchanged) as float64, since the program normalises them in
float32 and today's numpy's ``np.random.choice`` refuses the sum ("probabilities do not sum to
1").
"""
import ast
import random

import _driver

program, steps = _driver.setup('tensorflow', 'tensorboard')
import sys  # noqa: E402

import numpy as np  # noqa: E402

sys.modules['jax.experimental.jax2tf'] = _driver._StandIn(name='jax.experimental.jax2tf')

SCRIPT = program / 'training' / 'planestrike.py'


def script_namespace(path, stop):
  """The script's top-level statements up to the first one that assigns ``stop``, executed
  as written, in a fresh namespace."""
  source = path.read_text()
  tree = ast.parse(source)
  body = []
  for stmt in tree.body:
    stored = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)
              and isinstance(n.ctx, ast.Store)}
    if stop in stored:
      break
    body.append(stmt)
  namespace = {'__name__': 'planestrike', '__file__': str(path)}
  exec(compile(ast.Module(body=body, type_ignores=[]), str(path), 'exec'), namespace)
  return namespace


class Writer:
  def scalar(self, *args, **kwargs):
    pass


ns = script_namespace(SCRIPT, 'summary_writer')
ns['ITERATIONS'] = steps
board_size = ns['BOARD_SIZE']
probe = np.random.RandomState(1).choice([-1.0, 0.0, 1.0], size=(4, board_size, board_size))
values = []
train_iteration = ns['train_iteration']


def recorded_train_iteration(optimizer, *args):
  optimizer = train_iteration(optimizer, *args)
  values.extend(np.ravel(run_inference(_driver.params_of(optimizer), probe)).tolist())
  return optimizer


ns['train_iteration'] = recorded_train_iteration
run_inference = ns['run_inference']
# play_game's probabilities, as float64: the program normalises the float32 policy in float32
# (``p / sum(probs)``) and today's numpy's ``np.random.choice`` refuses the result ("probabilities
# do not sum to 1") on both sides; the values the policy computes are unchanged.
ns['run_inference'] = lambda params, board: np.asarray(run_inference(params, board), np.float64)
random.seed(0)
np.random.seed(0)
params, game_lengths = ns['train'](Writer())
values.extend(float(n) for n in game_lengths)
_driver.emit(values, params)
