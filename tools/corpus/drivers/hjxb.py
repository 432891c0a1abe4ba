"""MahanFathi/HJxB at cfd6dca5 (Hamilton-Jacobi-Bellman value learning, a Linen ``DenseNet``
value net): the program's own ``config.defaults.get_cfg_defaults``, ``environment.make_env``
and ``algo.make_algo`` (whose ``BaseAlgo._init_value_net_and_optimizer`` builds
``optim.GradientDescent(learning_rate=cfg.VALUE_NET.LR).create(self.vparams)``), then the
program's own ``algo.train(STEPS)``, as ``main.py`` calls it, for two algorithms:

* ``DPcFVI`` (fitted value iteration): ``BaseAlgo.train_epoch``, per batch the jitted
  ``loss_and_grad(x, j, self.optimizer.target)`` and the eager
  ``self.optimizer.apply_gradient(grad)``, the target net ``self.vparams`` refreshed from the
  optimizer every epoch, the targets ``J*`` from the program's ``DiscreteSolver`` on it;
* ``ResMin`` (HJB residual minimisation): ``ResMin.train_epoch``, the same optimizer calls on
  the residual of the program's closed-form ``solve_u_star``.

Both on the program's ``PendulumEnv`` (dynamics, cost and state sampling of the program, its
states drawn from the env's own ``PRNGKey(0)``: the synthetic data are the program's own
samples). The config is shrunk the same way on both sides: value net [16, 8] + 1, 48 states a
epoch in batches of 16 (3 optimizer steps an epoch, 3 * STEPS in all), 21 discrete actions,
learning rate 1e-3, the default (GradientDescent has no schedule in this program: the rate is constant),
the policy evaluated at epoch 0 over 2 rollouts (``eval_policy``, through the trained
``vparams``) and the parameters saved at epoch 0 (``save_params``, ``serialization.to_bytes``
of the optimizer's parameters) into a temporary folder. The trajectory: per algorithm every
batch loss, the evaluation cost, then the final optimizer parameters and ``vparams``.

Library: gym 0.21.0 (the program's ``gym.Env`` base class and ``gym.spaces.Box`` bounds,
which sample the states: on the computation path, so real, from ``--site``; gym 0.26 refuses
jax arrays as bounds) and yacs (the config). Stand-ins: tensorflow and tensorboard (``flax.metrics.tensorboard``'s
summary writer: logging) and matplotlib (``utils/gif.py``: animation, off in this config).
"""
import _driver

program, steps = _driver.setup('tensorflow', 'tensorboard', 'matplotlib')
import tempfile  # noqa: E402

from algo import make_algo  # noqa: E402
from config.defaults import get_cfg_defaults  # noqa: E402
from environment import make_env  # noqa: E402

logdir = tempfile.mkdtemp(prefix='hjxb-')
values, finals = [], []
for algo_name in ('DPcFVI', 'ResMin'):
  cfg = get_cfg_defaults()
  cfg.merge_from_list([
      'ENV.ENV_NAME', 'PendulumEnv',
      'TRAIN.ALGO_NAME', algo_name,
      'VALUE_NET.FEATURES', [16, 8],
      'VALUE_NET.LR', 1e-3,
      'TRAIN.DATASET_SIZE', 48,
      'TRAIN.BATCH_SIZE', 16,
      'USOLVER.DISCRETE.GRID_POINTS', 20,
      'LOG.LOG_DIR', logdir,
      'LOG.EVAL_ACROSS_N_RUNS', 2,
  ])
  cfg.freeze()
  env = make_env(cfg)
  algo = make_algo(cfg, env)

  losses = []
  own_loss_and_grad, own_eval_policy = algo.loss_and_grad, algo.eval_policy

  def loss_and_grad(*args, _f=own_loss_and_grad, _losses=losses):
    loss, grad = _f(*args)
    _losses.append(loss)
    return loss, grad

  def eval_policy(n, _f=own_eval_policy, _losses=losses):
    cost = _f(n)
    _losses.append(cost)
    return cost

  algo.loss_and_grad, algo.eval_policy = loss_and_grad, eval_policy
  algo.train(steps)
  values.extend(losses)
  finals.append((_driver.params_of(algo.optimizer), algo.vparams))

_driver.emit(values, finals)
