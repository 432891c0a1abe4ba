"""uncertainty-baselines' diabetic-retinopathy baselines (2021): the optimizer travels in a
dataclass, ``CheckpointData``, that a loader in another module builds and returns; the training
script reads ``checkpoint_data.optimizer`` from what the loader returned, beside an absl-style
flag named ``optimizer`` (a string, no optimizer). This module imports neither jax nor flax."""
import dataclasses
from typing import Any


@dataclasses.dataclass
class CheckpointData:
  train_loop_rngs: Any
  optimizer: Any
  accumulated_train_time: float


def maybe_load_checkpoint(train_loop_rngs, init_optimizer):
  # Nothing to load here: what the real loader returns when no checkpoint exists.
  return CheckpointData(train_loop_rngs=train_loop_rngs, optimizer=init_optimizer,
                        accumulated_train_time=0.0)
