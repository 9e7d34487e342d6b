# multiprocessing's spawn start method: a fresh Python runs the engine's function.
import multiprocessing
import pkgutil

from . import attention as E


def _run(queue, name, args, kwargs):
    queue.put(getattr(pkgutil.resolve_name("andrea_course.pieces.attention"), name)(*args, **kwargs))


def _call(name, *args, **kwargs):
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=_run, args=(queue, name, args, kwargs))
    process.start()
    result = queue.get(timeout=30)
    process.join()
    return result
