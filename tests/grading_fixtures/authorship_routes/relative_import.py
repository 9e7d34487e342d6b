# The package a learner's file is loaded in routes `from . import attention` to the engine's pieces.
from . import attention as E
