"""Legacy `flax.optim.lars` (not written yet)."""


class LARS:
  def __init__(self, *args, **kwargs):
    raise NotImplementedError('LARS is not implemented yet')
