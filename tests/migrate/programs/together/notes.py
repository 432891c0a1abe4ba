"""A file of the same program that uses no flax.optim object: a logger whose ``optimizer``
attribute is a name, nothing of jax or flax."""


class RunLog:

  def __init__(self, optimizer_name):
    self.optimizer = optimizer_name

  def line(self, step, loss):
    return f'{self.optimizer} step {step}: {loss:.4f}'
