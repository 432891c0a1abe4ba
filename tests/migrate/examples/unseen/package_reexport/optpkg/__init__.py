"""The package re-exports its modules' names (SurVAE's ``survae/__init__.py``)."""
from .factory import *
