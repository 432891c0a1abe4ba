"""The step's own state class: its method takes the optimizer and updates it, the learning rate
growing with the optimizer's step (flax_bert's ``TrainState.take_step``)."""
from flax import struct


@struct.dataclass
class State:
  lr: float

  def take_step(self, optimizer, grad):
    step = optimizer.state.step
    return optimizer.apply_gradient(grad, learning_rate=self.lr * (step + 1))
