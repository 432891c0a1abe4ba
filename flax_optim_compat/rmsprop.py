"""Legacy `flax.optim.rmsprop` (not written yet)."""


class RMSProp:
  def __init__(self, *args, **kwargs):
    raise NotImplementedError('RMSProp is not implemented yet')
