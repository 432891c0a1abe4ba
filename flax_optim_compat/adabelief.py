"""Legacy `flax.optim.adabelief` (not written yet)."""


class AdaBelief:
  def __init__(self, *args, **kwargs):
    raise NotImplementedError('AdaBelief is not implemented yet')
