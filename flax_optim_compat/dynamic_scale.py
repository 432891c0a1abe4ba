"""Legacy `flax.optim.dynamic_scale` (not written yet)."""


class DynamicScale:
  def __init__(self, *args, **kwargs):
    raise NotImplementedError('DynamicScale is not implemented yet')
