"""The optimizers under test: one entry each, driving the generic tests (test_generic.py).

Add an optimizer here and it is tested for convergence, dtype preservation and retracing in
float32 and bfloat16, under jit and without.
"""
import dataclasses
from typing import Callable

import flax_optim_compat as optim


@dataclasses.dataclass(frozen=True)
class Entry:
  name: str
  make: Callable[[], optim.OptimizerDef]  # a def with a learning rate that solves the quadratic
  steps: int = 150
  # A hyper-param that can be overridden with traced values, and three values to try.
  override: str = 'learning_rate'
  override_values: tuple = (0.05, 0.04, 0.03)
  # False for optimizers that reject 0-d params (WeightNorm): the quadratic drops its scalar.
  scalar_params: bool = True
  # The value every param starts at (LAMB: a zero param gets trust ratio 0 and never moves).
  start: float = 0.0

  def __repr__(self):
    return self.name


def _by_ndim(matrices, vectors):
  """MultiOptimizer: ``matrices`` for leaves with ndim > 1, ``vectors`` for the others."""
  import warnings  # pylint: disable=g-import-not-at-top
  with warnings.catch_warnings():  # flax deprecates constructing its traversals
    warnings.filterwarnings('ignore', message='`flax.traverse_util.Traversal` will be deprecated',
                            category=DeprecationWarning)
    big = optim.ModelParamTraversal(lambda path, value: value.ndim > 1)
    small = optim.ModelParamTraversal(lambda path, value: value.ndim <= 1)
  return optim.MultiOptimizer((big, matrices), (small, vectors))


REGISTRY = [
    Entry('GradientDescent', lambda: optim.GradientDescent(learning_rate=0.1)),
    Entry('Momentum', lambda: optim.Momentum(learning_rate=0.05, beta=0.8)),
    Entry('Momentum-nesterov-wd',
          lambda: optim.Momentum(learning_rate=0.05, beta=0.8, weight_decay=1e-4, nesterov=True),
          override='beta', override_values=(0.8, 0.7, 0.6)),
    Entry('Adam', lambda: optim.Adam(learning_rate=0.1)),
    Entry('Adam-wd', lambda: optim.Adam(learning_rate=0.1, weight_decay=1e-4),
          override='eps', override_values=(1e-3, 1e-2, 1e-1)),
    Entry('AdaBelief-wd', lambda: optim.AdaBelief(learning_rate=0.1, weight_decay=1e-4),
          override='eps', override_values=(1e-3, 1e-2, 1e-1)),
    Entry('Adadelta-wd', lambda: optim.Adadelta(learning_rate=1.0, eps=1e-2, weight_decay=1e-4),
          override='rho', override_values=(0.9, 0.8, 0.7)),
    Entry('Adagrad', lambda: optim.Adagrad(learning_rate=0.5),
          override='eps', override_values=(1e-2, 1e-1, 1.0)),
    Entry('LAMB', lambda: optim.LAMB(learning_rate=0.05), start=1.0),
    Entry('LAMB-wd', lambda: optim.LAMB(learning_rate=0.05, weight_decay=1e-4), start=1.0,
          override='eps', override_values=(1e-3, 1e-2, 1e-1)),
    # The quadratic starts at zero params, where LARS's trust ratio is 1 (override lr/beta).
    Entry('LARS', lambda: optim.LARS(learning_rate=0.1, trust_coefficient=0.5)),
    Entry('LARS-wd-nesterov',
          lambda: optim.LARS(learning_rate=0.1, trust_coefficient=0.5, weight_decay=1e-4,
                             nesterov=True),
          override='beta', override_values=(0.9, 0.8, 0.7)),
    Entry('RMSProp', lambda: optim.RMSProp(learning_rate=0.03),
          override='beta2', override_values=(0.9, 0.8, 0.7)),
    Entry('RMSProp-centered',
          lambda: optim.RMSProp(learning_rate=0.03, beta2=0.8, eps=1e-3, centered=True),
          override='eps', override_values=(1e-3, 1e-2, 1e-1)),
    # <<< issue-3a entries (AdaBelief, Adadelta, Adagrad, LAMB, LARS, RMSProp) >>>
    Entry('Adafactor', lambda: optim.Adafactor(learning_rate=0.5)),
    Entry('Adafactor-momentum-factored-wd',
          lambda: optim.Adafactor(learning_rate=0.1, beta1=0.9, min_dim_size_to_factor=2,
                                  multiply_by_parameter_scale=False, weight_decay_rate=1e-4),
          override='beta1', override_values=(0.9, 0.8, 0.7)),
    Entry('WeightNorm-Momentum',
          lambda: optim.WeightNorm(optim.Momentum(learning_rate=0.05, beta=0.8)),
          scalar_params=False),
    Entry('WeightNorm-Adam', lambda: optim.WeightNorm(optim.Adam(learning_rate=0.1), wn_decay=1e-4),
          override='eps', override_values=(1e-3, 1e-2, 1e-1), scalar_params=False),
    # <<< issue-3b entries (Adafactor, WeightNorm) >>>
    Entry('MultiOptimizer-Adam-Momentum',
          lambda: _by_ndim(optim.Adam(learning_rate=0.1), optim.Momentum(0.05, beta=0.8))),
]
