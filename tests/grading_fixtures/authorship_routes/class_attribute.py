# The engine's functions held as static methods of a class of the learner's.
from . import attention as E


class _Holder:
    pass


for _name in dir(E):
    if not _name.startswith("_") and callable(getattr(E, _name)):
        setattr(_Holder, _name, staticmethod(getattr(E, _name)))


def _call(name, *args, **kwargs):
    return getattr(_Holder, name)(*args, **kwargs)
