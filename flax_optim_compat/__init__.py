"""flax_optim_compat: the legacy ``flax.optim`` API (flax 0.5.3) on today's jax, flax and optax.

Every name that ``flax.optim`` exported is here, in the module it lived in, with the same
state layout, so old training scripts and old checkpoints keep working; the math of every
built-in optimizer is an ``optax.GradientTransformation`` (see ``OptimizerDef.optax_transform``).
"""
from ._deprecation import FlaxOptimDeprecationWarning as FlaxOptimDeprecationWarning
from .sgd import GradientDescent as GradientDescent
from .momentum import Momentum as Momentum
from .adam import Adam as Adam
from .adabelief import AdaBelief as AdaBelief
from .adadelta import Adadelta as Adadelta
from .adafactor import Adafactor as Adafactor
from .adagrad import Adagrad as Adagrad
from .lamb import LAMB as LAMB
from .lars import LARS as LARS
from .rmsprop import RMSProp as RMSProp
from .weight_norm import WeightNorm as WeightNorm
from .base import ModelParamTraversal as ModelParamTraversal
from .base import MultiOptimizer as MultiOptimizer
from .base import Optimizer as Optimizer
from .base import OptimizerDef as OptimizerDef
from .base import OptimizerState as OptimizerState
from .base import ReplicatedOptimizer as ReplicatedOptimizer
from .dynamic_scale import DynamicScale as DynamicScale
from ._from_optax import from_optax as from_optax
from . import _layouts

# The legacy classes' checkpoint layouts. The order is the one names sharing a layout are joined
# in ('Momentum or LARS', 'Adam, AdaBelief or LAMB') and the one `--optimizer` lists them in.
_layouts.register_classes(
    [GradientDescent, Momentum, Adam, AdaBelief, Adadelta, Adafactor, Adagrad, LAMB, LARS,
     RMSProp],
    wrappers=[WeightNorm])

__version__ = '0.1.0'

# The legacy `flax.optim.__all__`, in its order, plus the names legacy kept in submodules
# (ReplicatedOptimizer, DynamicScale) and our warning class.
__all__ = [
    'Adam', 'AdaBelief', 'Adadelta', 'Adafactor', 'Adagrad', 'OptimizerState', 'OptimizerDef',
    'Optimizer', 'MultiOptimizer', 'ModelParamTraversal', 'LAMB', 'LARS', 'Momentum', 'RMSProp',
    'GradientDescent', 'WeightNorm', 'ReplicatedOptimizer', 'DynamicScale',
    'FlaxOptimDeprecationWarning', 'from_optax',
]
