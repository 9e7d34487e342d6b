# importlib.reload of the engine's module (a fresh copy of its functions), importlib reached
# through sys.modules.
from sys import modules

from . import attention as _engine

E = modules["importlib"].reload(_engine)
