"""Legacy `flax.optim.lamb` (not written yet)."""


class LAMB:
  def __init__(self, *args, **kwargs):
    raise NotImplementedError('LAMB is not implemented yet')
