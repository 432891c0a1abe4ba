from flax import optim


class MyOpt(optim.Adam):
  """A user's optimizer: an OptimizerDef subclass (refused, FOM101)."""

  def __init__(self, learning_rate=None, beta1=0.9, scale=1.0):
    super().__init__(learning_rate=learning_rate * scale, beta1=beta1)
