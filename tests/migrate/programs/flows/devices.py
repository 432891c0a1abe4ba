"""The program's own helper: every leaf of a value put on a device (brax's bcast_local_devices)."""
import jax


def on_device(value, device=None):
  """``value`` with each of its leaves on ``device`` (the default device when None)."""
  return jax.tree_util.tree_map(lambda leaf: jax.device_put(leaf, device), value)
