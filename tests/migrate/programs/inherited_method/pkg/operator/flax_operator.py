import jax
from flax.core import freeze

from pkg.operator.base_operator import TrainingOperator


class FlaxTrainingOperator(TrainingOperator):
  def __init__(self):
    self.optimizer = None
    self.setup()

  def register(self, *, model, optimizer, criterion):
    self.model = model
    self.criterion = criterion
    self._register_optimizer(optimizer)

  def _register_optimizer(self, optimizer):
    self.optimizer = optimizer

  def train_step(self, batch):
    params = self.optimizer.target
    grad = jax.grad(lambda p: self.criterion(self.model.apply(p, batch), batch))(params)
    self.optimizer = self.optimizer.apply_gradient(grad)

  def reset_optimizer_for_params(self, params):
    self.optimizer = self.optimizer.optimizer_def.create(freeze(params))
