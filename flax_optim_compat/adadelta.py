"""Legacy `flax.optim.adadelta` (not written yet)."""


class Adadelta:
  def __init__(self, *args, **kwargs):
    raise NotImplementedError('Adadelta is not implemented yet')
