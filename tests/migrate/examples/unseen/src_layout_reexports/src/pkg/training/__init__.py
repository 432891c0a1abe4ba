from .training import *
from .utils import *
