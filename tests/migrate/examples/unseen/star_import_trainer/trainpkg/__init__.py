"""The package re-exports its trainer (StatefulOdeNets' ``continuous_net/__init__.py``)."""
from .training import Trainer
