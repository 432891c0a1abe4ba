"""Legacy `flax.optim.adafactor` (not written yet)."""


class Adafactor:
  def __init__(self, *args, **kwargs):
    raise NotImplementedError('Adafactor is not implemented yet')
