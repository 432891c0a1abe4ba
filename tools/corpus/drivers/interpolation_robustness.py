"""michaelaerni's interpolation_robustness, its flax.optim part (``src/``): the full-batch
``run_experiment`` of ``experiments/linear_regression.py`` (``GradientDescent(learning_rate=
config.learning_rate).create``) and of ``experiments/logistic_regression.py`` (``Momentum(
learning_rate=..., beta=config.momentum, nesterov=config.nesterov).create``), each stepping
``optimizer.apply_gradient(grad, learning_rate=lr_schedule_fn(optimizer.state.step))`` outside
jit, the schedule flax's ``create_stepped_learning_rate_schedule`` (warmup, decay steps).

Each ``run_experiment`` runs whole, on the data sets the program itself samples, with an
``ExperimentConfig`` built by the driver (STEPS epochs, every epoch evaluated and saved, 16
training samples, dimension 8, l2 1e-3): linear regression plain (lr 0.1, warmup 2) and
adversarially trained (closed-form l-inf attack, eps 0.1, consistent); logistic regression on
the 2-GMM (lr 0.5, momentum 0.9, Nesterov, warmup 1, decay by 0.5 at epoch 2, adversarial l-inf
attack eps 0.2; an l2 attack's norm has no gradient at the zero weights the program starts from) and on the single Gaussian (momentum 0.5, no Nesterov, decay at epochs 1 and 3).
The trajectory: every metric each run hands its ``ir.mlflow.DelayedMetricLogger.add_metrics``
(read by wrapping it; the wrapper calls it), in the order given, each as two values: 1.0 and
0.0 where the metric is NaN (the program's metrics of the empty noise subsets it samples are
0/0; the names go to stderr), else 0.0 and its value; then each run's
``weights.npy`` (the weights of every epoch, written by the program's ``DataLogger``).
Stand-ins (not on the optimizer path): mlflow, dotenv, pandas, matplotlib, plotly,
tensorflow_datasets (MNIST only), torch (the PyTorch experiments). One name given back, the
same on both sides: ``models/jax.py``'s ``LinearModel`` defaults ``intercept_init`` to
``flax.linen.linear.zeros``, which today's flax no longer re-exports (neither the package's
legacy names nor migrate know it: both sides fail at import without it); the driver sets it to
``jax.nn.initializers.zeros``, what it was (the model is built with ``use_intercept=False``).
"""
import _driver

program, steps = _driver.setup('mlflow', 'dotenv', 'pandas', 'matplotlib', 'plotly',
                               'tensorflow_datasets', 'torch', source_dirs=('src',))
import sys  # noqa: E402
import tempfile  # noqa: E402

import flax.linen.linear  # noqa: E402
import jax  # noqa: E402
import numpy as np  # noqa: E402

flax.linen.linear.zeros = jax.nn.initializers.zeros

import interpolation_robustness as ir  # noqa: E402
from interpolation_robustness.experiments import linear_regression as lin  # noqa: E402
from interpolation_robustness.experiments import logistic_regression as log  # noqa: E402

losses = []
add_metrics = ir.mlflow.DelayedMetricLogger.add_metrics


nan_names = set()


def recording(self, metrics, step):
  for name in metrics:
    value = float(metrics[name])
    if np.isnan(value):  # a flag, then 0.0: a NaN on one side only stays a difference
      nan_names.add(name)
      losses.extend([1.0, 0.0])
    else:
      losses.extend([0.0, value])
  return add_metrics(self, metrics, step)


ir.mlflow.DelayedMetricLogger.add_metrics = recording
root = tempfile.mkdtemp()
common = dict(epochs=steps, eval_every_epochs=1, save_every_epochs=1, log_every_epochs=1,
              root_log_dir=root, l2_lambda=1e-3, l1_lambda=0.0)
runs = []
for adversarial in (False, True):
  runs.append((lin, lin.ExperimentConfig(
      learning_rate=0.1, learning_rate_warmup=2, noise_fraction=0.0,
      adversarial_training=adversarial, train_consistent_attacks=adversarial,
      train_attack_epsilon=0.1, test_attack_epsilon=0.1, attack_p='inf', num_train_samples=16,
      data_dim=8, data_ground_truth=lin.GroundTruth.SingleEntry,
      data_covariance_diagonal=lin.CovarianceDiagonal.Logspace,
      data_gaussian_noise_variance=0.1, data_rademacher_noise_scale=0.0, **common)))
runs.append((log, log.ExperimentConfig(
    initial_learning_rate=0.5, learning_rate_decay_epochs=(2,), learning_rate_decay_step=0.5,
    learning_rate_warmup=1, momentum=0.9, nesterov=True, label_noise=0.1,
    adversarial_training=True, train_consistent_attacks=False, train_attack_epsilon=0.2,
    test_attack_epsilon=0.2, attack_p='inf', data_num_train_samples=16, data_dim=8,
    dataset_config=log.GMMDatasetConfig(sigma=1.0, one_dim=False, scale_mean=True), **common)))
runs.append((log, log.ExperimentConfig(
    initial_learning_rate=0.5, learning_rate_decay_epochs=(1, 3), learning_rate_decay_step=0.5,
    learning_rate_warmup=0, momentum=0.5, nesterov=False, label_noise=0.0,
    adversarial_training=False, train_consistent_attacks=False, train_attack_epsilon=0.0,
    test_attack_epsilon=0.1, attack_p='inf', data_num_train_samples=16, data_dim=8,
    dataset_config=log.SingleGaussianDatasetConfig(
        single_entry_ground_truth=True, logspace_covariance=False, logits_noise_variance=0.0),
    **common)))
held = []
for i, (module, config) in enumerate(runs):
  module.run_experiment(config, f'run{i}')
  held.append(np.load(f'{root}/run{i}/weights.npy'))
print('NaN metrics:', sorted(nan_names), file=sys.stderr)
_driver.emit(losses, held)
