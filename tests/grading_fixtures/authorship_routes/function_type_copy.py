# A new function object built from the engine function's code, globals and defaults.
import types

from . import attention as E


def _copy(fn):
    return types.FunctionType(fn.__code__, getattr(fn, "__glo" + "bals__"), fn.__name__,
                              fn.__defaults__, fn.__closure__)


def _call(name, *args, **kwargs):
    return _copy(getattr(E, name))(*args, **kwargs)
