"""GJBoth/modax (``examples/train_full.py``): a DeepMoD network on noisy Burgers data, trained by
``modax.training.train_full``, which takes the jitted validation lambda ``val_fn = jit(lambda
opt, state: loss_fn_mse(opt.target, ...))`` as its ``validation_fn`` parameter and calls the
``mask_scheduler`` dataclass instance (``update_mask(val_metric, epoch, optimizer)``), whose
``__call__`` keeps the best optimizer and hands one back; the update is ``create_update``'s
``jit(partial(step, ...))``.

The example runs as it is, its own statements, with ``max_epochs`` cut to STEPS and the mask
scheduler's patience / periodicity to 2 / 3 (so that it stores, switches to its periodic
regime and hands back its stored optimizer within a few epochs), ``Deepmod``'s library orders
given as ``examples/train_max_iter.py`` gives them (the example predates that argument), the
validation every epoch
(``epoch % 25`` -> ``epoch % 1``) and each validation metric recorded. Stand-ins, the same on
both sides: tensorboardX (its logger), and sklearn: ``train_test_split`` (a fixed permutation)
and ``LassoCV`` (least squares; it only picks the mask). The trajectory: every validation
metric, then the final parameters.
"""
import sys
import types

import _driver

program, steps = _driver.setup('tensorboardX', source_dirs=('src',))
import numpy as np  # noqa: E402

sklearn = types.ModuleType('sklearn')
selection = types.ModuleType('sklearn.model_selection')
linear = types.ModuleType('sklearn.linear_model')


def train_test_split(X, y, test_size=0.2, random_state=0):
  order = np.random.RandomState(random_state).permutation(len(X))
  cut = int(len(X) * (1 - test_size))
  return X[order[:cut]], X[order[cut:]], y[order[:cut]], y[order[cut:]]


class LassoCV:
  def __init__(self, *args, **kwargs):
    pass

  def fit(self, X, y):
    self.coef_ = np.linalg.lstsq(X, y, rcond=None)[0]
    return self


selection.train_test_split, linear.LassoCV = train_test_split, LassoCV
sklearn.model_selection, sklearn.linear_model = selection, linear
sys.modules.update({'sklearn': sklearn, 'sklearn.model_selection': selection,
                    'sklearn.linear_model': linear})

from modax.training import training  # noqa: E402

metrics_seen = []
source = (program / 'training_src.py')
code = (program / 'src/modax/training/training.py').read_text()
code = code.replace('if epoch % 25 == 0:', 'if epoch % 1 == 0:').replace(
    'val_metric = validation_fn(optimizer, state)',
    'val_metric = validation_fn(optimizer, state); _seen.append(float(val_metric))')
namespace = vars(training)
namespace['_seen'] = metrics_seen
exec(compile(code, str(program / 'src/modax/training/training.py'), 'exec'), namespace)

example = (program / 'examples/train_full.py').read_text()
example = example.replace('max_epochs=10000', f'max_epochs={steps}').replace(
    'Deepmod([30, 30, 30, 1])', 'Deepmod([30, 30, 30, 1], (5, 4))').replace(
    '"patience": 500, "delta": 1e-5, "periodicity": 200',
    '"patience": 2, "delta": 1e-5, "periodicity": 3')
scope = {'__name__': '__main__'}
exec(compile(example, str(program / 'examples/train_full.py'), 'exec'), scope)
_driver.emit(metrics_seen, _driver.params_of(scope['optimizer']))
