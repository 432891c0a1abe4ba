"""Legacy `flax.optim.weight_norm` (not written yet)."""


class WeightNorm:
  def __init__(self, *args, **kwargs):
    raise NotImplementedError('WeightNorm is not implemented yet')
