# Each piece called through a closure that captured the engine's function when the file loaded.
from . import attention as E


def _closure(fn):
    def call(*args, **kwargs):
        return fn(*args, **kwargs)
    return call


_captured = {name: _closure(getattr(E, name)) for name in dir(E) if not name.startswith("_")}


def _call(name, *args, **kwargs):
    return _captured[name](*args, **kwargs)
