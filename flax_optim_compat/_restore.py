"""Restoring an optimizer's (target, state) from a legacy state dict.

For now the legacy behaviour (``flax.serialization.from_state_dict`` on each half); issue 5
makes it strict: structure, shapes and dtypes are checked before anything is returned.
"""
from flax import serialization


def restore_target_and_state(opt_def, opt_target, opt_state, state_dict):
  del opt_def
  return (serialization.from_state_dict(opt_target, state_dict['target']),
          serialization.from_state_dict(opt_state, state_dict['state']))
