"""shenzebang's Fokker-Planck-Self-consistency-jax: ``main_COLT.train_nwgf`` (the self-consistency
flow, adjoint ODE gradients) and ``main_PINN.train_PINN`` each build
``flax.optim.Adam(learning_rate=args.learning_rate).create(params)`` and step it with
``_opt.apply_gradient(g)`` in an un-jitted ``train_op`` (the gradient function jitted).

Each training function runs whole, as the program's ``__main__`` calls it (the same 2-D Gaussian
initial distribution, quadratic potential, ``DenseNet2`` / ``DenseNet3`` and test data from
``eval_Gaussian_score_and_log_density_FP``), with ``config.args_parser`` given
``--number_of_iterations STEPS --train_batch_size 8 --total_evolving_time 0.5
--ODE_tolerance 1e-3 --test_frequency 1`` (the test at every step; plotting and saving never
reached) and a test grid of 3x3 points instead of 201x201. The program reports its numbers only
through ``pd.DataFrame(jnp.stack([steps, score_accs, losses, log_density_accs], axis=1))``:
pandas is a stand-in whose ``DataFrame`` call is read back. The trajectory: for each program,
per step the running average loss, the score and log-density test errors; then each one's
returned parameters. Stand-ins (not on the optimizer path): pandas, matplotlib, seaborn, PIL,
and tqdm (``trange`` replaced by ``range`` in both modules). One workaround, the same on both
sides: ``model/neural_ode_model_flax.py``'s ``UNet`` (used by neither program) has a field
``channels: jnp.array = jnp.array([...])``, a default Python 3.11's dataclasses refuse as mutable
(an unhashable jax array; the Pythons of 2022 only refused list, dict and set): while that module
is imported, this one field's default is handed to dataclasses as a ``default_factory``.
"""
import _driver

program, steps = _driver.setup('matplotlib', 'seaborn', 'PIL', 'tqdm', 'pandas')
import dataclasses  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import random  # noqa: E402

_get_field = dataclasses._get_field


def _unet_channels(cls, name, *rest):
  if cls.__name__ == 'UNet' and name == 'channels' and 'channels' in cls.__dict__:
    default = cls.__dict__['channels']
    setattr(cls, 'channels', dataclasses.field(default_factory=lambda: default))
  return _get_field(cls, name, *rest)


dataclasses._get_field = _unet_channels
import model.neural_ode_model_flax  # noqa: E402,F401
dataclasses._get_field = _get_field
import main_COLT  # noqa: E402
import main_PINN  # noqa: E402
from config import args_parser  # noqa: E402
from core import distribution, potential  # noqa: E402
from model.neural_ode_model_flax import DenseNet2, DenseNet3  # noqa: E402
from test_utils import eval_Gaussian_score_and_log_density_FP  # noqa: E402

_driver.program_argv('main.py', '--number_of_iterations', steps, '--train_batch_size', 8,
                     '--total_evolving_time', 0.5, '--ODE_tolerance', '1e-3',
                     '--test_frequency', 1, '--plot_frequency', 1000000,
                     '--save_frequency', 1000000, '--test_domain_size', 3)
args = args_parser()

losses, held = [], []
for module, train, net_of in ((main_COLT, main_COLT.train_nwgf, lambda k: DenseNet2(2, k)),
                              (main_PINN, main_PINN.train_PINN, lambda k: DenseNet3(1, k))):
  module.trange = range
  key = random.PRNGKey(args.seed)
  key1, key2 = random.split(key)
  mu0 = jnp.array([-4.0, -4.0])
  sigma0 = jnp.diag(jnp.array([0.7, 1.3]))
  init_distribution = distribution.Gaussian(mu0, sigma0)
  mu_target = jnp.array([4.0, 4.0])
  sigma_target = jnp.diag(jnp.array([1.1, 0.9]))
  target_potential = potential.QuadraticPotential(mu_target, sigma_target)
  net = net_of(key1)
  test_time_stamps = jnp.linspace(0, args.total_evolving_time, num=11)
  x = y = jnp.linspace(-args.test_domain_size, args.test_domain_size, num=3)
  xx, yy = jnp.meshgrid(x, y)
  grid_points = jnp.stack([jnp.reshape(xx, (-1)), jnp.reshape(yy, (-1))], axis=1)
  scores, log_densities = eval_Gaussian_score_and_log_density_FP(
      sigma0, mu0, sigma_target, mu_target, test_time_stamps, grid_points,
      args.diffusion_coefficient)
  test_data = [test_time_stamps, grid_points, scores, log_densities]
  params = train(args, net, init_distribution, target_potential, test_data, key2)
  table = np.asarray(module.pd.DataFrame.call_args[0][0])  # steps, score, loss, log-density
  assert table.shape == (steps, 4), table.shape
  losses.extend(table[:, 1:].ravel())
  held.append(params)
_driver.emit(losses, held)
