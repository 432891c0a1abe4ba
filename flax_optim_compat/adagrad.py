"""Legacy `flax.optim.adagrad` (not written yet)."""


class Adagrad:
  def __init__(self, *args, **kwargs):
    raise NotImplementedError('Adagrad is not implemented yet')
