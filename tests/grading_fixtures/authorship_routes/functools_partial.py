# functools.partial of the engine's function.
import functools

from . import attention as E


def _call(name, *args, **kwargs):
    return functools.partial(getattr(E, name))(*args, **kwargs)
