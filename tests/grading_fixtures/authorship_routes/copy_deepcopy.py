# copy.deepcopy of the engine's functions and classes.
import copy

from . import attention as _engine


class _Copies:
    pass


E = _Copies()
for _name in dir(_engine):
    if not _name.startswith("_") and callable(getattr(_engine, _name)):
        setattr(E, _name, copy.deepcopy(getattr(_engine, _name)))
